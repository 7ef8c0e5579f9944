package server

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/hephaestus-go/hephaestus/store"
)

// auditBatches records the batches appended to the audit log; the
// first waits for gate.
type auditBatches struct {
	store.Admin
	gate    chan struct{}
	calls   atomic.Int32
	sizes   chan int
	entered chan struct{}
}

func (a *auditBatches) AppendAudit(ctx context.Context, es ...*store.AuditEntry) error {
	if a.calls.Add(1) == 1 {
		close(a.entered)
		<-a.gate
	}
	a.sizes <- len(es)
	return a.Admin.AppendAudit(ctx, es...)
}

// The entries of calls answered while an append is under way go to the
// store together, in one batch, in the order of the calls; a listing of
// the log waits for them.
func TestAuditEntriesAppendedInBatches(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		admin := &auditBatches{Admin: e.admin(), gate: make(chan struct{}), sizes: make(chan int, 100), entered: make(chan struct{})}
		s := serve(t, e.store, e.client, &Config{Admin: admin})
		tok := e.token("auditor", RoleAdmin)
		var ids []string // the tokens' ids: the entries' targets
		create := func(i int) {
			var nt NewTokenJSON
			s.api.callAs(tok, http.MethodPost, "/api/v1/tokens", map[string]any{"name": fmt.Sprint("t", i), "role": "read"}, http.StatusCreated, &nt)
			ids = append(ids, nt.ID)
		}
		create(0)
		<-admin.entered // the first entry's append waits for the gate
		const n = 10
		for i := 1; i <= n; i++ {
			create(i)
		}
		close(admin.gate)
		var al AuditList
		s.api.callAs(tok, http.MethodGet, "/api/v1/audit?action=tokens.create&limit=100", nil, http.StatusOK, &al)
		if len(al.Entries) != n+1 {
			t.Fatalf("%d entries listed, want %d: %+v", len(al.Entries), n+1, al.Entries)
		}
		for i, en := range al.Entries {
			if want := ids[n-i]; en.Target != want {
				t.Errorf("entry %d (newest first): target %q, want %q", i, en.Target, want)
			}
		}
		if got := admin.calls.Load(); got != 2 {
			t.Errorf("%d appends for %d entries, want 2 (the first entry, then the %d answered while it was under way)", got, n+1, n)
		}
		if first, second := <-admin.sizes, <-admin.sizes; first != 1 || second != n {
			t.Errorf("batches of %d and %d entries, want 1 and %d", first, second, n)
		}
	})
}
