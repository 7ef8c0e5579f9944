// Package oidctest is a small OpenID Connect provider for tests: discovery,
// a signing key, an authorization endpoint that signs in the user the test
// chose without a form, and a token endpoint that exchanges the code (with
// PKCE) for an ID token. It runs on an httptest server on loopback.
package oidctest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// User is who the provider signs in.
type User struct {
	// Subject is the ID token's sub; Username its preferred_username,
	// Email its email.
	Subject, Username, Email string
	// Groups go in the groups claim.
	Groups []string
}

// Provider is a running test provider. Close it when done.
type Provider struct {
	srv *httptest.Server
	key *rsa.PrivateKey
	// ClientID and ClientSecret are the only client the provider knows.
	ClientID, ClientSecret string

	mu    sync.Mutex
	user  User
	codes map[string]grant
	// Now stamps the tokens; defaults to time.Now.
	Now func() time.Time
}

// grant is an issued authorization code.
type grant struct {
	user                     User
	nonce, challenge, client string
	redirect                 string
}

// New starts a provider that signs in u.
func New(u User) *Provider {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	p := &Provider{key: key, ClientID: "heph-test", ClientSecret: "heph-test-secret", user: u, codes: map[string]grant{}, Now: time.Now}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /keys", p.keys)
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	return p
}

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.srv.URL }

// Close stops the provider.
func (p *Provider) Close() { p.srv.Close() }

// SetUser changes who the next sign-in signs in.
func (p *Provider) SetUser(u User) {
	p.mu.Lock()
	p.user = u
	p.mu.Unlock()
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"issuer":                                p.Issuer(),
		"authorization_endpoint":                p.Issuer() + "/authorize",
		"token_endpoint":                        p.Issuer() + "/token",
		"jwks_uri":                              p.Issuer() + "/keys",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
	})
}

func (p *Provider) keys(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &p.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
}

// authorize signs the current user in at once and sends the browser back
// with a code.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != p.ClientID || q.Get("response_type") != "code" {
		http.Error(w, "unknown client or response type", http.StatusBadRequest)
		return
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "PKCE (S256) is required", http.StatusBadRequest)
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Host == "" {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	code := random()
	p.mu.Lock()
	p.codes[code] = grant{user: p.user, nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), client: p.ClientID, redirect: redirect.String()}
	p.mu.Unlock()
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token exchanges a code for an ID token.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || secret != p.ClientSecret {
		w.WriteHeader(http.StatusUnauthorized)
		writeJSON(w, map[string]string{"error": "invalid_client"})
		return
	}
	code := r.PostForm.Get("code")
	p.mu.Lock()
	g, ok := p.codes[code]
	delete(p.codes, code)
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case !ok:
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]string{"error": "invalid_grant"})
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge, r.PostForm.Get("redirect_uri") != g.redirect:
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]string{"error": "invalid_grant", "error_description": "PKCE verifier or redirect_uri does not match"})
		return
	}
	idToken := p.IDToken(g.user, g.nonce, p.ClientID)
	writeJSON(w, map[string]any{"access_token": random(), "token_type": "Bearer", "expires_in": 3600, "id_token": idToken})
}

// IDToken signs an ID token for u, for the audience aud, valid for an
// hour from Now.
func (p *Provider) IDToken(u User, nonce, aud string) string {
	return p.Sign(p.Claims(u, nonce, aud))
}

// Claims are the claims of an ID token for u.
func (p *Provider) Claims(u User, nonce, aud string) map[string]any {
	now := p.Now()
	c := map[string]any{
		"iss": p.Issuer(), "sub": u.Subject, "aud": aud,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	if nonce != "" {
		c["nonce"] = nonce
	}
	if u.Username != "" {
		c["preferred_username"] = u.Username
	}
	if u.Email != "" {
		c["email"] = u.Email
	}
	if u.Groups != nil {
		c["groups"] = u.Groups
	}
	return c
}

// Sign signs claims with the provider's key (RS256), as a compact JWT.
func (p *Provider) Sign(claims map[string]any) string {
	return SignWith(p.key, "k1", claims)
}

// SignWith signs claims with another key: a token the provider did not
// issue.
func SignWith(key crypto.Signer, kid string, claims map[string]any) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		panic(err)
	}
	b, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	obj, err := s.Sign(b)
	if err != nil {
		panic(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return out
}

func random() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		panic(fmt.Sprintf("oidctest: encode: %v", err))
	}
}
