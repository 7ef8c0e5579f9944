package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// Appending the audit log.
//
// An entry is appended once its call has been answered, not before: its
// commit is not in the caller's latency (docs/benchmarks.md, "The start
// tail"). The entries of calls answered within auditLinger of each other
// go to the store together, in one transaction (store.Admin.AppendAudit
// of a batch): one commit for every entry was, at 50 run starts a second
// with HTTP workers, about 160 commits a second of their own.
//
// A listing of the audit log on this server waits for the entries of the
// calls it answered before (FlushAudit, which does not wait out the
// linger), so a caller still reads its own entry. A crash between the
// answer and the append loses the entries waiting (at most auditLinger
// of them), as a failed append does (logged).

// auditLinger is how long the first entry of a batch waits for others.
const auditLinger = 50 * time.Millisecond

// maxAuditBatch bounds the entries of one append.
const maxAuditBatch = 500

// auditQueue holds the entries waiting for their append.
type auditQueue struct {
	mu      sync.Mutex
	pending []*store.AuditEntry
	running bool // an appendAudit goroutine is draining pending
	// hurry ends the current linger (FlushAudit); buffered 1.
	hurry chan struct{}
}

// auditAfter queues the entry of a call to a route that records its
// calls (Route.action): every mutating call but heartbeats and claims of
// tasks. Calls refused for want of a valid token (401) have no actor and
// are not recorded. It is called before the answer is complete.
func (s *Server) auditAfter(c *call, rt *route, status int) {
	if rt.action == "" || status == http.StatusUnauthorized || c.actor == "" {
		return
	}
	e := &store.AuditEntry{
		At: s.cfg.Clock.Now().UTC(), Actor: c.actor, Role: string(c.role), Method: c.r.Method, Path: c.r.URL.Path,
		Action: rt.action, Target: c.target, Status: status, Detail: c.detail,
	}
	// Held until the entry is stored (appendAudit releases it).
	s.auditMu.RLock()
	q := &s.audit
	q.mu.Lock()
	q.pending = append(q.pending, e)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go s.appendAudit()
	}
}

// appendAudit appends the entries queued, a batch at a time after each
// linger, until none are left.
func (s *Server) appendAudit() {
	q := &s.audit
	linger := time.NewTimer(auditLinger)
	defer linger.Stop()
	for {
		select {
		case <-q.hurry:
		case <-linger.C:
		}
		q.mu.Lock()
		es := q.pending
		q.pending = nil
		if len(es) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		for len(es) > 0 {
			n := min(len(es), maxAuditBatch)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.cfg.Admin.AppendAudit(ctx, es[:n]...); err != nil {
				s.cfg.Logger.Error("server: append to the audit log", "entries", n, "first_action", es[0].Action, "first_target", es[0].Target, "err", err)
			}
			cancel()
			for range n {
				s.auditMu.RUnlock()
			}
			es = es[n:]
		}
		linger.Reset(auditLinger)
	}
}

// FlushAudit waits until the audit entries of the calls this server
// answered before it are stored (or their appends failed): a program
// that reads the audit log from the store, not through the API, calls it
// first. The API's listing of the audit log does.
func (s *Server) FlushAudit() {
	select {
	case s.audit.hurry <- struct{}{}:
	default:
	}
	s.auditMu.Lock()
	defer s.auditMu.Unlock() //nolint:staticcheck // an empty critical section: waiting for the readers is the point
}
