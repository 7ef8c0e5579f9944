package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Principals keeps the principals that call the API and their dashboard
// sessions (part of Admin).
type Principals interface {
	// EnsurePrincipal returns the principal named p.Name, creating it
	// (with p.Kind and p.Groups) when there is none. When it exists and
	// p.SetGroups is true, its groups become p.Groups; its kind never
	// changes. A disabled principal is returned as it is (look at
	// DisabledAt): the caller decides what that means.
	EnsurePrincipal(ctx context.Context, p *EnsurePrincipalParams) (*Principal, error)
	// GetPrincipal returns a principal, or ErrPrincipalNotFound.
	GetPrincipal(ctx context.Context, name string) (*Principal, error)
	// ListPrincipals returns every principal, disabled ones too, by name.
	ListPrincipals(ctx context.Context) ([]*Principal, error)
	// DisablePrincipal disables a principal at a time, revokes its active
	// tokens (at that time) and deletes its sessions, in one transaction;
	// ErrPrincipalNotFound when there is none. Disabling it again keeps
	// the first time (and still revokes and deletes what is left).
	DisablePrincipal(ctx context.Context, name string, at time.Time) error

	// CreateSession stores a new session, or returns ErrSessionExists
	// when its hash is stored. Its principal must exist and be enabled
	// (ErrPrincipalNotFound, ErrPrincipalDisabled). It deletes the
	// sessions that expired at or before s.CreatedAt first.
	CreateSession(ctx context.Context, s *Session) error
	// SessionByHash returns the session with a hash, expired or not (look
	// at ExpiresAt), or ErrSessionNotFound.
	SessionByHash(ctx context.Context, hash string) (*Session, error)
	// DeleteSession deletes a session (a sign-out). Deleting one that does
	// not exist is not an error.
	DeleteSession(ctx context.Context, hash string) error
}

// Kinds of principals.
const (
	PrincipalUser    = "user"
	PrincipalService = "service"
)

// Principal is a user or a service that calls the API, with its tokens
// and sessions.
type Principal struct {
	// Name is unique.
	Name string
	// Kind is PrincipalUser or PrincipalService.
	Kind string
	// Groups are the groups the principal is a member of (an approval
	// gate that names one accepts its decision), sorted, without
	// duplicates.
	Groups    []string
	CreatedAt time.Time
	UpdatedAt time.Time
	// DisabledAt is when the principal was disabled; zero while enabled.
	DisabledAt time.Time
}

// Enabled reports whether the principal is not disabled.
func (p *Principal) Enabled() bool { return p.DisabledAt.IsZero() }

// Limits of principals.
const (
	// MaxPrincipalName bounds a principal's name, in bytes.
	MaxPrincipalName = 200
	// MaxGroups bounds how many groups a principal (or a session) has.
	MaxGroups = 64
	// MaxGroupName bounds a group's name, in bytes.
	MaxGroupName = 200
)

// EnsurePrincipalParams are the parameters of EnsurePrincipal.
type EnsurePrincipalParams struct {
	// Name is required (at most MaxPrincipalName bytes, no control
	// characters).
	Name string
	// Kind is PrincipalUser (the default when empty) or PrincipalService;
	// used when the principal is created.
	Kind string
	// Groups are the principal's groups when it is created, or when
	// SetGroups is true. They are sorted and deduplicated.
	Groups    []string
	SetGroups bool
	// Now is the current time. Required.
	Now time.Time
}

// Check validates p, normalizes Kind and Groups (errors wrap
// hephtype.ErrInvalidInput).
func (p *EnsurePrincipalParams) Check() error {
	if err := CheckPrincipalName(p.Name); err != nil {
		return err
	}
	switch p.Kind {
	case "":
		p.Kind = PrincipalUser
	case PrincipalUser, PrincipalService:
	default:
		return fmt.Errorf("%w: principal %q: kind %q is not %q or %q", hephtype.ErrInvalidInput, p.Name, p.Kind, PrincipalUser, PrincipalService)
	}
	groups, err := CleanGroups(p.Groups)
	if err != nil {
		return fmt.Errorf("principal %q: %w", p.Name, err)
	}
	p.Groups = groups
	if p.Now.IsZero() {
		return fmt.Errorf("%w: principal %q: Now is zero", hephtype.ErrInvalidInput, p.Name)
	}
	return nil
}

// CheckPrincipalName validates a principal's name (errors wrap
// hephtype.ErrInvalidInput).
func CheckPrincipalName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the principal's name is empty", hephtype.ErrInvalidInput)
	case len(name) > MaxPrincipalName:
		return fmt.Errorf("%w: the principal's name is %d bytes long, more than %d", hephtype.ErrInvalidInput, len(name), MaxPrincipalName)
	case strings.ContainsFunc(name, isControl):
		return fmt.Errorf("%w: the principal's name %q has a control character", hephtype.ErrInvalidInput, name)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// CleanGroups returns groups sorted and without duplicates, or an error
// (wrapping hephtype.ErrInvalidInput) for an empty or too long name, a
// comma or a control character in one, or more than MaxGroups.
func CleanGroups(groups []string) ([]string, error) {
	out := slices.Clone(groups)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxGroups {
		return nil, fmt.Errorf("%w: %d groups, more than %d", hephtype.ErrInvalidInput, len(out), MaxGroups)
	}
	for _, g := range out {
		switch {
		case g == "":
			return nil, fmt.Errorf("%w: a group's name is empty", hephtype.ErrInvalidInput)
		case len(g) > MaxGroupName:
			return nil, fmt.Errorf("%w: group %.20q… is %d bytes long, more than %d", hephtype.ErrInvalidInput, g, len(g), MaxGroupName)
		case strings.ContainsFunc(g, isControl) || strings.Contains(g, ","):
			return nil, fmt.Errorf("%w: group %q has a comma or a control character", hephtype.ErrInvalidInput, g)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// Session is a dashboard session: a browser signed in as a principal,
// with a role and groups, until ExpiresAt. Its secret is never stored:
// Hash is the hex SHA-256 of it (HashToken).
type Session struct {
	Hash      string
	Principal string
	// Groups are the groups the session was created with (sorted).
	Groups []string
	// Role is the session's role (opaque to the store).
	Role string
	// TokenID is the token the browser signed in with; empty for a
	// session made otherwise (an identity provider's sign-in).
	TokenID   string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Check validates a session to create, normalizes its Groups (errors
// wrap hephtype.ErrInvalidInput).
func (s *Session) Check() error {
	switch {
	case s.Hash == "":
		return fmt.Errorf("%w: session: hash is empty", hephtype.ErrInvalidInput)
	case s.Principal == "":
		return fmt.Errorf("%w: session: principal is empty", hephtype.ErrInvalidInput)
	case s.Role == "":
		return fmt.Errorf("%w: session of %q: role is empty", hephtype.ErrInvalidInput, s.Principal)
	case s.CreatedAt.IsZero() || !s.ExpiresAt.After(s.CreatedAt):
		return fmt.Errorf("%w: session of %q: it must expire after its creation (created %v, expires %v)", hephtype.ErrInvalidInput, s.Principal, s.CreatedAt, s.ExpiresAt)
	}
	groups, err := CleanGroups(s.Groups)
	if err != nil {
		return fmt.Errorf("session of %q: %w", s.Principal, err)
	}
	s.Groups = groups
	return nil
}

// Expired reports whether the session has expired at now.
func (s *Session) Expired(now time.Time) bool { return !now.Before(s.ExpiresAt) }
