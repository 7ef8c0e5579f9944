package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"

	"github.com/hephaestus-go/hephaestus/server"
)

// SessionStarter starts a session for a user the identity provider signed
// in: a *server.Server. The secret goes in the session cookie.
type SessionStarter interface {
	StartSession(ctx context.Context, id *server.Identity) (secret string, expires time.Time, err error)
}

// oidcCookie keeps a sign-in's state, nonce, PKCE verifier and target
// between the redirect to the provider and its callback. It is SameSite
// Lax: the callback is a top-level navigation from the provider's site.
const oidcCookie = "heph_oidc"

// oidcCallback is the path of the callback (OIDCConfig.RedirectURL's).
const oidcCallback = "/login/oidc/callback"

// oidcFlow is a sign-in under way.
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
}

// oidcStart sends the browser to the provider.
func (d *Dashboard) oidcStart(w http.ResponseWriter, r *http.Request) {
	if !d.cfg.OIDC.CanSignIn() || d.cfg.Sessions == nil {
		http.NotFound(w, r)
		return
	}
	f := oidcFlow{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(), Next: safeNext(r.URL.Query().Get("next"))}
	b, err := json.Marshal(f)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: oidcCookie, Value: base64.RawURLEncoding.EncodeToString(b), Path: "/login/oidc",
		MaxAge: 600, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, d.cfg.OIDC.AuthCodeURL(f.State, f.Nonce, f.Verifier), http.StatusFound)
}

// oidcFinish takes the provider's answer: it checks the state against the
// cookie, exchanges the code, starts a session and sends the browser on.
func (d *Dashboard) oidcFinish(w http.ResponseWriter, r *http.Request) {
	if !d.cfg.OIDC.CanSignIn() || d.cfg.Sessions == nil {
		http.NotFound(w, r)
		return
	}
	v := &view{Path: r.URL.Path, Title: "Sign in"}
	refuse := func(msg string) {
		v.Data = loginData{Error: "sign-in refused: " + msg, OIDC: true}
		d.render(w, http.StatusOK, "login", v)
	}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: "/login/oidc", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		refuse("the identity provider answered " + e + " " + q.Get("error_description"))
		return
	}
	f, ok := readFlow(r)
	if !ok {
		refuse("this sign-in was not started here, or took more than 10 minutes; sign in again")
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		refuse("the answer's state is not this sign-in's; sign in again")
		return
	}
	id, err := d.cfg.OIDC.Exchange(r.Context(), q.Get("code"), f.Verifier, f.Nonce)
	if err != nil {
		d.cfg.Logger.Warn("dashboard: OpenID Connect sign-in refused", "err", err)
		refuse(err.Error())
		return
	}
	secret, expires, err := d.cfg.Sessions.StartSession(r.Context(), id)
	if err != nil {
		d.cfg.Logger.Error("dashboard: start a session", "user", id.Name, "err", err)
		refuse("the session could not be started")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: server.SessionCookie, Value: secret, Path: "/", Expires: expires, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	// A page, not a redirect: the navigation onward is then one of this
	// site, so the browser sends the SameSite=Strict session cookie with
	// it (a redirect would continue the provider's cross-site navigation).
	v.Data = signedInData{Next: f.Next, Name: id.Name}
	d.render(w, http.StatusOK, "signedin", v)
}

// signedInData is the page shown for an instant after a sign-in.
type signedInData struct {
	Next, Name string
}

func (signedInData) PageTitle() string { return "Signed in" }

func readFlow(r *http.Request) (*oidcFlow, bool) {
	c, err := r.Cookie(oidcCookie)
	if err != nil {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return nil, false
	}
	var f oidcFlow
	if err := json.Unmarshal(b, &f); err != nil || f.State == "" || f.Nonce == "" || f.Verifier == "" {
		return nil, false
	}
	f.Next = safeNext(f.Next)
	return &f, true
}

func randomString() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// oidcLoginURL is the link of the login form's "Sign in with" button.
func oidcLoginURL(next string) string {
	return "/login/oidc?next=" + url.QueryEscape(next)
}
