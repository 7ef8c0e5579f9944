package flow

import "testing"

func TestGraphEscapers(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:        `plain`,
		`say "hi"`:     `say #quot;hi#quot;`,
		"a#b<c>d|e\nf": `a#35;b#lt;c#gt;d#124;e f`,
	} {
		if got := mermaidText(in); got != want {
			t.Errorf("mermaidText(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		`plain`:        `"plain"`,
		`say "hi"`:     `"say \"hi\""`,
		`back\slash`:   `"back\\slash"`,
		"two\nlines\r": `"two\nlines"`,
	} {
		if got := dotQuote(in); got != want {
			t.Errorf("dotQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
