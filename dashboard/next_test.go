package dashboard_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// hostileNext are sign-in redirect targets that try to leave the site.
var hostileNext = []string{
	"//evil.example/x", "/\\evil.example/x", "\\/evil.example/x", "/\t/evil.example/x", "/\n/evil.example/x",
	"/%09/evil.example/x", "/%2F/evil.example/x", "%2F%2Fevil.example/x", "/%5Cevil.example/x", "/.//evil.example/x",
	"https://evil.example/x", "javascript:alert(1)", "//user@evil.example", "/\uff0f/evil.example", "/%EF%BC%8F%EF%BC%8Fevil.example",
	"/" + strings.Repeat("/", 3000) + "evil.example",
}

// browserResolve resolves a Location header as a browser does: tabs and
// newlines dropped, a backslash read as a slash.
func browserResolve(base *url.URL, loc string) (*url.URL, error) {
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(loc)
	return base.Parse(strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' }))
}

// Through the real handlers: the sign-in form keeps only a same-site next,
// and the redirect after signing in stays on the site.
func TestLoginRedirectStaysOnSite(t *testing.T) {
	e := newEnv(t, false)
	base, _ := url.Parse(e.url + "/login")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, next := range hostileNext {
		resp, err := noFollow.PostForm(e.url+"/login", url.Values{"token": {e.admin}, "next": {next}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		u, err := browserResolve(base, loc)
		if resp.StatusCode != http.StatusSeeOther || err != nil || u.Host != base.Host || u.Scheme != base.Scheme {
			t.Errorf("next %q: %d to Location %q, which a browser resolves to %v", next, resp.StatusCode, loc, u)
		}

		resp, err = http.Get(e.url + "/login?next=" + url.QueryEscape(next))
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		_, _ = io.Copy(&body, resp.Body)
		resp.Body.Close()
		if b := body.String(); strings.Contains(b, "//evil") || strings.Contains(b, "\\evil") || strings.Contains(b, "javascript:") || strings.Contains(b, "%09") {
			t.Errorf("the form of /login?next=%q keeps the target", next)
		}
	}
}

// In Chromium: signing in through the form of a hostile link ends on the
// site.
func TestLoginRedirectInBrowser(t *testing.T) {
	e := newEnv(t, false)
	b := newBrowser(t)
	for _, next := range []string{"/\t/evil.example/x", "/\\evil.example/x", "//evil.example/x", "/%09/evil.example/x", "https://evil.example/x"} {
		b.run("sign out", network.ClearBrowserCookies())
		b.open(e.url + "/login?next=" + url.QueryEscape(next))
		b.run("type the token", chromedp.SendKeys("#token", e.admin, chromedp.ByQuery))
		b.submit("sign in", chromedp.Submit("#token", chromedp.ByQuery))
		var href string
		b.eval("location.href", &href)
		if !strings.HasPrefix(href, e.url+"/") {
			t.Errorf("signing in with next %q ends at %s, off %s", next, href, e.url)
		}
	}
	b.noErrors("signing in")
}
