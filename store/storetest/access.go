package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Admin (store.Admin): principals, API tokens, sessions, the audit log,
// bulk operations.

// adminHarness is the state of one subtest of RunAdmin.
type adminHarness struct {
	t *testing.T
	s store.Admin
}

// RunAdmin runs the conformance suite of store.Admin. newAdmin returns a
// new, empty store for one subtest and arranges (t.Cleanup) for it to be
// closed; subtests run in parallel.
func RunAdmin(t *testing.T, newAdmin func(t *testing.T) store.Admin) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *adminHarness)
	}{
		{"Principals", testPrincipals},
		{"PrincipalValidation", testPrincipalValidation},
		{"DisablePrincipal", testDisablePrincipal},
		{"Sessions", testSessions},
		{"Tokens", testTokens},
		{"TouchToken", testTouchToken},
		{"Audit", testAudit},
		{"AuditLimits", testAuditLimits},
		{"Operations", testOperations},
		{"OperationLeases", testOperationLeases},
		{"ConcurrentOperationClaims", testConcurrentOperationClaims},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, &adminHarness{t: t, s: newAdmin(t)})
		})
	}
	t.Run("Secrets", func(t *testing.T) {
		RunSecrets(t, func(t *testing.T) store.Secrets { return newAdmin(t) })
	})
	t.Run("Webhooks", func(t *testing.T) { RunWebhooks(t, newAdmin) })
}

func newToken(id, name string, created time.Time) *store.Token {
	return &store.Token{ID: id, Name: name, Principal: "p", Role: "admin", Hash: store.HashToken("secret-" + id), CreatedAt: created}
}

// principal ensures a principal exists (for the tokens of a test).
func (h *adminHarness) principal(name string, groups ...string) *store.Principal {
	h.t.Helper()
	p, err := h.s.EnsurePrincipal(h.t.Context(), &store.EnsurePrincipalParams{Name: name, Groups: groups, Now: at(0)})
	if err != nil {
		h.t.Fatalf("EnsurePrincipal %q: %v", name, err)
	}
	return p
}

func (h *adminHarness) tokenByHash(hash string) *store.Token {
	h.t.Helper()
	tok, err := h.s.TokenByHash(h.t.Context(), hash)
	if err != nil {
		h.t.Fatalf("TokenByHash: %v", err)
	}
	return tok
}

// Tokens: create and read back, the name unique among active tokens,
// revocation (kept at its first time) frees the name, lookup by hash
// finds revoked tokens too, the list by creation time.
func testTokens(t *testing.T, h *adminHarness) {
	ctx := t.Context()
	h.principal("p")
	a := newToken("t1", "ci", at(time.Second))
	a.Options = store.TokenOptions{Queues: []string{"q1", "q2"}, Handlers: []string{"h"}, ActAs: true}
	if err := h.s.CreateToken(ctx, a); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	diff(t, "TokenByHash", a, h.tokenByHash(a.Hash))
	if !h.tokenByHash(a.Hash).Active() {
		t.Errorf("a new token is not active")
	}
	for what, tok := range map[string]*store.Token{
		"the active name": newToken("t2", "ci", at(2*time.Second)),
		"the id":          newToken("t1", "other", at(2*time.Second)),
		"the hash":        {ID: "t3", Name: "other", Principal: "p", Role: "read", Hash: a.Hash, CreatedAt: at(2 * time.Second)},
	} {
		if err := h.s.CreateToken(ctx, tok); !errors.Is(err, store.ErrTokenExists) {
			t.Errorf("CreateToken with %s of a stored token: %v, want ErrTokenExists", what, err)
		}
	}
	for what, mut := range map[string]func(*store.Token){
		"empty id":        func(t *store.Token) { t.ID = "" },
		"empty name":      func(t *store.Token) { t.Name = "" },
		"empty role":      func(t *store.Token) { t.Role = "" },
		"empty principal": func(t *store.Token) { t.Principal = "" },
		"empty hash":      func(t *store.Token) { t.Hash = "" },
		"no time":         func(t *store.Token) { t.CreatedAt = time.Time{} },
		"revoked":         func(t *store.Token) { t.RevokedAt = at(0) },
	} {
		tok := newToken("bad", "bad", at(0))
		mut(tok)
		if err := h.s.CreateToken(ctx, tok); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("CreateToken with %s: %v, want ErrInvalidInput", what, err)
		}
	}
	if _, err := h.s.TokenByHash(ctx, store.HashToken("unknown")); !errors.Is(err, store.ErrTokenNotFound) {
		t.Errorf("TokenByHash of an unknown hash: %v, want ErrTokenNotFound", err)
	}

	// Revoke, twice: the first time stays.
	if err := h.s.RevokeToken(ctx, "t1", at(time.Minute)); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	if err := h.s.RevokeToken(ctx, "t1", at(time.Hour)); err != nil {
		t.Fatalf("RevokeToken again: %v", err)
	}
	if err := h.s.RevokeToken(ctx, "nope", at(time.Hour)); !errors.Is(err, store.ErrTokenNotFound) {
		t.Errorf("RevokeToken of an unknown id: %v, want ErrTokenNotFound", err)
	}
	revoked := *a
	revoked.RevokedAt = at(time.Minute)
	diff(t, "TokenByHash of a revoked token", &revoked, h.tokenByHash(a.Hash))

	// The name is free again; a second revoked token of the name is fine.
	b := newToken("t2", "ci", at(-time.Hour))
	if err := h.s.CreateToken(ctx, b); err != nil {
		t.Fatalf("CreateToken of a revoked token's name: %v", err)
	}
	if err := h.s.RevokeToken(ctx, "t2", at(2*time.Minute)); err != nil {
		t.Fatalf("RevokeToken t2: %v", err)
	}
	c := newToken("t3", "ci", at(time.Hour))
	c.Role = "worker"
	if err := h.s.CreateToken(ctx, c); err != nil {
		t.Fatalf("CreateToken of a name revoked twice: %v", err)
	}
	b.RevokedAt = at(2 * time.Minute)
	list, err := h.s.ListTokens(ctx)
	if err != nil {
		t.Fatalf("ListTokens: %v", err)
	}
	diff(t, "ListTokens", []*store.Token{b, &revoked, c}, list)
}

// TouchToken writes a use only when it is more than store.TouchInterval
// after the stored one.
func testTouchToken(t *testing.T, h *adminHarness) {
	ctx := t.Context()
	h.principal("p")
	tok := newToken("t1", "ci", at(0))
	if err := h.s.CreateToken(ctx, tok); err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	touch := func(d time.Duration) {
		t.Helper()
		if err := h.s.TouchToken(ctx, "t1", at(d)); err != nil {
			t.Fatalf("TouchToken at %v: %v", d, err)
		}
	}
	last := func() time.Time { t.Helper(); return h.tokenByHash(tok.Hash).LastUsedAt }
	if !last().IsZero() {
		t.Fatalf("LastUsedAt of an unused token: %v", last())
	}
	touch(time.Second)
	if got := last(); !got.Equal(at(time.Second)) {
		t.Fatalf("LastUsedAt after the first use: %v, want %v", got, at(time.Second))
	}
	touch(30 * time.Second)
	touch(time.Second + store.TouchInterval) // exactly the interval: not more
	if got := last(); !got.Equal(at(time.Second)) {
		t.Fatalf("LastUsedAt after uses within the interval: %v, want %v", got, at(time.Second))
	}
	touch(time.Second + store.TouchInterval + time.Microsecond)
	if got, want := last(), at(time.Second+store.TouchInterval+time.Microsecond); !got.Equal(want) {
		t.Fatalf("LastUsedAt after a use past the interval: %v, want %v", got, want)
	}
	touch(-time.Hour) // an older use changes nothing
	if got, want := last(), at(time.Second+store.TouchInterval+time.Microsecond); !got.Equal(want) {
		t.Fatalf("LastUsedAt after an older use: %v, want %v", got, want)
	}
	if err := h.s.TouchToken(ctx, "nope", at(0)); err != nil {
		t.Errorf("TouchToken of an unknown id: %v, want no error", err)
	}
}

func (h *adminHarness) listAudit(p store.ListAuditParams) []*store.AuditEntry {
	h.t.Helper()
	out, err := h.s.ListAudit(h.t.Context(), &p)
	if err != nil {
		h.t.Fatalf("ListAudit(%+v): %v", p, err)
	}
	return out
}

func auditIDs(es []*store.AuditEntry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// The audit log: ids increase, lists are newest first, pages continue
// with Before, filters combine.
func testAudit(t *testing.T, h *adminHarness) {
	ctx := t.Context()
	if got := h.listAudit(store.ListAuditParams{}); len(got) != 0 {
		t.Fatalf("ListAudit of an empty log: %+v", got)
	}
	var all []*store.AuditEntry
	for i := range 9 {
		e := &store.AuditEntry{
			At: at(time.Duration(i) * time.Second), Actor: []string{"ann", "bob", "cid"}[i%3], Role: "admin", Method: "POST",
			Path: fmt.Sprintf("/api/v1/runs/r%d/cancel", i), Action: []string{"runs.cancel", "runs.start"}[i%2],
			Target: fmt.Sprint("r", i), Status: 202, Detail: fmt.Sprint("detail ", i),
		}
		if err := h.s.AppendAudit(ctx, e); err != nil {
			t.Fatalf("AppendAudit %d: %v", i, err)
		}
		if len(all) > 0 && e.ID <= all[len(all)-1].ID {
			t.Fatalf("AppendAudit %d: id %d after %d", i, e.ID, all[len(all)-1].ID)
		}
		all = append(all, e)
	}
	newest := slices.Clone(all)
	slices.Reverse(newest)
	diff(t, "ListAudit", newest, h.listAudit(store.ListAuditParams{}))
	// Pages of 4.
	var paged []*store.AuditEntry
	for before := int64(0); ; {
		page := h.listAudit(store.ListAuditParams{Before: before, Limit: 4})
		paged = append(paged, page...)
		if len(page) < 4 {
			break
		}
		before = page[len(page)-1].ID
	}
	diff(t, "ListAudit in pages of 4", auditIDs(newest), auditIDs(paged))
	// Filters.
	var bob, starts, bobStarts []int64
	for _, e := range newest {
		if e.Actor == "bob" {
			bob = append(bob, e.ID)
		}
		if e.Action == "runs.start" {
			starts = append(starts, e.ID)
			if e.Actor == "bob" {
				bobStarts = append(bobStarts, e.ID)
			}
		}
	}
	diff(t, "ListAudit by actor", bob, auditIDs(h.listAudit(store.ListAuditParams{Actor: "bob"})))
	diff(t, "ListAudit by action", starts, auditIDs(h.listAudit(store.ListAuditParams{Action: "runs.start"})))
	diff(t, "ListAudit by actor and action", bobStarts, auditIDs(h.listAudit(store.ListAuditParams{Actor: "bob", Action: "runs.start"})))
	diff(t, "ListAudit by action before", starts[1:], auditIDs(h.listAudit(store.ListAuditParams{Action: "runs.start", Before: starts[0]})))
	if got := h.listAudit(store.ListAuditParams{Actor: "nobody"}); len(got) != 0 {
		t.Errorf("ListAudit of an unknown actor: %+v", got)
	}
	// Bad parameters and entries.
	for _, p := range []store.ListAuditParams{{Limit: -1}, {Before: -1}} {
		if _, err := h.s.ListAudit(ctx, &p); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("ListAudit(%+v): %v, want ErrInvalidInput", p, err)
		}
	}
	for what, e := range map[string]*store.AuditEntry{
		"no time":   {Action: "runs.start"},
		"no action": {At: at(0)},
	} {
		if err := h.s.AppendAudit(ctx, e); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("AppendAudit with %s: %v, want ErrInvalidInput", what, err)
		}
	}
	// A batch: in one call, in its order; an invalid entry appends none.
	batch := func(n int) []*store.AuditEntry {
		var es []*store.AuditEntry
		for i := range n {
			es = append(es, &store.AuditEntry{At: at(time.Minute + time.Duration(i)*time.Second), Actor: "dee", Action: "runs.signal", Target: fmt.Sprint("b", i), Status: 202})
		}
		return es
	}
	bad := append(batch(2), &store.AuditEntry{Actor: "dee"})
	if err := h.s.AppendAudit(ctx, bad...); !errors.Is(err, hephtype.ErrInvalidInput) {
		t.Errorf("AppendAudit of a batch with an entry without time: %v, want ErrInvalidInput", err)
	}
	if got := h.listAudit(store.ListAuditParams{Actor: "dee"}); len(got) != 0 {
		t.Errorf("a refused batch appended %d entries", len(got))
	}
	if err := h.s.AppendAudit(ctx); err != nil {
		t.Errorf("AppendAudit of no entries: %v", err)
	}
	three := batch(3)
	if err := h.s.AppendAudit(ctx, three...); err != nil {
		t.Fatalf("AppendAudit of a batch: %v", err)
	}
	for i, e := range three {
		if e.ID <= all[len(all)-1].ID || (i > 0 && e.ID <= three[i-1].ID) {
			t.Errorf("batch entry %d: id %d (after %d, the batch's ids %d %d %d)", i, e.ID, all[len(all)-1].ID, three[0].ID, three[1].ID, three[2].ID)
		}
	}
	slices.Reverse(three)
	diff(t, "ListAudit of a batch", three, h.listAudit(store.ListAuditParams{Actor: "dee"}))
}

// The limits of ListAudit: 100 by default, at most 1000.
func testAuditLimits(t *testing.T, h *adminHarness) {
	const n = 1003
	for i := range n {
		if err := h.s.AppendAudit(t.Context(), &store.AuditEntry{At: at(time.Duration(i)), Actor: "a", Action: "x"}); err != nil {
			t.Fatalf("AppendAudit %d: %v", i, err)
		}
	}
	if got := h.listAudit(store.ListAuditParams{}); len(got) != 100 {
		t.Errorf("default limit: %d entries, want 100", len(got))
	}
	page := h.listAudit(store.ListAuditParams{Limit: 5000})
	if len(page) != 1000 {
		t.Fatalf("limit 5000: %d entries, want 1000", len(page))
	}
	if rest := h.listAudit(store.ListAuditParams{Limit: 1000, Before: page[999].ID}); len(rest) != n-1000 {
		t.Errorf("last page: %d entries, want %d", len(rest), n-1000)
	}
}

func newOperation(id string, created time.Time) *store.Operation {
	return &store.Operation{
		ID: id, Action: store.OperationCancel, Filter: json.RawMessage(`{"statuses": ["running"], "workflow": "billing"}`),
		Reason: "incident 7", CreatedBy: "ann", CreatedAt: created,
	}
}

func (h *adminHarness) createOperation(op *store.Operation) {
	h.t.Helper()
	if err := h.s.CreateOperation(h.t.Context(), op); err != nil {
		h.t.Fatalf("CreateOperation %s: %v", op.ID, err)
	}
}

func (h *adminHarness) getOperation(id string) *store.Operation {
	h.t.Helper()
	op, err := h.s.GetOperation(h.t.Context(), id)
	if err != nil {
		h.t.Fatalf("GetOperation %s: %v", id, err)
	}
	return op
}

func (h *adminHarness) claimOperation(owner string, leaseFor time.Duration, now time.Time) *store.Operation {
	h.t.Helper()
	op, err := h.s.ClaimOperation(h.t.Context(), &store.ClaimOperationParams{Owner: owner, LeaseFor: leaseFor, Now: now})
	if err != nil {
		h.t.Fatalf("ClaimOperation by %s: %v", owner, err)
	}
	return op
}

func operationIDs(ops []*store.Operation) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = op.ID
	}
	return out
}

// Operations: create (pending, whatever the caller's status and lease),
// read back, refuse a second create and bad fields; list newest first in
// pages.
func testOperations(t *testing.T, h *adminHarness) {
	ctx := t.Context()
	in := newOperation("op1", at(time.Second))
	in.Status, in.Owner, in.Token, in.LeaseUntil = store.OperationRunning, "someone", 7, at(time.Hour)
	in.Total, in.Cursor = 12, "start"
	for i := range store.MaxOperationErrors + 5 {
		in.Errors = append(in.Errors, fmt.Sprint("error ", i))
	}
	h.createOperation(in)
	want := *newOperation("op1", at(time.Second))
	want.Status, want.Total, want.Cursor, want.Errors, want.UpdatedAt = store.OperationPending, 12, "start", in.Errors[:store.MaxOperationErrors], at(time.Second)
	diff(t, "CreateOperation's operation", &want, in)
	diff(t, "GetOperation", &want, h.getOperation("op1"))
	if err := h.s.CreateOperation(ctx, newOperation("op1", at(0))); !errors.Is(err, store.ErrOperationExists) {
		t.Errorf("second CreateOperation: %v, want ErrOperationExists", err)
	}
	if _, err := h.s.GetOperation(ctx, "nope"); !errors.Is(err, store.ErrOperationNotFound) {
		t.Errorf("GetOperation of an unknown id: %v, want ErrOperationNotFound", err)
	}
	for what, mut := range map[string]func(*store.Operation){
		"empty id":     func(op *store.Operation) { op.ID = "" },
		"empty action": func(op *store.Operation) { op.Action = "" },
		"bad filter":   func(op *store.Operation) { op.Filter = json.RawMessage("{") },
		"no time":      func(op *store.Operation) { op.CreatedAt = time.Time{} },
		"negative":     func(op *store.Operation) { op.Done = -1 },
	} {
		op := newOperation("bad", at(0))
		mut(op)
		if err := h.s.CreateOperation(ctx, op); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("CreateOperation with %s: %v, want ErrInvalidInput", what, err)
		}
	}
	// No filter, no errors.
	bare := &store.Operation{ID: "op0", Action: store.OperationRetry, CreatedAt: at(time.Second)}
	h.createOperation(bare)
	if got := h.getOperation("op0"); len(got.Filter) != 0 || got.Errors != nil || got.Status != store.OperationPending {
		t.Errorf("a bare operation reads back as %+v", got)
	}

	// op0 and op1 were created at the same time: the id breaks the tie.
	for i, d := range []time.Duration{3, 2, 5, 4} {
		h.createOperation(newOperation(fmt.Sprint("op", i+2), at(d*time.Second)))
	}
	wantOrder := []string{"op4", "op5", "op2", "op3", "op1", "op0"}
	list := func(p store.ListOperationsParams) []string {
		t.Helper()
		ops, err := h.s.ListOperations(ctx, &p)
		if err != nil {
			t.Fatalf("ListOperations(%+v): %v", p, err)
		}
		return operationIDs(ops)
	}
	diff(t, "ListOperations", wantOrder, list(store.ListOperationsParams{}))
	var paged []string
	p := store.ListOperationsParams{Limit: 2}
	for {
		ops, err := h.s.ListOperations(ctx, &p)
		if err != nil {
			t.Fatalf("ListOperations(%+v): %v", p, err)
		}
		paged = append(paged, operationIDs(ops)...)
		if len(ops) < 2 {
			break
		}
		p.BeforeCreatedAt, p.BeforeID = ops[1].CreatedAt, ops[1].ID
	}
	diff(t, "ListOperations in pages of 2", wantOrder, paged)
	diff(t, "ListOperations before op1", []string{"op0"}, list(store.ListOperationsParams{BeforeCreatedAt: at(time.Second), BeforeID: "op1"}))
	for _, p := range []store.ListOperationsParams{{Limit: -1}, {BeforeID: "op1"}} {
		if _, err := h.s.ListOperations(ctx, &p); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("ListOperations(%+v): %v, want ErrInvalidInput", p, err)
		}
	}
}

// Claims take the oldest claimable operation (pending, or running with an
// ended lease), fence saves by (owner, token), and saves record progress.
func testOperationLeases(t *testing.T, h *adminHarness) {
	ctx := t.Context()
	if op := h.claimOperation("s1", time.Minute, at(0)); op != nil {
		t.Fatalf("ClaimOperation with no operations: %+v", op)
	}
	h.createOperation(newOperation("b", at(2*time.Second)))
	h.createOperation(newOperation("a", at(time.Second)))
	h.createOperation(newOperation("c", at(3*time.Second)))

	first := h.claimOperation("s1", time.Minute, at(10*time.Second))
	want := h.getOperation("a")
	if first == nil || first.ID != "a" {
		t.Fatalf("first claim: %+v, want a", first)
	}
	diff(t, "claimed operation", want, first)
	if first.Status != store.OperationRunning || first.Owner != "s1" || first.Token != 1 ||
		!first.LeaseUntil.Equal(at(10*time.Second+time.Minute)) || !first.UpdatedAt.Equal(at(10*time.Second)) {
		t.Fatalf("first claim: %+v", first)
	}
	if op := h.claimOperation("s2", time.Minute, at(11*time.Second)); op == nil || op.ID != "b" || op.Token != 1 {
		t.Fatalf("second claim: %+v, want b with token 1", op)
	}

	// s1 saves progress and extends its lease.
	save := func(p store.SaveOperationParams) error {
		t.Helper()
		return h.s.SaveOperation(ctx, &p)
	}
	errs := make([]string, store.MaxOperationErrors+3)
	for i := range errs {
		errs[i] = fmt.Sprint("run r", i, ": not found")
	}
	err := save(store.SaveOperationParams{ID: "a", Owner: "s1", Token: 1, LeaseUntil: at(2 * time.Minute), Status: store.OperationRunning,
		Total: 40, Done: 10, Failed: 2, Errors: errs, Cursor: "r9", Now: at(20 * time.Second)})
	if err != nil {
		t.Fatalf("SaveOperation by the holder: %v", err)
	}
	got := h.getOperation("a")
	if got.Total != 40 || got.Done != 10 || got.Failed != 2 || got.Cursor != "r9" || !got.LeaseUntil.Equal(at(2*time.Minute)) ||
		!got.UpdatedAt.Equal(at(20*time.Second)) || got.Status != store.OperationRunning || got.Owner != "s1" || got.Token != 1 {
		t.Fatalf("after SaveOperation: %+v", got)
	}
	diff(t, "saved errors", errs[:store.MaxOperationErrors], got.Errors)
	// A zero LeaseUntil keeps the lease's end.
	if err := save(store.SaveOperationParams{ID: "a", Owner: "s1", Token: 1, Status: store.OperationRunning, Total: 40, Done: 11, Now: at(30 * time.Second)}); err != nil {
		t.Fatalf("SaveOperation without LeaseUntil: %v", err)
	}
	if got := h.getOperation("a"); !got.LeaseUntil.Equal(at(2*time.Minute)) || got.Done != 11 || got.Errors != nil {
		t.Fatalf("after SaveOperation without LeaseUntil: %+v", got)
	}

	// At 90s, b's lease (until 71s) has ended, a's (until 2m) has not.
	if op := h.claimOperation("s3", time.Minute, at(90*time.Second)); op == nil || op.ID != "b" || op.Token != 2 || op.Owner != "s3" {
		t.Fatalf("claim after b's lease ended: %+v, want b with token 2 for s3", op)
	}
	err = save(store.SaveOperationParams{ID: "b", Owner: "s2", Token: 1, Status: store.OperationCompleted, Now: at(91 * time.Second)})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("SaveOperation by the old holder: %v, want ErrLeaseLost", err)
	}
	if got := h.getOperation("b"); got.Status != store.OperationRunning || got.Owner != "s3" {
		t.Fatalf("b after the old holder's save: %+v", got)
	}
	err = save(store.SaveOperationParams{ID: "b", Owner: "s3", Token: 1, Status: store.OperationCompleted, Now: at(91 * time.Second)})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("SaveOperation by the holder with an old token: %v, want ErrLeaseLost", err)
	}
	if err := save(store.SaveOperationParams{ID: "nope", Owner: "s3", Token: 1, Status: store.OperationCompleted, Now: at(91 * time.Second)}); !errors.Is(err, store.ErrOperationNotFound) {
		t.Fatalf("SaveOperation of an unknown id: %v, want ErrOperationNotFound", err)
	}

	// An ended lease that nobody claimed still holds: s1 completes a at
	// 5m, after its lease.
	if err := save(store.SaveOperationParams{ID: "a", Owner: "s1", Token: 1, Status: store.OperationCompleted, Total: 40, Done: 40, Now: at(5 * time.Minute)}); err != nil {
		t.Fatalf("SaveOperation after the lease ended, unclaimed: %v", err)
	}
	// c is next; then b (s3's lease ended at 150s); a is completed.
	if op := h.claimOperation("s4", time.Minute, at(10*time.Minute)); op == nil || op.ID != "b" || op.Token != 3 {
		t.Fatalf("claim at 10m: %+v, want b (created before c) with token 3", op)
	}
	if op := h.claimOperation("s4", time.Minute, at(10*time.Minute)); op == nil || op.ID != "c" || op.Token != 1 {
		t.Fatalf("claim at 10m: %+v, want c with token 1", op)
	}
	for _, id := range []string{"b", "c"} {
		if err := save(store.SaveOperationParams{ID: id, Owner: "s4", Token: h.getOperation(id).Token, Status: store.OperationFailed, Now: at(10 * time.Minute)}); err != nil {
			t.Fatalf("SaveOperation %s failed: %v", id, err)
		}
	}
	if op := h.claimOperation("s5", time.Minute, at(time.Hour)); op != nil {
		t.Fatalf("claim with every operation finished: %+v", op)
	}

	// Bad parameters.
	for _, p := range []store.ClaimOperationParams{{LeaseFor: time.Minute, Now: at(0)}, {Owner: "s", Now: at(0)}, {Owner: "s", LeaseFor: time.Minute}} {
		if _, err := h.s.ClaimOperation(ctx, &p); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("ClaimOperation(%+v): %v, want ErrInvalidInput", p, err)
		}
	}
	for _, p := range []store.SaveOperationParams{
		{Owner: "s", Status: store.OperationRunning, Now: at(0)},
		{ID: "a", Status: store.OperationRunning, Now: at(0)},
		{ID: "a", Owner: "s", Status: "done", Now: at(0)},
		{ID: "a", Owner: "s", Status: store.OperationRunning},
		{ID: "a", Owner: "s", Status: store.OperationRunning, Now: at(0), Failed: -1},
	} {
		if err := h.s.SaveOperation(ctx, &p); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("SaveOperation(%+v): %v, want ErrInvalidInput", p, err)
		}
	}
}

// Claimers racing over the operations never get the same one, and
// together get all of them.
func testConcurrentOperationClaims(t *testing.T, h *adminHarness) {
	const ops = 40
	for i := range ops {
		h.createOperation(newOperation(fmt.Sprintf("op%02d", i), at(time.Duration(i%5)*time.Second)))
	}
	got := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				op, err := h.s.ClaimOperation(t.Context(), &store.ClaimOperationParams{Owner: fmt.Sprint("s", w), LeaseFor: time.Hour, Now: at(time.Minute)})
				if err != nil {
					t.Errorf("claimer %d: %v", w, err)
					return
				}
				if op == nil {
					return
				}
				if op.Token != 1 || op.Owner != fmt.Sprint("s", w) {
					t.Errorf("claimer %d got %+v", w, op)
				}
				got[w] = append(got[w], op.ID)
			}
		})
	}
	wg.Wait()
	var all []string
	for _, g := range got {
		all = append(all, g...)
	}
	if len(all) != ops || len(sorted(all)) != len(slices.Compact(sorted(all))) {
		t.Fatalf("claimed %d operations (%v), want each of %d once", len(all), sorted(all), ops)
	}
}
