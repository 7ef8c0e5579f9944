package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The roles of API tokens.
const (
	RoleAdmin  = string(roleAdmin)
	RoleWorker = string(roleWorker)
	RoleRead   = string(roleRead)
)

// TokenPrefix starts every token's secret, so that a leaked one is easy to
// recognise (and to scan for).
const TokenPrefix = "heph_"

// maxTokenName bounds a token's name, in bytes.
const maxTokenName = 200

// NewToken creates an API token with a name and a role (RoleAdmin,
// RoleWorker or RoleRead) in a store, and returns it with its secret: the
// bearer token, shown this once (the store keeps only its hash). The
// server's POST /tokens calls it, and so can a program that makes the
// first admin token before any exists. A name that an active token has
// fails with store.ErrTokenExists; a bad name or role with
// hephtype.ErrInvalidInput.
func NewToken(ctx context.Context, a store.Access, name, role string, now time.Time) (*store.Token, string, error) {
	switch {
	case name == "":
		return nil, "", fmt.Errorf("create token: %w: the name is empty", hephtype.ErrInvalidInput)
	case len(name) > maxTokenName:
		return nil, "", fmt.Errorf("create token: %w: the name is %d bytes long, more than %d", hephtype.ErrInvalidInput, len(name), maxTokenName)
	}
	switch role {
	case RoleAdmin, RoleWorker, RoleRead:
	default:
		return nil, "", fmt.Errorf("create token %q: %w: role %q is not %s, %s or %s", name, hephtype.ErrInvalidInput, role, RoleAdmin, RoleWorker, RoleRead)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, "", fmt.Errorf("create token %q: %w", name, err)
	}
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	t := &store.Token{ID: uuid.Must(uuid.NewV7()).String(), Name: name, Role: role, Hash: store.HashToken(secret), CreatedAt: now.UTC()}
	if err := a.CreateToken(ctx, t); err != nil {
		return nil, "", fmt.Errorf("create token %q: %w", name, err)
	}
	return t, secret, nil
}

// lookupToken finds the name and role of a token's secret: 401 for an
// unknown or revoked token. It records the use (at most once a minute).
func (s *Server) lookupToken(ctx context.Context, secret string) (string, role, error) {
	t, err := s.cfg.Store.TokenByHash(ctx, store.HashToken(secret))
	if errors.Is(err, store.ErrTokenNotFound) {
		return "", "", &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: "unknown token"}
	}
	if err != nil {
		return "", "", fmt.Errorf("look up token: %w", err)
	}
	if !t.Active() {
		return "", "", &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: "the token was revoked"}
	}
	if err := s.cfg.Store.TouchToken(ctx, t.ID, s.cfg.Clock.Now()); err != nil {
		s.cfg.Logger.Warn("server: record a token's use", "token", t.ID, "err", err)
	}
	return t.Name, role(t.Role), nil
}

// Token is an API token as the API lists it (never with its secret).
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// NewTokenJSON is a token just created, with its secret.
type NewTokenJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	Token     string    `json:"token"`
	CreatedAt time.Time `json:"created_at"`
}

func tokenJSON(t *store.Token) Token {
	return Token{ID: t.ID, Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt.UTC(), RevokedAt: optTime(t.RevokedAt), LastUsedAt: optTime(t.LastUsedAt)}
}

func (s *Server) listTokens(c *call) error {
	ts, err := s.cfg.Store.ListTokens(c.ctx())
	if err != nil {
		return err
	}
	out := make([]Token, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenJSON(t))
	}
	return c.json(http.StatusOK, out)
}

func (s *Server) createToken(c *call) error {
	var b struct {
		Name string `json:"name"`
		Role string `json:"role"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if b.Name == "" {
		return fieldProblem("name", "is required")
	}
	switch b.Role {
	case RoleAdmin, RoleWorker, RoleRead:
	default:
		return fieldProblem("role", fmt.Sprintf("%q is not a role: use %q, %q or %q", b.Role, RoleAdmin, RoleWorker, RoleRead))
	}
	t, secret, err := NewToken(c.ctx(), s.cfg.Store, b.Name, b.Role, s.cfg.Clock.Now())
	if err != nil {
		return err
	}
	c.target = t.ID
	return c.json(http.StatusCreated, NewTokenJSON{ID: t.ID, Name: t.Name, Role: t.Role, Token: secret, CreatedAt: t.CreatedAt.UTC()})
}

func (s *Server) revokeToken(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	if err := s.cfg.Store.RevokeToken(c.ctx(), id, s.cfg.Clock.Now()); err != nil {
		return err
	}
	c.wrote = true
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// AuditEntry is an entry of the audit log.
type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Role   string    `json:"role"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Status int       `json:"status"`
	Detail string    `json:"detail,omitempty"`
}

// AuditList is a page of the audit log, newest first.
type AuditList struct {
	Entries []AuditEntry `json:"entries"`
	// Next is the cursor of the next page; empty on the last.
	Next string `json:"next"`
}

func (s *Server) listAudit(c *call) error {
	q := c.query()
	limit := q.integer("limit", 100, 1, 1000)
	p := &store.ListAuditParams{Limit: limit, Actor: q.str("actor"), Action: q.str("action")}
	if cur := q.str("cursor"); cur != "" {
		n, err := strconv.ParseInt(cur, 10, 64)
		if err != nil || n <= 0 {
			q.fail("cursor", "%q is not a cursor of this list", cur)
		}
		p.Before = n
	}
	if err := q.err(); err != nil {
		return err
	}
	es, err := s.cfg.Store.ListAudit(c.ctx(), p)
	if err != nil {
		return err
	}
	out := &AuditList{Entries: make([]AuditEntry, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, AuditEntry{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Role: e.Role, Method: e.Method, Path: e.Path,
			Action: e.Action, Target: e.Target, Status: e.Status, Detail: e.Detail})
	}
	if len(es) == limit {
		out.Next = strconv.FormatInt(es[len(es)-1].ID, 10)
	}
	return c.json(http.StatusOK, out)
}

// audit appends the entry of a call to a route that records its calls
// (Route.action): every mutating call but heartbeats and claims of tasks.
// Calls refused for want of a valid token (401) have no actor and are
// not recorded.
func (s *Server) audit(c *call, rt *route, status int) {
	if rt.action == "" || status == http.StatusUnauthorized || c.actor == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.r.Context()), 10*time.Second)
	defer cancel()
	e := &store.AuditEntry{
		At: s.cfg.Clock.Now().UTC(), Actor: c.actor, Role: string(c.role), Method: c.r.Method, Path: c.r.URL.Path,
		Action: rt.action, Target: c.target, Status: status,
	}
	if err := s.cfg.Store.AppendAudit(ctx, e); err != nil {
		s.cfg.Logger.Error("server: append to the audit log", "action", rt.action, "target", c.target, "err", err)
	}
}

// Caller is who calls the API: GET /whoami.
type Caller struct {
	// Actor is the token's name ("insecure" on an insecure server).
	Actor string `json:"actor"`
	// Role is admin, worker or read.
	Role string `json:"role"`
	// Insecure is set when the server serves every request without a token.
	Insecure bool `json:"insecure"`
}

func (s *Server) whoami(c *call) error {
	return c.json(http.StatusOK, Caller{Actor: c.actor, Role: string(c.role), Insecure: s.cfg.Insecure})
}
