package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// Principal is a principal as the API shows it.
type Principal struct {
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	Groups     []string   `json:"groups"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
}

func principalJSON(p *store.Principal) Principal {
	return Principal{Name: p.Name, Kind: p.Kind, Groups: nonNil(p.Groups), CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(), DisabledAt: optTime(p.DisabledAt)}
}

func (s *Server) listPrincipals(c *call) error {
	ps, err := s.cfg.Admin.ListPrincipals(c.ctx())
	if err != nil {
		return err
	}
	out := make([]Principal, 0, len(ps))
	for _, p := range ps {
		out = append(out, principalJSON(p))
	}
	return c.json(http.StatusOK, out)
}

// setGroups replaces the groups of an existing principal. Its sessions
// keep the groups they were created with until they end.
func (s *Server) setGroups(c *call) error {
	var b struct {
		Groups []string `json:"groups"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	name := c.r.PathValue("name")
	c.target = name
	if _, err := s.cfg.Admin.GetPrincipal(c.ctx(), name); err != nil {
		return err
	}
	p, err := s.cfg.Admin.EnsurePrincipal(c.ctx(), &store.EnsurePrincipalParams{Name: name, Groups: b.Groups, SetGroups: true, Now: s.cfg.Clock.Now().UTC()})
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, principalJSON(p))
}

// disablePrincipal disables a principal: its tokens are revoked and its
// sessions ended.
func (s *Server) disablePrincipal(c *call) error {
	name := c.r.PathValue("name")
	c.target = name
	if err := s.cfg.Admin.DisablePrincipal(c.ctx(), name, s.cfg.Clock.Now().UTC()); err != nil {
		return err
	}
	p, err := s.cfg.Admin.GetPrincipal(c.ctx(), name)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, principalJSON(p))
}

// SessionPrefix starts every session's secret.
const SessionPrefix = "hephs_"

// Session is a session just created: its secret (the SessionCookie's
// value), shown this once, and when it expires.
type Session struct {
	Secret    string    `json:"session"`
	Principal string    `json:"principal"`
	Groups    []string  `json:"groups"`
	Role      string    `json:"role"`
	ExpiresAt time.Time `json:"expires_at"`
}

// NewSession creates a server-side session for a principal, with groups
// and a role, and returns its secret — the value of the SessionCookie —
// and its expiry (Config.SessionTTL from now). The principal is created
// (a user, with these groups) when it does not exist; a disabled one is
// refused (store.ErrPrincipalDisabled). The session keeps the groups and
// role given here until it ends: at its expiry, at sign-out (EndSession)
// or when the principal is disabled. The dashboard's sign-in with a token
// uses it (POST /sessions); so can a sign-in with an identity provider,
// which has no token: it names the user, the groups and the role its
// claims map to.
func (s *Server) NewSession(ctx context.Context, principal string, groups []string, role string) (secret string, expires time.Time, err error) {
	return s.newSession(ctx, principal, groups, role, "")
}

func (s *Server) newSession(ctx context.Context, principal string, groups []string, role, tokenID string) (string, time.Time, error) {
	if !validRole(role) {
		return "", time.Time{}, fmt.Errorf("new session of %q: role %q is not %s", principal, role, strings.Join(Roles, ", "))
	}
	now := s.cfg.Clock.Now().UTC()
	if _, err := s.cfg.Admin.EnsurePrincipal(ctx, &store.EnsurePrincipalParams{Name: principal, Groups: groups, Now: now}); err != nil {
		return "", time.Time{}, fmt.Errorf("new session of %q: %w", principal, err)
	}
	secret, err := newSecret(SessionPrefix)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("new session of %q: %w", principal, err)
	}
	se := &store.Session{Hash: store.HashToken(secret), Principal: principal, Groups: groups, Role: role, TokenID: tokenID, CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL)}
	if err := s.cfg.Admin.CreateSession(ctx, se); err != nil {
		return "", time.Time{}, fmt.Errorf("new session of %q: %w", principal, err)
	}
	return secret, se.ExpiresAt, nil
}

// EndSession deletes the session of a secret (a sign-out). An unknown one
// is not an error.
func (s *Server) EndSession(ctx context.Context, secret string) error {
	if err := s.cfg.Admin.DeleteSession(ctx, store.HashToken(secret)); err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	return nil
}

// lookupSession sets the caller from a session's secret: 401 for an
// unknown, ended or expired session.
func (s *Server) lookupSession(c *call, secret string) error {
	se, err := s.cfg.Admin.SessionByHash(c.ctx(), store.HashToken(secret))
	if errors.Is(err, store.ErrSessionNotFound) {
		return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: "unknown or ended session: sign in again"}
	}
	if err != nil {
		return fmt.Errorf("look up session: %w", err)
	}
	if se.Expired(s.cfg.Clock.Now()) {
		return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: "the session expired: sign in again"}
	}
	c.actor, c.groups, c.role, c.session = se.Principal, se.Groups, role(se.Role), se.Hash
	return nil
}

// signIn makes a session of the caller's token: POST /sessions, called
// with the token as the bearer.
func (s *Server) signIn(c *call) error {
	if err := c.decode(&struct{}{}, true); err != nil {
		return err
	}
	if c.token == nil {
		return badRequest("a session is made with a token: send it as Authorization: Bearer <token>")
	}
	secret, expires, err := s.newSession(c.ctx(), c.principal(), c.groups, string(c.role), c.token.ID)
	if err != nil {
		return err
	}
	return c.json(http.StatusCreated, Session{Secret: secret, Principal: c.principal(), Groups: nonNil(c.groups), Role: string(c.role), ExpiresAt: expires})
}

// signOut ends the caller's session: DELETE /sessions/current.
func (s *Server) signOut(c *call) error {
	if c.session == "" {
		return badRequest("no session: sign-out ends the session of the " + SessionCookie + " cookie")
	}
	if err := s.cfg.Admin.DeleteSession(c.ctx(), c.session); err != nil {
		return err
	}
	c.wrote = true
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}
