package dashboard_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/dashboard"
	"github.com/hephaestus-go/hephaestus/internal/oidctest"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// oidcEnv is a server and dashboard that sign users in with a local
// OpenID Connect provider.
type oidcEnv struct {
	url      string
	provider *oidctest.Provider
	store    store.Admin
}

func newOIDCEnv(t *testing.T, user oidctest.User) *oidcEnv {
	t.Helper()
	ctx := context.Background()
	p := oidctest.New(user)
	t.Cleanup(p.Close)
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	logger := slog.New(slog.DiscardHandler)
	c, err := heph.New(&heph.Config{Store: st, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	if err := c.Start(cctx); err != nil {
		t.Fatal(err)
	}
	h := http.NotFoundHandler()
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	base := "http://" + hs.Listener.Addr().String()
	o, err := server.NewOIDC(ctx, &server.OIDCConfig{
		Issuer: p.Issuer(), ClientID: p.ClientID, ClientSecret: p.ClientSecret, RedirectURL: base + "/login/oidc/callback",
		Roles: map[string]string{"finance": "approver", "platform": "admin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	api, err := server.New(&server.Config{Client: c, Store: st, Logger: logger, OIDC: o})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(&dashboard.Config{API: api, Logger: logger, OIDC: o, Sessions: api})
	if err != nil {
		t.Fatal(err)
	}
	h = d
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		cancel()
		_ = c.Stop(context.Background())
		http.DefaultClient.CloseIdleConnections()
	})
	return &oidcEnv{url: hs.URL, provider: p, store: st}
}

// whoami asks the API who a bearer token or session cookie is.
func whoami(t *testing.T, base, bearer, cookie string) (int, server.Caller) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: server.SessionCookie, Value: cookie})
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var who server.Caller
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &who); err != nil {
			t.Fatal(err)
		}
	}
	return res.StatusCode, who
}

// A user signs in to the dashboard through the identity provider, in
// Chromium: the login page's button, the provider, the callback, and the
// page asked for, as the provider's user with the role of their groups.
func TestOIDCSignInInBrowser(t *testing.T) {
	e := newOIDCEnv(t, oidctest.User{Subject: "s-ann", Username: "ann", Groups: []string{"finance"}})
	b := newBrowser(t)
	b.open(e.url + "/login?next=" + url.QueryEscape("/approvals"))
	b.run("the provider's button", chromedp.WaitVisible("#sso", chromedp.ByQuery))
	b.run("sign in with the provider", chromedp.Click("#sso", chromedp.ByQuery))
	if loc := waitLocation(t, b, e.url+"/approvals"); !strings.HasPrefix(loc, e.url+"/approvals") {
		t.Fatalf("after sign-in the browser is at %s, want %s/approvals", loc, e.url)
	}
	b.run("the page", chromedp.WaitVisible("header .actor", chromedp.ByQuery))
	if who := b.text("header .actor"); !strings.Contains(who, "ann") || !strings.Contains(who, "approver") {
		t.Fatalf("the header shows %q, want ann as approver", who)
	}
	var cookies string
	b.eval(`document.cookie`, &cookies)
	if strings.Contains(cookies, server.SessionCookie) {
		t.Fatalf("the session cookie is readable from the page: %q", cookies)
	}
	b.noErrors("OIDC sign-in")

	// A hostile next stays on the site.
	b.open(e.url + "/login?next=" + url.QueryEscape("/\t/evil.example/x"))
	b.run("sign in with the provider again", chromedp.Click("#sso", chromedp.ByQuery))
	if loc := waitLocation(t, b, e.url+"/"); !strings.HasPrefix(loc, e.url+"/") {
		t.Fatalf("a hostile next took the browser to %s", loc)
	}
}

// waitLocation waits (through the navigations of a sign-in) until the
// browser is at a URL starting with prefix, or 90 seconds have passed,
// and returns where it is.
func waitLocation(t *testing.T, b *browser, prefix string) string {
	t.Helper()
	var loc string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		var ready bool
		if err := chromedp.Run(b.ctx, chromedp.Location(&loc), chromedp.Evaluate(`document.readyState === "complete" && !document.querySelector('meta[http-equiv="refresh"]')`, &ready)); err == nil &&
			strings.HasPrefix(loc, prefix) && ready {
			return loc
		}
		time.Sleep(100 * time.Millisecond)
	}
	return loc
}

// The callback refuses an answer without this browser's sign-in (no
// cookie), with another state, or with the provider's error; nothing of
// that signs anyone in.
func TestOIDCCallbackRefusals(t *testing.T) {
	e := newOIDCEnv(t, oidctest.User{Subject: "s-bo", Username: "bo", Groups: []string{"platform"}})
	jar := &cookieJar{m: map[string]*http.Cookie{}}
	noFollow := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer noFollow.CloseIdleConnections()
	get := func(u string) *http.Response {
		t.Helper()
		res, err := noFollow.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	// Start a sign-in, let the provider answer, keep the code.
	start := get(e.url + "/login/oidc?next=/")
	if start.StatusCode != http.StatusFound {
		t.Fatalf("start: %d", start.StatusCode)
	}
	toProvider := start.Header.Get("Location")
	back, err := url.Parse(get(toProvider).Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	code, state := back.Query().Get("code"), back.Query().Get("state")
	cb := e.url + "/login/oidc/callback?"
	for name, q := range map[string]url.Values{
		"another state":     {"code": {code}, "state": {"forged"}},
		"the provider said": {"error": {"access_denied"}},
	} {
		res := get(cb + q.Encode())
		if c := res.Header.Get("Set-Cookie"); strings.Contains(c, server.SessionCookie+"=hephs_") {
			t.Errorf("%s: a session was set: %s", name, c)
		}
	}
	// Without the sign-in's cookie (another browser), the right state and
	// code are refused too.
	plain := &http.Client{CheckRedirect: noFollow.CheckRedirect}
	res, err := plain.Get(cb + url.Values{"code": {code}, "state": {state}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if strings.Contains(res.Header.Get("Set-Cookie"), server.SessionCookie+"=hephs_") {
		t.Fatal("a callback without the sign-in's cookie set a session")
	}
	// The sign-in's cookie was cleared by the refusals: start again and
	// finish properly; the session is bo's, an admin by group.
	jar.m = map[string]*http.Cookie{}
	back, err = url.Parse(get(get(e.url + "/login/oidc?next=/").Header.Get("Location")).Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	res = get(cb + back.RawQuery)
	session := jar.m[server.SessionCookie]
	if res.StatusCode != http.StatusOK || session == nil || !strings.HasPrefix(session.Value, server.SessionPrefix) {
		t.Fatalf("callback: %d, session %v", res.StatusCode, session)
	}
	if code, who := whoami(t, e.url, "", session.Value); code != http.StatusOK || who.Actor != "bo" || who.Role != "admin" || who.Via != "session" {
		t.Fatalf("whoami with the session: %d %+v", code, who)
	}
}

// The API takes the provider's ID tokens as bearer tokens: the user they
// name, with the role of their groups; never one the provider did not
// sign for this server, nor a disabled principal's.
func TestOIDCBearerIDToken(t *testing.T) {
	e := newOIDCEnv(t, oidctest.User{})
	p := e.provider
	ann := oidctest.User{Subject: "s-ann", Username: "ann", Groups: []string{"finance"}}
	code, who := whoami(t, e.url, p.IDToken(ann, "", p.ClientID), "")
	if code != http.StatusOK || who.Actor != "ann" || who.Role != "approver" || who.Via != "oidc" || strings.Join(who.Groups, ",") != "finance" {
		t.Fatalf("whoami with ann's ID token: %d %+v", code, who)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"signed by another key": oidctest.SignWith(other, "k1", p.Claims(oidctest.User{Subject: "s", Username: "root", Groups: []string{"platform"}}, "", p.ClientID)),
		"for another client":    p.IDToken(oidctest.User{Subject: "s", Username: "root", Groups: []string{"platform"}}, "", "other-client"),
		"of no mapped group":    p.IDToken(oidctest.User{Subject: "s", Username: "guest", Groups: []string{"guests"}}, "", p.ClientID),
	} {
		if code, who := whoami(t, e.url, tok, ""); code != http.StatusUnauthorized {
			t.Errorf("%s: %d %+v, want 401", name, code, who)
		}
	}
	// An admin disables ann: her ID tokens stop working.
	if _, err := e.store.EnsurePrincipal(context.Background(), &store.EnsurePrincipalParams{Name: "ann", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.DisablePrincipal(context.Background(), "ann", time.Now()); err != nil {
		t.Fatal(err)
	}
	if code, _ := whoami(t, e.url, p.IDToken(ann, "", p.ClientID), ""); code != http.StatusUnauthorized {
		t.Fatalf("a disabled principal's ID token: %d, want 401", code)
	}
}

// cookieJar keeps cookies by name, whatever their path.
type cookieJar struct{ m map[string]*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) {
	for _, c := range cs {
		if c.MaxAge < 0 {
			delete(j.m, c.Name)
			continue
		}
		j.m[c.Name] = c
	}
}

func (j *cookieJar) Cookies(u *url.URL) []*http.Cookie {
	var out []*http.Cookie
	for _, c := range j.m {
		if strings.HasPrefix(u.Path, c.Path) || c.Path == "" {
			out = append(out, c)
		}
	}
	return out
}
