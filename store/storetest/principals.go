package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Principals: created once (kind and groups at creation, groups sorted
// and deduplicated), returned as stored when ensured again, regrouped
// only with SetGroups, listed by name; tokens name an existing one.
func testPrincipals(t *testing.T, h *adminHarness) {
	ctx := t.Context()
	p, err := h.s.EnsurePrincipal(ctx, &store.EnsurePrincipalParams{Name: "bob", Kind: store.PrincipalService, Groups: []string{"ops", "finance", "ops"}, Now: at(0)})
	if err != nil {
		t.Fatalf("EnsurePrincipal: %v", err)
	}
	want := &store.Principal{Name: "bob", Kind: store.PrincipalService, Groups: []string{"finance", "ops"}, CreatedAt: at(0), UpdatedAt: at(0)}
	diff(t, "EnsurePrincipal (created)", want, p)
	got, err := h.s.GetPrincipal(ctx, "bob")
	if err != nil {
		t.Fatalf("GetPrincipal: %v", err)
	}
	diff(t, "GetPrincipal", want, got)

	// Ensured again: kind and groups stay, unless SetGroups.
	p, err = h.s.EnsurePrincipal(ctx, &store.EnsurePrincipalParams{Name: "bob", Kind: store.PrincipalUser, Groups: []string{"x"}, Now: at(time.Second)})
	if err != nil {
		t.Fatalf("EnsurePrincipal again: %v", err)
	}
	diff(t, "EnsurePrincipal of a stored one", want, p)
	p, err = h.s.EnsurePrincipal(ctx, &store.EnsurePrincipalParams{Name: "bob", Groups: []string{"audit"}, SetGroups: true, Now: at(time.Minute)})
	if err != nil {
		t.Fatalf("EnsurePrincipal with SetGroups: %v", err)
	}
	want.Groups, want.UpdatedAt = []string{"audit"}, at(time.Minute)
	diff(t, "EnsurePrincipal with SetGroups", want, p)
	p, err = h.s.EnsurePrincipal(ctx, &store.EnsurePrincipalParams{Name: "bob", SetGroups: true, Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("EnsurePrincipal clearing the groups: %v", err)
	}
	want.Groups, want.UpdatedAt = []string{}, at(time.Hour)
	diff(t, "EnsurePrincipal clearing the groups", want, p)

	alice := h.principal("alice", "finance")
	if alice.Kind != store.PrincipalUser {
		t.Errorf("default kind %q, want %q", alice.Kind, store.PrincipalUser)
	}
	list, err := h.s.ListPrincipals(ctx)
	if err != nil {
		t.Fatalf("ListPrincipals: %v", err)
	}
	diff(t, "ListPrincipals", []*store.Principal{alice, want}, list)

	if _, err := h.s.GetPrincipal(ctx, "nobody"); !errors.Is(err, store.ErrPrincipalNotFound) {
		t.Errorf("GetPrincipal of an unknown name: %v, want ErrPrincipalNotFound", err)
	}
	tok := newToken("t1", "ci", at(0))
	tok.Principal = "nobody"
	if err := h.s.CreateToken(ctx, tok); !errors.Is(err, store.ErrPrincipalNotFound) {
		t.Errorf("CreateToken of an unknown principal: %v, want ErrPrincipalNotFound", err)
	}
	tok.Principal = "alice"
	if err := h.s.CreateToken(ctx, tok); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	if got := h.tokenByHash(tok.Hash).Principal; got != "alice" {
		t.Errorf("the token's principal is %q, want alice", got)
	}
}

// Bad principals and sessions are refused with ErrInvalidInput.
func testPrincipalValidation(t *testing.T, h *adminHarness) {
	ctx := t.Context()
	long := string(make([]byte, store.MaxPrincipalName+1))
	many := make([]string, store.MaxGroups+1)
	for i := range many {
		many[i] = string(rune('a'+i%26)) + time.Duration(i).String()
	}
	for what, p := range map[string]*store.EnsurePrincipalParams{
		"no name":          {Now: at(0)},
		"a long name":      {Name: long, Now: at(0)},
		"a control char":   {Name: "a\nb", Now: at(0)},
		"a bad kind":       {Name: "a", Kind: "robot", Now: at(0)},
		"an empty group":   {Name: "a", Groups: []string{""}, Now: at(0)},
		"a comma in group": {Name: "a", Groups: []string{"a,b"}, Now: at(0)},
		"too many groups":  {Name: "a", Groups: many, Now: at(0)},
		"no time":          {Name: "a"},
	} {
		if _, err := h.s.EnsurePrincipal(ctx, p); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("EnsurePrincipal with %s: %v, want ErrInvalidInput", what, err)
		}
	}
	h.principal("a")
	for what, se := range map[string]*store.Session{
		"no hash":      {Principal: "a", Role: "admin", CreatedAt: at(0), ExpiresAt: at(time.Hour)},
		"no principal": {Hash: "h", Role: "admin", CreatedAt: at(0), ExpiresAt: at(time.Hour)},
		"no role":      {Hash: "h", Principal: "a", CreatedAt: at(0), ExpiresAt: at(time.Hour)},
		"no expiry":    {Hash: "h", Principal: "a", Role: "admin", CreatedAt: at(0), ExpiresAt: at(0)},
		"a bad group":  {Hash: "h", Principal: "a", Role: "admin", Groups: []string{""}, CreatedAt: at(0), ExpiresAt: at(time.Hour)},
	} {
		if err := h.s.CreateSession(ctx, se); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("CreateSession with %s: %v, want ErrInvalidInput", what, err)
		}
	}
}

// DisablePrincipal: revokes the principal's active tokens (not others'),
// keeps an earlier revocation, deletes its sessions, and refuses new
// tokens and sessions.
func testDisablePrincipal(t *testing.T, h *adminHarness) {
	ctx := t.Context()
	h.principal("p")
	h.principal("other")
	early := newToken("t0", "early", at(0))
	a, b := newToken("t1", "a", at(0)), newToken("t2", "b", at(0))
	b.Principal = "other"
	for _, tok := range []*store.Token{early, a, b} {
		if err := h.s.CreateToken(ctx, tok); err != nil {
			t.Fatalf("CreateToken %s: %v", tok.ID, err)
		}
	}
	if err := h.s.RevokeToken(ctx, "t0", at(time.Second)); err != nil {
		t.Fatal(err)
	}
	se := &store.Session{Hash: "s1", Principal: "p", Role: "admin", CreatedAt: at(0), ExpiresAt: at(time.Hour)}
	keep := &store.Session{Hash: "s2", Principal: "other", Role: "read", CreatedAt: at(0), ExpiresAt: at(time.Hour)}
	for _, s := range []*store.Session{se, keep} {
		if err := h.s.CreateSession(ctx, s); err != nil {
			t.Fatalf("CreateSession: %v", err)
		}
	}
	if err := h.s.DisablePrincipal(ctx, "p", at(time.Minute)); err != nil {
		t.Fatalf("DisablePrincipal: %v", err)
	}
	if err := h.s.DisablePrincipal(ctx, "p", at(time.Hour)); err != nil {
		t.Fatalf("DisablePrincipal again: %v", err)
	}
	if err := h.s.DisablePrincipal(ctx, "nobody", at(time.Hour)); !errors.Is(err, store.ErrPrincipalNotFound) {
		t.Errorf("DisablePrincipal of an unknown name: %v, want ErrPrincipalNotFound", err)
	}
	p, err := h.s.GetPrincipal(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled() || !p.DisabledAt.Equal(at(time.Minute)) {
		t.Errorf("disabled at %v, want %v", p.DisabledAt, at(time.Minute))
	}
	for hash, want := range map[string]time.Time{early.Hash: at(time.Second), a.Hash: at(time.Minute), b.Hash: {}} {
		if got := h.tokenByHash(hash).RevokedAt; !got.Equal(want) {
			t.Errorf("token %s revoked at %v, want %v", h.tokenByHash(hash).ID, got, want)
		}
	}
	if _, err := h.s.SessionByHash(ctx, "s1"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("SessionByHash of the disabled principal's session: %v, want ErrSessionNotFound", err)
	}
	if _, err := h.s.SessionByHash(ctx, "s2"); err != nil {
		t.Errorf("SessionByHash of another principal's session: %v", err)
	}
	if err := h.s.CreateToken(ctx, newToken("t3", "c", at(time.Hour))); !errors.Is(err, store.ErrPrincipalDisabled) {
		t.Errorf("CreateToken of a disabled principal: %v, want ErrPrincipalDisabled", err)
	}
	se3 := &store.Session{Hash: "s3", Principal: "p", Role: "admin", CreatedAt: at(time.Hour), ExpiresAt: at(2 * time.Hour)}
	if err := h.s.CreateSession(ctx, se3); !errors.Is(err, store.ErrPrincipalDisabled) {
		t.Errorf("CreateSession of a disabled principal: %v, want ErrPrincipalDisabled", err)
	}
	// EnsurePrincipal returns it disabled.
	p, err = h.s.EnsurePrincipal(ctx, &store.EnsurePrincipalParams{Name: "p", Now: at(time.Hour)})
	if err != nil || p.Enabled() {
		t.Errorf("EnsurePrincipal of a disabled one: %+v, %v; want it disabled", p, err)
	}
}

// Sessions: created and read back, a hash once, an unknown principal
// refused, deleted (twice is fine), expired ones pruned by a later
// create.
func testSessions(t *testing.T, h *adminHarness) {
	ctx := t.Context()
	h.principal("p")
	se := &store.Session{Hash: "s1", Principal: "p", Groups: []string{"ops", "fin"}, Role: "approver", TokenID: "t1", CreatedAt: at(0), ExpiresAt: at(time.Hour)}
	if err := h.s.CreateSession(ctx, se); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	got, err := h.s.SessionByHash(ctx, "s1")
	if err != nil {
		t.Fatalf("SessionByHash: %v", err)
	}
	diff(t, "SessionByHash", &store.Session{Hash: "s1", Principal: "p", Groups: []string{"fin", "ops"}, Role: "approver", TokenID: "t1", CreatedAt: at(0), ExpiresAt: at(time.Hour)}, got)
	if got.Expired(at(time.Hour-time.Microsecond)) || !got.Expired(at(time.Hour)) {
		t.Errorf("Expired is wrong around %v", got.ExpiresAt)
	}
	if err := h.s.CreateSession(ctx, &store.Session{Hash: "s1", Principal: "p", Role: "read", CreatedAt: at(0), ExpiresAt: at(time.Hour)}); !errors.Is(err, store.ErrSessionExists) {
		t.Errorf("CreateSession of a stored hash: %v, want ErrSessionExists", err)
	}
	if err := h.s.CreateSession(ctx, &store.Session{Hash: "s9", Principal: "nobody", Role: "read", CreatedAt: at(0), ExpiresAt: at(time.Hour)}); !errors.Is(err, store.ErrPrincipalNotFound) {
		t.Errorf("CreateSession of an unknown principal: %v, want ErrPrincipalNotFound", err)
	}
	if _, err := h.s.SessionByHash(ctx, "nope"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("SessionByHash of an unknown hash: %v, want ErrSessionNotFound", err)
	}

	// A later session prunes the expired one.
	if err := h.s.CreateSession(ctx, &store.Session{Hash: "s2", Principal: "p", Role: "read", CreatedAt: at(time.Hour), ExpiresAt: at(2 * time.Hour)}); err != nil {
		t.Fatalf("CreateSession s2: %v", err)
	}
	if _, err := h.s.SessionByHash(ctx, "s1"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("the expired session is kept: %v, want ErrSessionNotFound", err)
	}
	// Revoking a token ends the sessions signed in with it.
	tok := newToken("t1", "ci", at(time.Hour))
	if err := h.s.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := h.s.CreateSession(ctx, &store.Session{Hash: "s3", Principal: "p", Role: "read", TokenID: "t1", CreatedAt: at(time.Hour), ExpiresAt: at(2 * time.Hour)}); err != nil {
		t.Fatalf("CreateSession s3: %v", err)
	}
	if err := h.s.RevokeToken(ctx, "t1", at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.SessionByHash(ctx, "s3"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("the session of a revoked token is kept: %v, want ErrSessionNotFound", err)
	}
	if _, err := h.s.SessionByHash(ctx, "s2"); err != nil {
		t.Errorf("the session of no token is gone: %v", err)
	}
	for range 2 {
		if err := h.s.DeleteSession(ctx, "s2"); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	}
	if _, err := h.s.SessionByHash(ctx, "s2"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("a deleted session: %v, want ErrSessionNotFound", err)
	}
}
