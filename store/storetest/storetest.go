// Package storetest is the conformance suite of the storage seam: every
// backend of store.Store passes it. A backend's test is little more than
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := mybackend.Open(...) // a new, empty database
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite pins the semantics that the store package documents, and a
// few it leaves implicit:
//
//   - A NewTask with a zero ReadyAt is ready at the Apply's Now.
//   - A NewRun with an empty Status is pending; with a BusinessID and an
//     empty KeyScope it has ScopeActive.
//   - Update.Cancel removes tasks that existed before the change: the
//     tasks the same Update enqueues are never cancelled by it.
//   - ReleaseTasks ends the lease: the released token no longer fences a
//     completion nor heartbeats.
//   - A lease that has expired but was not claimed again still fences and
//     heartbeats (the token is what counts, not the clock).
//   - ListRuns orders by creation time, then id, both descending; FindRun
//     picks the newest run in the same order.
//   - Close may be called twice; the other methods then fail with
//     store.ErrClosed.
//   - A Change.Key is checked against the run's history as stored and
//     against the earlier changes of the same Apply.
//   - GetTask returns a task's lease as stored: an expired lease still
//     shows its owner and token.
//   - ListDocuments orders by name (byte order), then version, newest
//     first; GetDocument by a hash that several names have returns the
//     oldest of those versions (then by name).
//
// Times are fixed (a base time plus offsets passed as Now): nothing in the
// suite sleeps or reads the clock.
package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Run runs the suite. newStore returns a new, empty store for one subtest
// and arranges (t.Cleanup) for it to be closed; subtests run in parallel.
//
// A backend that implements store.TxInserter passes WithTx, so that the
// suite can open transactions of the caller's kind.
func Run(t *testing.T, newStore func(t *testing.T) store.Store, opts ...Option) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"NotFound", testNotFound},
		{"FindRunNewest", testFindRunNewest},
		{"ListRunsFilters", testListRunsFilters},
		{"ListRunsPagination", testListRunsPagination},
		{"ListRunsLimits", testListRunsLimits},
		{"ListRunsMoreFilters", testListRunsMore},
		{"ListRunsChanged", testListRunsChanged},
		{"ListRunsVersionParentIDs", testListRunsVersionParentIDs},
		{"RunStats", testRunStats},
		{"RunStatsExact", testRunStatsExact},
		{"Reopen", testReopen},
		{"History", testHistory},
		{"ApplyUpdate", testApplyUpdate},
		{"ApplySameRunTwiceInBatch", testSameRunTwiceInBatch},
		{"DecideErrorRefusesOnlyThatChange", testDecideError},
		{"Fencing", testFencing},
		{"FencingStaleToken", testFencingStale},
		{"ClaimOrderAndFields", testClaimOrder},
		{"ClaimLimit", testClaimLimit},
		{"PauseClaim", testPauseClaim},
		{"ExpiredLease", testExpiredLease},
		{"Heartbeat", testHeartbeat},
		{"ReleaseTasks", testReleaseTasks},
		{"CancelMatches", testCancelMatches},
		{"CancelLeasedTask", testCancelLeased},
		{"NextReady", testNextReady},
		{"BusinessKeyActive", testKeyActive},
		{"BusinessKeyForever", testKeyForever},
		{"BusinessKeyNone", testKeyNone},
		{"BusinessKeySameBatch", testKeySameBatch},
		{"BusinessKeyPerWorkflow", testKeyPerWorkflow},
		{"ClaimInApply", testClaimInApply},
		{"RunExists", testRunExists},
		{"PruneRuns", testPrune},
		{"PruneSelected", testPruneSelected},
		{"DeleteRun", testDeleteRun},
		{"DeleteRunActive", testDeleteRunActive},
		{"DeleteRunForced", testDeleteRunForced},
		{"ExpiredRuns", testExpiredRuns},
		{"Close", testClose},
		{"ConcurrentClaims", testConcurrentClaims},
		{"ConcurrentStarts", testConcurrentStarts},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"ChangeKey", testChangeKey},
		{"FenceOtherRun", testFenceOtherRun},
		{"FencedCreate", testFencedCreate},
		{"Handlers", testHandlers},
		{"HandlersBehindOthers", testHandlersBehindOthers},
		{"StrictClaims", testStrictClaims},
		{"GetTask", testGetTask},
		{"RemoteClaims", testRemoteClaims},
		{"HeartbeatDetails", testHeartbeatDetails},
		{"Condition", testCondition},
		{"PruneKeepsWork", testPruneKeepsWork},
		{"StrandedTasks", testStrandedTasks},
		{"Workers", testWorkers},
		{"Requests", testRequests},
		{"Documents", testDocuments},
		{"DocumentValidation", testDocumentValidation},
		{"ListDocuments", testListDocuments},
		{"ConcurrentDocumentPuts", testConcurrentPuts},
		{"PruneKeepsDocuments", testPruneKeepsDocuments},
		{"Events", testEvents},
		{"ConcurrentEventSends", testConcurrentEventSends},
		{"Triggers", testTriggers},
		{"ConcurrentFiringClaims", testConcurrentFiringClaims},
		{"EventWaits", testEventWaits},
		{"ConcurrentEventWaitMatches", testConcurrentEventWaitMatches},
		{"TriggerGroups", testTriggerGroups},
		{"TriggerThrottle", testTriggerThrottle},
		{"ThrottleLaggingJoin", testThrottleLaggingJoin},
		{"TriggerGroupsPaged", testTriggerGroupsPaged},
		{"ConcurrentTriggerGroups", testConcurrentGroups},
		{"Schedules", testSchedules},
		{"ScheduleUpdate", testScheduleUpdate},
		{"DueSchedules", testDueSchedules},
		{"ScheduleCAS", testScheduleCAS},
		{"QueueConfig", testQueueConfig},
		{"QueueUnconfigured", testQueueUnconfigured},
		{"QueueLimits", testQueueLimits},
		{"QueuePause", testQueuePause},
		{"QueueRate", testQueueRate},
		{"QueueFairness", testQueueFairness},
		{"QueueConcurrentClaims", testQueueConcurrentClaims},
		{"QueueManyKeys", testQueueManyKeys},
		{"TraceContext", testTraceContext},
		{"Catalog", testCatalog},
		{"CatalogValidation", testCatalogValidation},
		{"Builds", testBuilds},
		{"Versions", testVersions},
		{"VersionGeneration", testVersionGeneration},
		{"VersionRunCounts", testVersionRunCounts},
		{"Logs", testLogs},
		{"LogBounds", testLogBounds},
		{"EarliestReady", testEarliestReady},
		{"RunTasks", testRunTasks},
		{"SearchAttributes", testSearchAttributes},
		{"SearchAttributesFenced", testSearchAttributesFenced},
		{"SearchAttributesProperty", testSearchAttributesProperty},
	}
	tests = append(tests, txTests(&c)...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, &harness{t: t, s: newStore(t), encoded: c.encoded})
		})
	}
}

// base is the suite's clock origin; at(d) is base+d.
var base = time.Date(2031, 3, 4, 5, 6, 7, 123456000, time.UTC)

func at(d time.Duration) time.Time { return base.Add(d) }

// opts compare JSON by value (a backend may normalize it) and treat nil
// and empty alike; times compare with Equal.
var opts = cmp.Options{
	cmp.Comparer(jsonEqual),
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type() != rawType }, cmpopts.EquateEmpty()),
}

var rawType = reflect.TypeFor[json.RawMessage]()

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// harness wraps a store with helpers that fail the test on store errors.
type harness struct {
	t *testing.T
	s store.Store
	// encoded: the store encodes payloads (EncodedPayloads).
	encoded bool
}

// apply applies changes at now and fails on a store error (not on
// refused changes).
func (h *harness) apply(now time.Time, changes ...store.Change) []store.ChangeResult {
	h.t.Helper()
	res, err := h.s.Apply(h.t.Context(), &store.ApplyParams{Changes: changes, Now: now})
	if err != nil {
		h.t.Fatalf("Apply: %v", err)
	}
	if len(res.Changes) != len(changes) || len(res.Claimed) != 0 {
		h.t.Fatalf("Apply returned %d results for %d changes and %d claim lists for none", len(res.Changes), len(changes), len(res.Claimed))
	}
	return res.Changes
}

// create creates runs and fails unless all were created.
func (h *harness) create(now time.Time, runs ...*store.NewRun) []store.ChangeResult {
	h.t.Helper()
	var cs []store.Change
	for _, r := range runs {
		cs = append(cs, store.Change{Create: r})
	}
	res := h.apply(now, cs...)
	for i, r := range res {
		if r.Err != nil {
			h.t.Fatalf("create %s: %v", runs[i].ID, r.Err)
		}
		if r.Run == nil || r.Run.ID != runs[i].ID {
			h.t.Fatalf("create %s: result run = %+v", runs[i].ID, r.Run)
		}
	}
	return res
}

// update applies one update returning u and reports its result.
func (h *harness) update(now time.Time, runID string, fence *store.Lease, u *store.Update) store.ChangeResult {
	h.t.Helper()
	return h.apply(now, store.Change{RunID: runID, Fence: fence, Decide: func(*store.Run) (*store.Update, error) { return u, nil }})[0]
}

// mustUpdate is update that fails unless the change applied.
func (h *harness) mustUpdate(now time.Time, runID string, fence *store.Lease, u *store.Update) store.ChangeResult {
	h.t.Helper()
	res := h.update(now, runID, fence, u)
	if res.Err != nil {
		h.t.Fatalf("update %s: %v", runID, res.Err)
	}
	return res
}

func (h *harness) get(id string) *store.Run {
	h.t.Helper()
	r, err := h.s.GetRun(h.t.Context(), id)
	if err != nil {
		h.t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r
}

func (h *harness) history(id string) []store.Event {
	h.t.Helper()
	evs, err := h.s.History(h.t.Context(), &store.HistoryParams{RunID: id})
	if err != nil {
		h.t.Fatalf("History(%s): %v", id, err)
	}
	return evs
}

func (h *harness) claim(now time.Time, owner string, limit int, leaseFor time.Duration, queues ...string) []*store.Task {
	h.t.Helper()
	ts, err := h.s.ClaimTasks(h.t.Context(), &store.ClaimParams{Queues: queues, Owner: owner, Limit: limit, LeaseFor: leaseFor, Now: now})
	if err != nil {
		h.t.Fatalf("ClaimTasks: %v", err)
	}
	return ts
}

func (h *harness) heartbeat(until time.Time, leases ...store.Lease) []int64 {
	h.t.Helper()
	lost, err := h.s.Heartbeat(h.t.Context(), &store.HeartbeatParams{Leases: leases, Until: until})
	if err != nil {
		h.t.Fatalf("Heartbeat: %v", err)
	}
	slices.Sort(lost)
	return lost
}

func (h *harness) list(p store.ListRunsParams) *store.RunPage {
	h.t.Helper()
	page, err := h.s.ListRuns(h.t.Context(), &p)
	if err != nil {
		h.t.Fatalf("ListRuns(%+v): %v", p, err)
	}
	return page
}

// newRun is a running flow run with no business id.
func newRun(id string) *store.NewRun {
	return &store.NewRun{
		ID: id, Workflow: "wf", Version: 1, Kind: hephtype.KindFlow,
		Status: hephtype.StatusRunning, Input: raw(`{"id":"` + id + `"}`),
	}
}

// withTasks returns r with tasks added.
func withTasks(r *store.NewRun, ts ...store.NewTask) *store.NewRun {
	r.Tasks = append(r.Tasks, ts...)
	return r
}

func task(queue, step string, readyAt time.Time) store.NewTask {
	return store.NewTask{Queue: queue, Kind: store.TaskStep, Step: step, Index: -1, Attempt: 1, ReadyAt: readyAt}
}

func ids(runs []*store.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

func taskIDs(ts []*store.Task) []int64 {
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func sorted[T interface{ ~int64 | ~string }](s []T) []T {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error = %v, want %v", what, err, target)
	}
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got, opts); d != "" {
		t.Fatalf("%s (-want +got):\n%s", what, d)
	}
}

func name(i int) string { return fmt.Sprintf("r%03d", i) }
