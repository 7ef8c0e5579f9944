package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// TokenPrefix starts every token's secret, so that a leaked one is easy to
// recognise (and to scan for).
const TokenPrefix = "heph_"

// maxTokenName bounds a token's name, in bytes.
const maxTokenName = 200

// TokenParams are the parameters of NewToken.
type TokenParams struct {
	// Principal names who calls with the token. When no principal has
	// the name, it is created (a user, or a service with Service set, with
	// Groups). Defaults to Name.
	Principal string
	// Service makes a new principal a service rather than a user; for an
	// existing principal it must match its kind.
	Service bool
	// Groups are the principal's groups: those of a new principal, and
	// with SetGroups those of an existing one (replacing them). Without
	// SetGroups an existing principal keeps its groups.
	Groups    []string
	SetGroups bool
	// Name names the token (unique among active tokens). Defaults to the
	// principal's name.
	Name string
	// Role is admin, operator, approver, worker or read. Required.
	Role string
	// Options: Queues and Handlers (worker tokens only) limit claims;
	// ActAs (admin and operator tokens only) lets starts name the user
	// they act for (on_behalf_of).
	Options store.TokenOptions
}

// check validates p and fills its defaults (errors wrap
// hephtype.ErrInvalidInput).
func (p *TokenParams) check() error {
	if p.Principal == "" {
		p.Principal = p.Name
	}
	if p.Name == "" {
		p.Name = p.Principal
	}
	switch {
	case p.Name == "":
		return fmt.Errorf("%w: name the token's principal (or the token)", hephtype.ErrInvalidInput)
	case len(p.Name) > maxTokenName:
		return fmt.Errorf("%w: the name is %d bytes long, more than %d", hephtype.ErrInvalidInput, len(p.Name), maxTokenName)
	case !validRole(p.Role):
		return fmt.Errorf("%w: role %q is not %s", hephtype.ErrInvalidInput, p.Role, strings.Join(Roles, ", "))
	case (len(p.Options.Queues) > 0 || len(p.Options.Handlers) > 0) && p.Role != RoleWorker:
		return fmt.Errorf("%w: queues and handlers limit worker tokens; role %s claims no tasks", hephtype.ErrInvalidInput, p.Role)
	case p.Options.ActAs && p.Role != RoleAdmin && p.Role != RoleOperator:
		return fmt.Errorf("%w: act-as is for tokens that start runs (admin, operator), not %s", hephtype.ErrInvalidInput, p.Role)
	case p.Options.Payloads == PayloadsDeny && p.Role == RoleWorker:
		return fmt.Errorf("%w: payloads deny: a worker token reads the payloads of the tasks it runs", hephtype.ErrInvalidInput)
	case !slices.Contains(PayloadGrants, p.Options.Payloads):
		return fmt.Errorf("%w: payloads %q is not %q, %q or empty (the role's)", hephtype.ErrInvalidInput, p.Options.Payloads, PayloadsAllow, PayloadsDeny)
	}
	for _, list := range [][]string{p.Options.Queues, p.Options.Handlers} {
		if slices.Contains(list, "") {
			return fmt.Errorf("%w: a queue or handler name is empty", hephtype.ErrInvalidInput)
		}
	}
	return store.CheckPrincipalName(p.Principal)
}

// NewToken creates an API token for a principal (created when missing,
// see TokenParams) in a store, and returns it with its secret: the bearer
// token, shown this once (the store keeps only its hash). The server's
// POST /tokens calls it, and so can a program that makes the first admin
// token before any exists. A name that an active token has fails with
// store.ErrTokenExists; a disabled principal with
// store.ErrPrincipalDisabled; bad parameters with
// hephtype.ErrInvalidInput.
func NewToken(ctx context.Context, a store.Admin, p *TokenParams, now time.Time) (*store.Token, *store.Principal, string, error) {
	if err := p.check(); err != nil {
		return nil, nil, "", fmt.Errorf("create token: %w", err)
	}
	kind := store.PrincipalUser
	if p.Service {
		kind = store.PrincipalService
	}
	pr, err := a.EnsurePrincipal(ctx, &store.EnsurePrincipalParams{Name: p.Principal, Kind: kind, Groups: p.Groups, SetGroups: p.SetGroups, Now: now.UTC()})
	switch {
	case err != nil:
		return nil, nil, "", fmt.Errorf("create token %q: %w", p.Name, err)
	case !pr.Enabled():
		return nil, nil, "", fmt.Errorf("create token %q: principal %q: %w", p.Name, p.Principal, store.ErrPrincipalDisabled)
	case pr.Kind != kind:
		return nil, nil, "", fmt.Errorf("create token %q: %w: principal %q is a %s, not a %s", p.Name, hephtype.ErrInvalidInput, pr.Name, pr.Kind, kind)
	}
	secret, err := newSecret(TokenPrefix)
	if err != nil {
		return nil, nil, "", fmt.Errorf("create token %q: %w", p.Name, err)
	}
	t := &store.Token{ID: uuid.Must(uuid.NewV7()).String(), Name: p.Name, Principal: pr.Name, Role: p.Role, Options: p.Options,
		Hash: store.HashToken(secret), CreatedAt: now.UTC()}
	if err := a.CreateToken(ctx, t); err != nil {
		return nil, nil, "", fmt.Errorf("create token %q: %w", p.Name, err)
	}
	return t, pr, secret, nil
}

// newSecret returns a random secret of 256 bits, after a prefix.
func newSecret(prefix string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// lookupToken sets the caller from a token's secret: 401 for an unknown
// or revoked token, or a disabled principal. It records the use (at most
// once a minute).
func (s *Server) lookupToken(c *call, secret string) error {
	ctx := c.ctx()
	t, err := s.cfg.Admin.TokenByHash(ctx, store.HashToken(secret))
	if errors.Is(err, store.ErrTokenNotFound) {
		return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: "unknown token"}
	}
	if err != nil {
		return fmt.Errorf("look up token: %w", err)
	}
	if !t.Active() {
		return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: "the token was revoked"}
	}
	p, err := s.cfg.Admin.GetPrincipal(ctx, t.Principal)
	if errors.Is(err, store.ErrPrincipalNotFound) {
		return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: fmt.Sprintf("the token's principal %q does not exist", t.Principal)}
	}
	if err != nil {
		return fmt.Errorf("look up principal: %w", err)
	}
	if !p.Enabled() {
		return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: fmt.Sprintf("the principal %q was disabled", p.Name)}
	}
	// The store writes a use only TouchInterval after the last one it
	// has, which the token just read says: most requests need not ask.
	if now := s.cfg.Clock.Now(); t.LastUsedAt.IsZero() || t.LastUsedAt.Before(now.Add(-store.TouchInterval)) {
		if err := s.cfg.Admin.TouchToken(ctx, t.ID, now); err != nil {
			s.cfg.Logger.Warn("server: record a token's use", "token", t.ID, "err", err)
		}
	}
	c.actor, c.groups, c.role, c.token = p.Name, p.Groups, role(t.Role), t
	return nil
}

// Token is an API token as the API lists it (never with its secret).
type Token struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Principal string `json:"principal"`
	Role      string `json:"role"`
	// Queues and Handlers limit a worker token's claims; ActAs lets it
	// start runs on behalf of a user.
	Queues   []string `json:"queues,omitempty"`
	Handlers []string `json:"handlers,omitempty"`
	ActAs    bool     `json:"act_as,omitempty"`
	// Payloads grants ("allow") or withholds ("deny") reading payloads
	// on a server that encrypts them; absent: the role's.
	Payloads   string     `json:"payloads,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// NewTokenJSON is a token just created, with its secret and principal.
type NewTokenJSON struct {
	Token
	// Secret is the bearer token, shown this once.
	Secret string `json:"token"`
	// Groups are the principal's groups.
	Groups []string `json:"groups"`
	Kind   string   `json:"kind"`
}

func tokenJSON(t *store.Token) Token {
	return Token{ID: t.ID, Name: t.Name, Principal: t.Principal, Role: t.Role, Queues: t.Options.Queues, Handlers: t.Options.Handlers, ActAs: t.Options.ActAs, Payloads: t.Options.Payloads,
		CreatedAt: t.CreatedAt.UTC(), RevokedAt: optTime(t.RevokedAt), LastUsedAt: optTime(t.LastUsedAt)}
}

func (s *Server) listTokens(c *call) error {
	ts, err := s.cfg.Admin.ListTokens(c.ctx())
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
		Name      string    `json:"name"`
		Principal string    `json:"principal"`
		Kind      string    `json:"kind"`
		Groups    *[]string `json:"groups"`
		Role      string    `json:"role"`
		Queues    []string  `json:"queues"`
		Handlers  []string  `json:"handlers"`
		ActAs     bool      `json:"act_as"`
		Payloads  string    `json:"payloads"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if b.Name == "" && b.Principal == "" {
		return fieldProblem("principal", "is required (or name, which it defaults to)")
	}
	if !validRole(b.Role) {
		return fieldProblem("role", fmt.Sprintf("%q is not a role: use %s", b.Role, strings.Join(Roles, ", ")))
	}
	if !slices.Contains(PayloadGrants, b.Payloads) {
		return fieldProblem("payloads", fmt.Sprintf("%q is not %q, %q or absent (the role's)", b.Payloads, PayloadsAllow, PayloadsDeny))
	}
	p := &TokenParams{Name: b.Name, Principal: b.Principal, Role: b.Role, Options: store.TokenOptions{Queues: b.Queues, Handlers: b.Handlers, ActAs: b.ActAs, Payloads: b.Payloads}}
	switch b.Kind {
	case "", store.PrincipalUser:
	case store.PrincipalService:
		p.Service = true
	default:
		return fieldProblem("kind", fmt.Sprintf("%q is not %q or %q", b.Kind, store.PrincipalUser, store.PrincipalService))
	}
	if b.Groups != nil {
		p.Groups, p.SetGroups = *b.Groups, true
	}
	t, pr, secret, err := NewToken(c.ctx(), s.cfg.Admin, p, s.cfg.Clock.Now())
	if err != nil {
		return err
	}
	c.target = t.ID
	return c.json(http.StatusCreated, NewTokenJSON{Token: tokenJSON(t), Secret: secret, Groups: nonNil(pr.Groups), Kind: pr.Kind})
}

func (s *Server) revokeToken(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	if err := s.cfg.Admin.RevokeToken(c.ctx(), id, s.cfg.Clock.Now()); err != nil {
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
	s.FlushAudit()
	es, err := s.cfg.Admin.ListAudit(c.ctx(), p)
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

// Caller is who calls the API: GET /whoami.
type Caller struct {
	// Actor is the caller's principal ("insecure" on an insecure server).
	Actor string `json:"actor"`
	// Groups are the principal's groups (a session's: those it was
	// created with).
	Groups []string `json:"groups"`
	// Role is admin, operator, approver, worker or read.
	Role string `json:"role"`
	// Via is how the caller authenticated: "token", "session", "oidc"
	// (an ID token of the identity provider) or "insecure".
	Via string `json:"via"`
	// Token is the name of the caller's token ("" without).
	Token string `json:"token,omitempty"`
	// Insecure is set when the server serves every request without a token.
	Insecure bool `json:"insecure"`
}

func (s *Server) whoami(c *call) error {
	out := Caller{Actor: c.principal(), Groups: nonNil(c.groups), Role: string(c.role), Insecure: s.cfg.Insecure, Via: "insecure"}
	switch {
	case c.token != nil:
		out.Via, out.Token = "token", c.token.Name
	case c.session != "":
		out.Via = "session"
	case c.idToken:
		out.Via = "oidc"
	}
	return c.json(http.StatusOK, out)
}
