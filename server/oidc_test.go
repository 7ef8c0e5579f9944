package server

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/hephaestus-go/hephaestus/internal/oidctest"
)

func newTestOIDC(t *testing.T, p *oidctest.Provider, mod func(*OIDCConfig)) *OIDC {
	t.Helper()
	cfg := &OIDCConfig{
		Issuer: p.Issuer(), ClientID: p.ClientID, ClientSecret: p.ClientSecret,
		RedirectURL: "http://127.0.0.1:1/login/oidc/callback",
		Roles:       map[string]string{"finance": "approver", "ops": "operator", "platform": "admin"},
	}
	if mod != nil {
		mod(cfg)
	}
	o, err := NewOIDC(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return o
}

func TestOIDCVerifyIDToken(t *testing.T) {
	p := oidctest.New(oidctest.User{})
	defer p.Close()
	o := newTestOIDC(t, p, nil)
	ctx := context.Background()

	id, err := o.Verify(ctx, p.IDToken(oidctest.User{Subject: "s1", Username: "ann", Groups: []string{"finance", "ops"}}, "", p.ClientID))
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "ann" || id.Subject != "s1" || id.Role != "operator" || strings.Join(id.Groups, ",") != "finance,ops" {
		t.Fatalf("identity = %+v; want ann, s1, operator (the stronger of approver and operator), groups finance,ops", id)
	}

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	expired := p.Claims(oidctest.User{Subject: "s1", Username: "ann", Groups: []string{"finance"}}, "", p.ClientID)
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	for name, raw := range map[string]string{
		"signed by another key":      oidctest.SignWith(other, "k1", p.Claims(oidctest.User{Subject: "s1", Username: "ann", Groups: []string{"platform"}}, "", p.ClientID)),
		"for another audience":       p.IDToken(oidctest.User{Subject: "s1", Username: "ann", Groups: []string{"platform"}}, "", "someone-else"),
		"expired":                    p.Sign(expired),
		"in no mapped group":         p.IDToken(oidctest.User{Subject: "s2", Username: "bob", Groups: []string{"guests"}}, "", p.ClientID),
		"without a name":             p.IDToken(oidctest.User{Groups: []string{"platform"}}, "", p.ClientID),
		"not a JWT":                  "heph_not-a-jwt",
		"a JWT with a bad signature": p.IDToken(oidctest.User{Subject: "s1", Username: "ann", Groups: []string{"finance"}}, "", p.ClientID) + "x",
	} {
		if id, err := o.Verify(ctx, raw); !errors.Is(err, ErrOIDC) {
			t.Errorf("%s: Verify = %+v, %v; want ErrOIDC", name, id, err)
		}
	}

	// A default role admits users of unmapped groups.
	d := newTestOIDC(t, p, func(c *OIDCConfig) { c.DefaultRole = "read" })
	id, err = d.Verify(ctx, p.IDToken(oidctest.User{Subject: "s2", Username: "bob", Groups: []string{"guests"}}, "", p.ClientID))
	if err != nil || id.Role != "read" {
		t.Fatalf("default role: %+v, %v; want read", id, err)
	}
}

func TestOIDCCodeFlow(t *testing.T) {
	p := oidctest.New(oidctest.User{Subject: "s3", Email: "cy@example.test", Groups: []string{"platform"}})
	defer p.Close()
	o := newTestOIDC(t, p, nil)
	ctx := context.Background()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer noFollow.CloseIdleConnections()
	codeFor := func(state, nonce, verifier string) string {
		t.Helper()
		res, err := noFollow.Get(o.AuthCodeURL(state, nonce, verifier))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		u, err := url.Parse(res.Header.Get("Location"))
		if err != nil || res.StatusCode != http.StatusFound {
			t.Fatalf("authorize: %d %q, %v", res.StatusCode, res.Header.Get("Location"), err)
		}
		if got := u.Query().Get("state"); got != state {
			t.Fatalf("state back = %q, want %q", got, state)
		}
		return u.Query().Get("code")
	}

	v := oauth2.GenerateVerifier()
	id, err := o.Exchange(ctx, codeFor("st1", "n1", v), v, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "cy@example.test" || id.Role != "admin" {
		t.Fatalf("identity = %+v; want cy@example.test (email, no preferred_username), admin", id)
	}

	// Another nonce than the sign-in's, another PKCE verifier, a code used
	// twice: refused.
	if _, err := o.Exchange(ctx, codeFor("st2", "n2", v), v, "n-other"); !errors.Is(err, ErrOIDC) {
		t.Errorf("nonce mismatch: %v; want ErrOIDC", err)
	}
	if _, err := o.Exchange(ctx, codeFor("st3", "n3", v), oauth2.GenerateVerifier(), "n3"); !errors.Is(err, ErrOIDC) {
		t.Errorf("PKCE verifier mismatch: %v; want ErrOIDC", err)
	}
	code := codeFor("st4", "n4", v)
	if _, err := o.Exchange(ctx, code, v, "n4"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Exchange(ctx, code, v, "n4"); !errors.Is(err, ErrOIDC) {
		t.Errorf("code reused: %v; want ErrOIDC", err)
	}
}

func TestOIDCConfigErrors(t *testing.T) {
	for name, c := range map[string]*OIDCConfig{
		"no issuer":   {ClientID: "x"},
		"no client":   {Issuer: "http://127.0.0.1:1"},
		"bad role":    {Issuer: "http://127.0.0.1:1", ClientID: "x", Roles: map[string]string{"g": "root"}},
		"bad default": {Issuer: "http://127.0.0.1:1", ClientID: "x", DefaultRole: "root"},
	} {
		if _, err := NewOIDC(context.Background(), c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if m, err := ParseRoles("finance=approver, platform=admin"); err != nil || m["finance"] != "approver" || m["platform"] != "admin" {
		t.Fatalf("ParseRoles = %v, %v", m, err)
	}
	for _, bad := range []string{"finance", "finance=root", "=admin"} {
		if _, err := ParseRoles(bad); err == nil {
			t.Errorf("ParseRoles(%q): no error", bad)
		}
	}
}
