package dashboard

import (
	"net/url"
	"strings"
	"testing"
)

// hostileNext are redirect targets that try to leave the site, each in a
// way some browser or URL parser understands.
var hostileNext = []string{
	"//evil.example/x", "///evil.example/x", "/\\evil.example/x", "\\/evil.example/x", "\\\\evil.example/x",
	"/\t/evil.example/x", "/\n/evil.example/x", "/\r\n/evil.example/x", "\t//evil.example/x", " //evil.example/x",
	"/%09/evil.example/x", "/%0a/evil.example/x", "/%2F/evil.example/x", "/%2f%2fevil.example/x", "%2F%2Fevil.example/x",
	"/%5Cevil.example/x", "/%5c%5cevil.example/x", "/.//evil.example/x", "/./../..//evil.example/x", "/a/../..//evil.example/x",
	"https://evil.example/x", "http:evil.example", "javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html,<script>alert(1)</script>",
	"/javascript:alert(1)", "//user@evil.example", "/@evil.example", "https:/\\evil.example",
	"/\u2215evil.example", "/\uff0f/evil.example", "/\u3002evil.example", "/%E2%88%95evil.example", "/%EF%BC%8F%EF%BC%8Fevil.example",
	"/\x00/evil.example", "/%00/evil.example", "/\x7f/evil.example", "evil.example", "",
	"/" + strings.Repeat("a", 5000), "/" + strings.Repeat("/", 3000) + "evil.example",
}

// browserResolve resolves a Location header against base as a browser
// does: it drops tabs and newlines, trims C0 controls and spaces, and
// reads a backslash as a slash.
func browserResolve(base *url.URL, loc string) (*url.URL, error) {
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(loc)
	loc = strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' })
	return base.Parse(loc)
}

func TestSafeNextStaysOnSite(t *testing.T) {
	base, _ := url.Parse("https://heph.example/login")
	for _, next := range hostileNext {
		got := safeNext(next)
		u, err := browserResolve(base, got)
		if err != nil || u.Scheme != "https" || u.Host != "heph.example" || u.User != nil {
			t.Errorf("safeNext(%q) = %q, which a browser resolves to %v (%v)", next, got, u, err)
		}
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.ContainsAny(got, "\\\t\r\n") || len(got) > maxNext {
			t.Errorf("safeNext(%q) = %q, not a plain path", next, got)
		}
	}
}

// A path of the site, with its query, is kept; "/./" and repeated slashes
// collapse.
func TestSafeNextKeepsPaths(t *testing.T) {
	for next, want := range map[string]string{
		"/":                                  "/",
		"/runs":                              "/runs",
		"/runs/":                             "/runs/",
		"/runs?status=failed&workflow=order": "/runs?status=failed&workflow=order",
		"/runs/01H%2Fx":                      "/runs/01H%2Fx",
		"/runs/./a//b":                       "/runs/a/b",
		"/definitions/order%20v2":            "/definitions/order%20v2",
		"/runs?q=a%20b":                      "/runs?q=a+b",
		"/runs#frag":                         "/runs",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
