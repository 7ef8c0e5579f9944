package dashboard

import (
	"strings"
	"testing"
)

// The escapes of <, > and & that encoding/json writes are undone inside
// strings only, and no other escape is touched.
func TestHTMLUnescaped(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":"\u003cb\u003e \u0026 c"}`, `{"a":"<b> & c"}`},
		{`{"\u003ckey\u003e":1}`, `{"<key>":1}`},
		// An escaped backslash before u003c is text, not an escape.
		{`{"a":"\\u003c"}`, `{"a":"\\u003c"}`},
		{`{"a":"say \"\u003c\" \\"}`, `{"a":"say \"<\" \\"}`},
		{`{"a":"\u00e9\n"}`, `{"a":"\u00e9\n"}`},
		{`"\u003C"`, `"<"`},
		{`[1,"\u0026",true]`, `[1,"&",true]`},
	} {
		if got := string(htmlUnescaped([]byte(c.in))); got != c.want {
			t.Errorf("htmlUnescaped(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// A filter's value goes to the API as typed when it is a JSON scalar,
// and as a JSON string otherwise.
func TestFilterValue(t *testing.T) {
	for in, want := range map[string]string{"": "", "42": "42", "1.5": "1.5", "true": "true", `"42"`: `"42"`,
		"c-7": `"c-7"`, "null": `"null"`, `{"a":1}`: `"{\"a\":1}"`, "a b": `"a b"`} {
		if got := filterValue(in); got != want {
			t.Errorf("filterValue(%q) = %s, want %s", in, got, want)
		}
	}
}

// A row's preview is the compact data, cut to previewRunes.
func TestPreview(t *testing.T) {
	if got := preview([]byte("{\n  \"a\": \"\\u003cb\\u003e\"\n}")); got != `{"a":"<b>"}` {
		t.Errorf("preview of a short value: %s", got)
	}
	long := preview([]byte(`{"a":"` + strings.Repeat("é", 200) + `"}`))
	if n := len([]rune(long)); n != previewRunes || !strings.HasSuffix(long, "…") {
		t.Errorf("preview of a long value: %d runes: %s", n, long)
	}
}
