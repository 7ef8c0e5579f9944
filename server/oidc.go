package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/hephaestus-go/hephaestus/store"
	"golang.org/x/oauth2"
)

// OIDCConfig configures sign-in with an OpenID Connect identity provider:
// the dashboard's "Sign in with …" (the authorization code flow with PKCE)
// and API calls that send the provider's ID token as their bearer token.
// The user's name and groups come from the ID token's claims; the role
// from the groups, through Roles.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL; its discovery document is read
	// from Issuer + "/.well-known/openid-configuration" when the server
	// starts. Required.
	Issuer string
	// ClientID is this server's client id at the provider: the audience
	// its ID tokens must name. Required.
	ClientID string
	// ClientSecret is the client's secret at the provider (for the code
	// exchange). Optional for a public client.
	ClientSecret string
	// RedirectURL is the dashboard's callback as the provider knows it:
	// https://<host>/login/oidc/callback. Required for the dashboard's
	// sign-in; API bearer ID tokens work without it.
	RedirectURL string
	// UsernameClaim names the claim that is the user's principal name.
	// Defaults to "preferred_username", then "email", then "sub": the
	// first present.
	UsernameClaim string
	// GroupsClaim names the claim that lists the user's groups (an array
	// of strings, or one string). Defaults to "groups".
	GroupsClaim string
	// Roles maps a group to the role its members get. A user in several
	// mapped groups gets the strongest of their roles, in the order
	// admin, operator, approver, worker, read.
	Roles map[string]string
	// DefaultRole is the role of a user in no mapped group; "" refuses
	// such users (401, saying so). Defaults to "".
	DefaultRole string
	// Scopes are requested besides "openid". Defaults to profile, email
	// and groups.
	Scopes []string
	// HTTPClient reaches the provider. Defaults to http.DefaultClient.
	HTTPClient *http.Client
}

// oidcRoles are the roles in the order in which a user's strongest role is
// chosen.
var oidcRoles = []string{"admin", "operator", "approver", "worker", "read"}

// Identity is a user signed in by the identity provider.
type Identity struct {
	// Name is the principal's name (the username claim); Subject the
	// provider's subject.
	Name, Subject string
	Groups        []string
	// Role is the role the groups map to.
	Role string
	// Expiry is when the ID token expires.
	Expiry time.Time
}

// OIDC signs users in with an OpenID Connect provider. Create it with
// NewOIDC.
type OIDC struct {
	cfg      OIDCConfig
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
	client   *http.Client
}

// ErrOIDC is wrapped by every refusal of an ID token or a sign-in.
var ErrOIDC = errors.New("OpenID Connect sign-in refused")

// NewOIDC reads the provider's discovery document and returns the
// verifier of its ID tokens. Errors name the field or the step that
// failed.
func NewOIDC(ctx context.Context, cfg *OIDCConfig) (*OIDC, error) {
	if cfg == nil {
		return nil, errors.New("oidc: nil OIDCConfig")
	}
	c := *cfg
	var errs []error
	if c.Issuer == "" {
		errs = append(errs, errors.New("OIDCConfig.Issuer is empty"))
	}
	if c.ClientID == "" {
		errs = append(errs, errors.New("OIDCConfig.ClientID is empty"))
	}
	for g, r := range c.Roles {
		if !slices.Contains(oidcRoles, r) {
			errs = append(errs, fmt.Errorf("OIDCConfig.Roles[%q] is %q, not one of %s", g, r, strings.Join(oidcRoles, ", ")))
		}
	}
	if c.DefaultRole != "" && !slices.Contains(oidcRoles, c.DefaultRole) {
		errs = append(errs, fmt.Errorf("OIDCConfig.DefaultRole is %q, not one of %s (or empty)", c.DefaultRole, strings.Join(oidcRoles, ", ")))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("oidc: %w", errors.Join(errs...))
	}
	if c.GroupsClaim == "" {
		c.GroupsClaim = "groups"
	}
	if c.Scopes == nil {
		c.Scopes = []string{"profile", "email", "groups"}
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	pctx := oidc.ClientContext(ctx, c.HTTPClient)
	p, err := oidc.NewProvider(pctx, c.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: discover the provider %s: %w", c.Issuer, err)
	}
	o := &OIDC{
		cfg: c, client: c.HTTPClient,
		verifier: p.VerifierContext(oidc.ClientContext(context.Background(), c.HTTPClient), &oidc.Config{ClientID: c.ClientID}),
		oauth: oauth2.Config{
			ClientID: c.ClientID, ClientSecret: c.ClientSecret, Endpoint: p.Endpoint(),
			RedirectURL: c.RedirectURL, Scopes: append([]string{oidc.ScopeOpenID}, c.Scopes...),
		},
	}
	return o, nil
}

// CanSignIn reports whether the browser sign-in is configured (it needs
// RedirectURL).
func (o *OIDC) CanSignIn() bool { return o != nil && o.cfg.RedirectURL != "" }

// AuthCodeURL is where the browser goes to sign in: state and nonce are
// fresh random values the caller keeps, verifier a PKCE verifier
// (oauth2.GenerateVerifier).
func (o *OIDC) AuthCodeURL(state, nonce, verifier string) string {
	return o.oauth.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
}

// Exchange trades the code of the provider's redirect for the ID token,
// verifies it (signature, issuer, audience, expiry, nonce) and returns
// the identity it names.
func (o *OIDC) Exchange(ctx context.Context, code, verifier, nonce string) (*Identity, error) {
	tok, err := o.oauth.Exchange(oidc.ClientContext(ctx, o.client), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, fmt.Errorf("%w: exchange the code: %w", ErrOIDC, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, fmt.Errorf("%w: the provider's answer has no id_token", ErrOIDC)
	}
	id, err := o.verify(ctx, raw)
	if err != nil {
		return nil, err
	}
	if id.nonce != nonce {
		return nil, fmt.Errorf("%w: the ID token's nonce is not this sign-in's", ErrOIDC)
	}
	return id.Identity, nil
}

// Verify checks an ID token sent as an API bearer token and returns the
// identity it names.
func (o *OIDC) Verify(ctx context.Context, raw string) (*Identity, error) {
	id, err := o.verify(ctx, raw)
	if err != nil {
		return nil, err
	}
	return id.Identity, nil
}

type verified struct {
	*Identity
	nonce string
}

func (o *OIDC) verify(ctx context.Context, raw string) (*verified, error) {
	t, err := o.verifier.Verify(oidc.ClientContext(ctx, o.client), raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOIDC, err)
	}
	var claims map[string]any
	if err := t.Claims(&claims); err != nil {
		return nil, fmt.Errorf("%w: read the claims: %w", ErrOIDC, err)
	}
	name := o.username(claims)
	if name == "" {
		return nil, fmt.Errorf("%w: the ID token has no %s claim to name the user", ErrOIDC, o.usernameClaims())
	}
	groups, err := stringsClaim(claims, o.cfg.GroupsClaim)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOIDC, err)
	}
	role := o.roleOf(groups)
	if role == "" {
		return nil, fmt.Errorf("%w: %q is in no group that has a role here (groups %v); an admin maps groups to roles", ErrOIDC, name, groups)
	}
	nonce, _ := claims["nonce"].(string)
	return &verified{Identity: &Identity{Name: name, Subject: t.Subject, Groups: groups, Role: role, Expiry: t.Expiry}, nonce: nonce}, nil
}

func (o *OIDC) usernameClaims() string {
	if o.cfg.UsernameClaim != "" {
		return o.cfg.UsernameClaim
	}
	return "preferred_username, email or sub"
}

func (o *OIDC) username(claims map[string]any) string {
	names := []string{"preferred_username", "email", "sub"}
	if o.cfg.UsernameClaim != "" {
		names = []string{o.cfg.UsernameClaim}
	}
	for _, n := range names {
		if s, ok := claims[n].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// roleOf is the strongest role of the groups, or DefaultRole.
func (o *OIDC) roleOf(groups []string) string {
	best := -1
	for _, g := range groups {
		if r, ok := o.cfg.Roles[g]; ok {
			if i := slices.Index(oidcRoles, r); best < 0 || i < best {
				best = i
			}
		}
	}
	if best < 0 {
		return o.cfg.DefaultRole
	}
	return oidcRoles[best]
}

// stringsClaim reads a claim that is an array of strings or one string.
func stringsClaim(claims map[string]any, name string) ([]string, error) {
	switch v := claims[name].(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("the %s claim's element %d is not a string", name, i)
			}
			out = append(out, s)
		}
		sort.Strings(out)
		return slices.Compact(out), nil
	default:
		return nil, fmt.Errorf("the %s claim is not a list of strings", name)
	}
}

// ParseRoles reads a group-to-role map written as "group=role,group=role"
// (the form of heph server's --oidc-roles).
func ParseRoles(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for i, part := range strings.Split(s, ",") {
		g, r, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || g == "" || r == "" {
			return nil, fmt.Errorf("roles: item %d %q is not group=role", i+1, part)
		}
		if !slices.Contains(oidcRoles, r) {
			return nil, fmt.Errorf("roles: item %d: %q is not one of %s", i+1, r, strings.Join(oidcRoles, ", "))
		}
		out[g] = r
	}
	return out, nil
}

// isJWT reports whether a bearer token has the form of a JWT (three
// base64url parts), not of an API token or a session.
func isJWT(s string) bool {
	if strings.HasPrefix(s, TokenPrefix) || strings.HasPrefix(s, SessionPrefix) {
		return false
	}
	return strings.Count(s, ".") == 2
}

// lookupIDToken sets the caller from an ID token of the identity
// provider: 401 for one the provider did not issue to this server, that
// expired, or of a principal an admin disabled.
func (s *Server) lookupIDToken(c *call, raw string) error {
	id, err := s.cfg.OIDC.Verify(c.ctx(), raw)
	if err != nil {
		return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: err.Error()}
	}
	if err := s.principalEnabled(c.ctx(), id.Name); err != nil {
		return err
	}
	c.actor, c.groups, c.role, c.idToken = id.Name, id.Groups, role(id.Role), true
	return nil
}

// principalEnabled refuses (401) a principal an admin disabled; a user
// the store does not know yet is not refused.
func (s *Server) principalEnabled(ctx context.Context, name string) error {
	p, err := s.cfg.Admin.GetPrincipal(ctx, name)
	switch {
	case errors.Is(err, store.ErrPrincipalNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("look up principal: %w", err)
	case !p.Enabled():
		return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: fmt.Sprintf("the principal %q was disabled", p.Name)}
	}
	return nil
}

// StartSession starts a dashboard session for a user the identity
// provider signed in (dashboard.SessionStarter): the principal is the
// user's name (made a user principal if the store has none), with the
// groups and role of the sign-in. A disabled principal is refused.
func (s *Server) StartSession(ctx context.Context, id *Identity) (string, time.Time, error) {
	if id == nil || id.Name == "" {
		return "", time.Time{}, errors.New("start session: no identity")
	}
	if err := s.principalEnabled(ctx, id.Name); err != nil {
		return "", time.Time{}, fmt.Errorf("start session of %q: %w", id.Name, err)
	}
	return s.NewSession(ctx, id.Name, id.Groups, id.Role)
}
