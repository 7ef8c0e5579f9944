// Package payloadstore puts a payload codec (package codec: compression,
// encryption) between the runtime and a store: every payload the runtime
// writes is encoded before it reaches the store, and every payload read
// back is decoded before the runtime sees it, so the database (its
// backups, replicas and readers) holds envelopes only.
//
// The payloads are the run's input, output, snapshot (State) and
// published state; history entries' data; tasks' payload, item and
// heartbeat details; requests' arguments and results; schedules' input;
// and webhook events' data and deliveries' bodies. Names, statuses,
// times, tags, metadata, search attributes, errors, step logs, documents
// and the catalog are not payloads: lists, filters and graphs work on
// them as before.
//
// Wrap returns a store.Store that also implements the optional
// interfaces of the wrapped store (store.Admin, store.Notifier) and,
// always, store.TxInserter and store.ConcurrentApplier (delegated when
// the wrapped store has them).
package payloadstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/store"
)

// Store is a store.Store whose payloads pass through a codec chain.
type Store struct {
	store.Store
	chain *codec.Chain // nil: payloads stored as they are
	off   *Offload     // nil: none offloaded
	plain *plainCache  // envelopes this process wrote or read lately
	snaps *snapCache   // snapshots read lately
}

// Wrap returns s with its payloads encoded by chain. Wrapping a store
// twice with the same chain returns it as it is.
func Wrap(s store.Store, chain *codec.Chain) store.Store {
	return WrapOffload(s, chain, nil)
}

// WrapOffload returns s with its payloads encoded by chain (nil: none)
// and those larger than off.Above offloaded to off.Bucket (nil: none).
// Wrapping a store twice with the same chain and offload returns it as
// it is.
func WrapOffload(s store.Store, chain *codec.Chain, off *Offload) store.Store {
	if b := baseOf(s); b != nil && b.chain == chain && sameOffload(b.off, off) {
		return s
	}
	base := &Store{Store: s, chain: chain, off: off, plain: &plainCache{}, snaps: &snapCache{}}
	a, isAdmin := s.(store.Admin)
	n, notifies := s.(store.Notifier)
	switch {
	case isAdmin && notifies:
		return &adminNotifyStore{adminStore: adminStore{Store: base, admin: a}, Notifier: n}
	case isAdmin:
		return &adminStore{Store: base, admin: a}
	case notifies:
		return &notifyStore{Store: base, Notifier: n}
	}
	return base
}

func sameOffload(a, b *Offload) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Bucket == b.Bucket && a.Above == b.Above
}

// Unwrap returns the store under a wrapped one, or s itself.
func Unwrap(s store.Store) store.Store {
	if b := baseOf(s); b != nil {
		return b.Store
	}
	return s
}

// Chain returns the codec chain of a wrapped store, or nil.
func Chain(s store.Store) *codec.Chain {
	if b := baseOf(s); b != nil {
		return b.chain
	}
	return nil
}

// OffloadOf returns the offload of a wrapped store, or nil.
func OffloadOf(s store.Store) *Offload {
	if b := baseOf(s); b != nil {
		return b.off
	}
	return nil
}

func baseOf(s store.Store) *Store {
	switch w := s.(type) {
	case *Store:
		return w
	case *adminStore:
		return w.Store
	case *notifyStore:
		return w.Store
	case *adminNotifyStore:
		return w.Store
	}
	return nil
}

type notifyStore struct {
	*Store
	store.Notifier
}

type adminNotifyStore struct {
	adminStore
	store.Notifier
}

// enc encodes one payload; what names it in errors.
func (s *Store) enc(v json.RawMessage, what string) (json.RawMessage, error) {
	return s.encode(v, what, true)
}

// encSnapshot encodes a run's snapshot: the references the runtime put
// in it are stored, but no value in it is offloaded on its own (the
// runtime reads its structure with the references in place); if it is
// long, it is offloaded whole.
func (s *Store) encSnapshot(v json.RawMessage) (json.RawMessage, error) {
	return s.encode(v, "state", false)
}

// encode encodes one payload, its large values offloaded on their own
// when split.
func (s *Store) encode(v json.RawMessage, what string, split bool) (json.RawMessage, error) {
	if len(v) == 0 {
		return v, nil
	}
	// No context reaches here; blob writes are bounded by the blob
	// store's own timeouts.
	ctx := context.Background()
	refs := false
	if (split && s.off != nil && len(v) > s.off.Above) || mayHoldRef(v) {
		n := &nester{s: s, ctx: ctx, split: split}
		nv, r, err := n.nest(v, true)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if IsBlobRef(nv) {
			return nv, nil // a reference this process issued, stored as it is
		}
		v, refs = nv, r
	}
	out := v
	if s.chain != nil {
		var err error
		if out, err = s.chain.EncodeJSON(v); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		s.plain.put(out, v)
	}
	if s.off == nil || len(out) <= s.off.Above {
		return out, nil
	}
	// Written before the commit that refers to it.
	ref, err := s.off.put(ctx, out, refs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ref, nil
}

// dec decodes one payload; what names it in errors. keep: the references
// in it are kept (given their tokens), not resolved (a run's snapshot).
func (s *Store) dec(v json.RawMessage, what string, keep bool) (json.RawMessage, error) {
	if keep && s.snaps != nil {
		if out, ok := s.snaps.get(v); ok {
			return out, nil
		}
		out, err := s.decode(v, what, true)
		if err == nil {
			s.snaps.put(v, out)
		}
		return out, err
	}
	return s.decode(v, what, keep)
}

func (s *Store) decode(v json.RawMessage, what string, keep bool) (json.RawMessage, error) {
	ctx := context.Background()
	// One scan for the marker: a reference, an envelope, or neither.
	marker, _ := codec.Marker(v)
	if marker == refFormat && IsBlobRef(v) {
		b, err := s.off.get(ctx, v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		v = b
		marker, _ = codec.Marker(v)
	}
	if s.chain != nil && marker != "" && codec.IsEncoded(v) {
		p, ok := s.plain.get(v)
		if !ok {
			out, err := s.chain.DecodeJSON(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			s.plain.put(v, out)
			p = out
		}
		v = p
	}
	out, err := s.unnest(ctx, v, keep)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// field is a payload to transform in place, and its name for errors.
type field struct {
	v    *json.RawMessage
	what string
}

func (s *Store) encAll(fs ...field) error {
	for _, f := range fs {
		v, err := s.enc(*f.v, f.what)
		if err != nil {
			return err
		}
		*f.v = v
	}
	return nil
}

func (s *Store) decAll(fs ...field) error {
	for _, f := range fs {
		v, err := s.dec(*f.v, f.what, false)
		if err != nil {
			return err
		}
		*f.v = v
	}
	return nil
}

// decRun returns a decoded copy of r (nil for nil).
func (s *Store) decRun(r *store.Run) (*store.Run, error) {
	if r == nil {
		return nil, nil
	}
	c := *r
	err := s.decAll(field{&c.Input, "input"}, field{&c.Output, "output"}, field{&c.Published, "published state"})
	if err == nil {
		// The snapshot keeps its references (nested.go).
		c.State, err = s.dec(c.State, "state", true)
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return &c, nil
}

// decTask returns a decoded copy of t (nil for nil).
func (s *Store) decTask(t *store.Task) (*store.Task, error) {
	if t == nil {
		return nil, nil
	}
	c := *t
	err := s.decAll(field{&c.Payload, "payload"}, field{&c.Item, "item"}, field{&c.Details, "heartbeat details"})
	if err != nil {
		return nil, fmt.Errorf("task %d of run %s: %w", t.ID, t.RunID, err)
	}
	return &c, nil
}

func (s *Store) decTasks(ts []*store.Task) ([]*store.Task, error) {
	if ts == nil {
		return nil, nil
	}
	out := make([]*store.Task, len(ts))
	for i, t := range ts {
		d, err := s.decTask(t)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// encTasks returns encoded copies of ts.
func (s *Store) encTasks(ts []store.NewTask) ([]store.NewTask, error) {
	if ts == nil {
		return nil, nil
	}
	out := make([]store.NewTask, len(ts))
	for i, t := range ts {
		err := s.encAll(field{&t.Payload, "payload"}, field{&t.Item, "item"}, field{&t.Details, "heartbeat details"})
		if err != nil {
			return nil, fmt.Errorf("task %d (%s %s): %w", i, t.Kind, t.Step, err)
		}
		out[i] = t
	}
	return out, nil
}

// encEvents returns encoded copies of evs.
func (s *Store) encEvents(evs []store.NewEvent) ([]store.NewEvent, error) {
	if evs == nil {
		return nil, nil
	}
	out := make([]store.NewEvent, len(evs))
	for i, e := range evs {
		if err := s.encAll(field{&e.Data, "data"}); err != nil {
			return nil, fmt.Errorf("history entry %d (%s): %w", i, e.Kind, err)
		}
		out[i] = e
	}
	return out, nil
}

// encNewRun returns an encoded copy of r.
func (s *Store) encNewRun(r *store.NewRun) (*store.NewRun, error) {
	c := *r
	err := s.encAll(field{&c.Input, "input"}, field{&c.Output, "output"})
	if err == nil {
		c.State, err = s.encSnapshot(c.State)
	}
	if err == nil {
		c.History, err = s.encEvents(r.History)
	}
	if err == nil {
		c.Tasks, err = s.encTasks(r.Tasks)
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return &c, nil
}

// encUpdate returns an encoded copy of u (nil for nil).
func (s *Store) encUpdate(u *store.Update) (*store.Update, error) {
	if u == nil {
		return nil, nil
	}
	c := *u
	err := s.encAll(field{&c.Output, "output"}, field{&c.Published, "published state"})
	if err == nil {
		c.State, err = s.encSnapshot(c.State)
	}
	if err == nil {
		c.History, err = s.encEvents(u.History)
	}
	if err == nil {
		c.Tasks, err = s.encTasks(u.Tasks)
	}
	return &c, err
}

// decResults decodes the runs and tasks of change results in place (the
// slices are the caller's, fresh from the store; the runs and tasks are
// replaced by decoded copies).
func (s *Store) decResults(rs []store.ChangeResult) {
	for i := range rs {
		r := &rs[i]
		if r.Err != nil {
			continue
		}
		run, err := s.decRun(r.Run)
		if err == nil {
			r.Tasks, err = s.decTasks(r.Tasks)
		}
		if err != nil {
			// The change was applied; only its result cannot be read.
			// The runtime treats the result as an error of the store's
			// answer for this change: reading the run again fails the
			// same way, and says why.
			r.Run, r.Err = nil, &ResultError{Err: err}
			continue
		}
		r.Run = run
	}
}

// ResultError is the error of a change that was applied but whose result
// could not be decoded (a key the process does not hold).
type ResultError struct{ Err error }

func (e *ResultError) Error() string {
	return "the change was applied, but its result cannot be decoded: " + e.Err.Error()
}

func (e *ResultError) Unwrap() error { return e.Err }

// Apply encodes the changes' payloads, wraps their Decide functions so
// that they see decoded runs and return encoded updates, and decodes the
// results. A change whose payloads cannot be encoded is refused with the
// error, and the others are applied.
func (s *Store) Apply(ctx context.Context, p *store.ApplyParams) (*store.ApplyResult, error) {
	changes := make([]store.Change, 0, len(p.Changes))
	at := make([]int, 0, len(p.Changes)) // at[i]: the index in p.Changes of changes[i]
	refused := map[int]error{}
	for i, c := range p.Changes {
		if c.Create != nil {
			nr, err := s.encNewRun(c.Create)
			if err != nil {
				refused[i] = err
				continue
			}
			c.Create = nr
		}
		if c.Decide != nil {
			c.Decide = s.decide(c.Decide)
		}
		changes = append(changes, c)
		at = append(at, i)
	}
	q := *p
	q.Changes = changes
	res, err := s.Store.Apply(ctx, &q)
	if err != nil {
		return res, err
	}
	s.decClaims(ctx, res.Claimed)
	s.decResults(res.Changes)
	if len(refused) == 0 {
		return res, nil
	}
	all := make([]store.ChangeResult, len(p.Changes))
	for i, e := range refused {
		all[i].Err = e
	}
	for j, r := range res.Changes {
		all[at[j]] = r
	}
	res.Changes = all
	return res, nil
}

// decClaims decodes the tasks an Apply claimed. A task that cannot be
// decoded (a key this process does not hold) is given back and left
// out: the changes were applied, so the Apply must not fail; the next
// ClaimTasks that takes it fails and says why.
func (s *Store) decClaims(ctx context.Context, claimed [][]*store.Task) {
	for i, ts := range claimed {
		out := ts[:0:0]
		var bad []*store.Task
		for _, t := range ts {
			d, err := s.decTask(t)
			if err != nil {
				bad = append(bad, t)
				continue
			}
			out = append(out, d)
		}
		if len(bad) > 0 {
			s.release(ctx, bad)
		}
		claimed[i] = out
	}
}

// release gives leased tasks back (best effort: a lease not given back
// expires).
func (s *Store) release(ctx context.Context, ts []*store.Task) {
	ls := make([]store.Lease, 0, len(ts))
	for _, t := range ts {
		ls = append(ls, t.Lease())
	}
	_ = s.ReleaseTasks(context.WithoutCancel(ctx), ls)
}

func (s *Store) decide(f func(*store.Run) (*store.Update, error)) func(*store.Run) (*store.Update, error) {
	return func(run *store.Run) (*store.Update, error) {
		d, err := s.decRun(run)
		if err != nil {
			return nil, err
		}
		u, err := f(d)
		if err != nil || u == nil {
			return u, err
		}
		return s.encUpdate(u)
	}
}

// GetRun decodes the run.
func (s *Store) GetRun(ctx context.Context, id string) (*store.Run, error) {
	r, err := s.Store.GetRun(ctx, id)
	if err != nil {
		return r, err
	}
	return s.decRun(r)
}

// FindRun decodes the run.
func (s *Store) FindRun(ctx context.Context, p *store.FindRunParams) (*store.Run, error) {
	r, err := s.Store.FindRun(ctx, p)
	if err != nil {
		return r, err
	}
	return s.decRun(r)
}

// ListRuns decodes the runs of the page.
func (s *Store) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.RunPage, error) {
	pg, err := s.Store.ListRuns(ctx, p)
	if err != nil || pg == nil {
		return pg, err
	}
	for i, r := range pg.Runs {
		if pg.Runs[i], err = s.decRun(r); err != nil {
			return nil, err
		}
	}
	return pg, nil
}

// History decodes the entries' data.
func (s *Store) History(ctx context.Context, p *store.HistoryParams) ([]store.Event, error) {
	evs, err := s.Store.History(ctx, p)
	if err != nil {
		return evs, err
	}
	for i := range evs {
		e := &evs[i]
		if e.Data, err = s.dec(e.Data, "data", false); err != nil {
			return nil, fmt.Errorf("run %s: history entry %d: %w", e.RunID, e.Seq, err)
		}
	}
	return evs, nil
}

// ClaimTasks decodes the tasks; when one cannot be decoded, it gives the
// tasks back and fails.
func (s *Store) ClaimTasks(ctx context.Context, p *store.ClaimParams) ([]*store.Task, error) {
	ts, err := s.Store.ClaimTasks(ctx, p)
	if err != nil {
		return ts, err
	}
	d, err := s.decTasks(ts)
	if err != nil {
		s.release(ctx, ts)
		return nil, err
	}
	return d, nil
}

// GetTask decodes the task.
func (s *Store) GetTask(ctx context.Context, id int64) (*store.Task, error) {
	t, err := s.Store.GetTask(ctx, id)
	if err != nil {
		return t, err
	}
	return s.decTask(t)
}

// StrandedTasks decodes the tasks.
func (s *Store) StrandedTasks(ctx context.Context, p *store.StrandedParams) ([]*store.Task, error) {
	ts, err := s.Store.StrandedTasks(ctx, p)
	if err != nil {
		return ts, err
	}
	return s.decTasks(ts)
}

// RunTasks decodes the tasks.
func (s *Store) RunTasks(ctx context.Context, runID string) ([]*store.Task, error) {
	ts, err := s.Store.RunTasks(ctx, runID)
	if err != nil {
		return ts, err
	}
	return s.decTasks(ts)
}

// Heartbeat encodes the details.
func (s *Store) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]int64, error) {
	if len(p.Details) == 0 {
		return s.Store.Heartbeat(ctx, p)
	}
	q := *p
	q.Details = make(map[int64]json.RawMessage, len(p.Details))
	for id, d := range p.Details {
		v, err := s.enc(d, "heartbeat details")
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", id, err)
		}
		q.Details[id] = v
	}
	return s.Store.Heartbeat(ctx, &q)
}

// decRequest returns a decoded copy of r (nil for nil).
func (s *Store) decRequest(r *store.Request) (*store.Request, error) {
	if r == nil {
		return nil, nil
	}
	c := *r
	if err := s.decAll(field{&c.Args, "arguments"}, field{&c.Result, "result"}); err != nil {
		return nil, fmt.Errorf("request %s of run %s: %w", r.ID, r.RunID, err)
	}
	return &c, nil
}

// CreateRequest encodes the arguments and the task, and decodes the
// request returned (also with ErrDuplicateRequest).
func (s *Store) CreateRequest(ctx context.Context, p *store.CreateRequestParams) (*store.Request, error) {
	q := *p
	if err := s.encAll(field{&q.Request.Args, "arguments"}); err != nil {
		return nil, fmt.Errorf("request %s: %w", p.Request.ID, err)
	}
	ts, err := s.encTasks([]store.NewTask{p.Task})
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", p.Request.ID, err)
	}
	q.Task = ts[0]
	r, err := s.Store.CreateRequest(ctx, &q)
	d, derr := s.decRequest(r)
	if derr != nil {
		return nil, errors.Join(err, derr)
	}
	return d, err
}

// AnswerRequest encodes the result (and the request it records).
func (s *Store) AnswerRequest(ctx context.Context, p *store.AnswerRequestParams) error {
	q := *p
	if err := s.encAll(field{&q.Result, "result"}); err != nil {
		return fmt.Errorf("request %s: %w", p.ID, err)
	}
	if p.Request != nil {
		nr := *p.Request
		if err := s.encAll(field{&nr.Args, "arguments"}); err != nil {
			return fmt.Errorf("request %s: %w", p.ID, err)
		}
		q.Request = &nr
	}
	return s.Store.AnswerRequest(ctx, &q)
}

// GetRequest decodes the request.
func (s *Store) GetRequest(ctx context.Context, runID, id string) (*store.Request, error) {
	r, err := s.Store.GetRequest(ctx, runID, id)
	if err != nil {
		return r, err
	}
	return s.decRequest(r)
}
