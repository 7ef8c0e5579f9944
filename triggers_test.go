package hephaestus_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
)

// Triggers: every event of a trigger's name gets one firing; the filter
// skips, the input maps, a re-sent event fires nothing new; a firing
// whose claimer died is carried out by the next claim after the lease
// with the run id the first claim fixed, and a run that claimer started
// already is not started twice.
func TestTriggers(t *testing.T) {
	clk := clock.NewFake(time.Date(2032, 3, 1, 0, 0, 0, 0, time.UTC))
	c := docClient(t, filepath.Join(t.TempDir(), "triggers.db"), clk)
	ctx := t.Context()
	if err := c.Register(echoFlow); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		t    *heph.Trigger
		want string
	}{
		{&heph.Trigger{Name: "x", Event: "say", Target: heph.TargetFlow, TargetName: "echo", Filter: "event.data.n >"}, `trigger "x": filter`},
		{&heph.Trigger{Name: "x", Event: "say", Target: heph.TargetFlow, TargetName: "echo", Filter: "event.data.msg"}, ``},
		{&heph.Trigger{Name: "x", Event: "say", Target: "cron", TargetName: "echo"}, `target kind "cron"`},
		{&heph.Trigger{Name: "x", Event: "", Target: heph.TargetFlow, TargetName: "echo"}, `event name must be 1 to 200 bytes`},
		{&heph.Trigger{Name: "x", Event: "say", Target: heph.TargetFlow, TargetName: "echo", Input: "{"}, `trigger "x": input`},
	} {
		err := c.DeclareTriggers(ctx, bad.t)
		if bad.want == "" {
			if err != nil {
				t.Errorf("a dyn filter is accepted at declaration: %v", err)
			}
			continue
		}
		if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("declare %+v: %v, want ErrInvalidInput naming %q", bad.t, err, bad.want)
		}
	}
	if err := c.Store().DeleteTrigger(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeclareTriggers(ctx,
		&heph.Trigger{Name: "big", Event: "say", Target: heph.TargetFlow, TargetName: "echo", Filter: "event.data.n > 1", Input: "event.data.msg"},
		&heph.Trigger{Name: "all", Event: "say", Target: heph.TargetFlow, TargetName: "echo", Input: `"all " + event.data.msg`},
	); err != nil {
		t.Fatal(err)
	}

	send := func(id string, data map[string]any) {
		t.Helper()
		if _, err := c.SendEvent(ctx, "say", data, &heph.SendEventOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	send("e1", map[string]any{"n": 1, "msg": "a"})
	send("e2", map[string]any{"n": 2, "msg": "b"})
	send("e1", map[string]any{"n": 9, "msg": "z"})
	if _, err := c.SendEvent(ctx, "other", nil, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := c.DispatchTriggers(ctx); err != nil || n != 4 {
		t.Fatalf("dispatch: %d, %v", n, err)
	}
	if n, err := c.DispatchTriggers(ctx); err != nil || n != 0 {
		t.Fatalf("dispatch again: %d, %v", n, err)
	}
	inputs := map[string]string{}
	for _, id := range []string{"e1", "e2"} {
		fs, err := c.EventFirings(ctx, id)
		if err != nil || len(fs) != 2 {
			t.Fatalf("firings of %s: %+v, %v", id, fs, err)
		}
		for _, f := range fs {
			key := id + "/" + f.Trigger
			if f.Status == heph.FiringSkipped {
				inputs[key] = "skipped"
				continue
			}
			r, err := c.GetRun(ctx, f.RunID)
			if f.Status != heph.FiringStarted || err != nil || string(r.Metadata["event"]) != `"`+id+`"` {
				t.Fatalf("%s: %+v, run %+v, %v", key, f, r, err)
			}
			inputs[key] = string(r.Input)
		}
	}
	want := map[string]string{"e1/all": `"all a"`, "e1/big": "skipped", "e2/all": `"all b"`, "e2/big": `"b"`}
	for k, v := range want {
		if inputs[k] != v {
			t.Errorf("%s: %s, want %s", k, inputs[k], v)
		}
	}

	// A claimer that died: e3's firing by "all" is leased to it with run
	// id dead; it even started that run before dying.
	send("e3", map[string]any{"n": 0, "msg": "c"})
	dead := uuid.Must(uuid.NewV7()).String()
	fs, err := c.Store().ClaimFirings(ctx, &store.ClaimFiringsParams{Triggers: []string{"all"}, Owner: "dead", Now: clk.Now(),
		LeaseFor: time.Minute, RunIDs: []string{dead}, Limit: 1})
	if err != nil || len(fs) != 1 || fs[0].RunID != dead {
		t.Fatalf("the dead claim: %+v, %v", fs, err)
	}
	if _, err := c.StartRun(ctx, "echo", "all c", &heph.StartOptions{RunID: dead}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.DispatchTriggers(ctx); err != nil || n != 1 {
		t.Fatalf("dispatch while the dead lease holds: %d, %v", n, err) // big's firing (skipped)
	}
	clk.Advance(2 * time.Minute)
	if n, err := c.DispatchTriggers(ctx); err != nil || n != 1 {
		t.Fatalf("dispatch after the lease: %d, %v", n, err)
	}
	fs3, _ := c.EventFirings(ctx, "e3")
	if len(fs3) != 2 || fs3[0].Trigger != "all" || fs3[0].Status != heph.FiringStarted || fs3[0].RunID != dead || fs3[1].Status != heph.FiringSkipped {
		t.Fatalf("firings of e3: %+v", fs3)
	}
	page, err := c.ListRuns(context.Background(), &heph.ListOptions{Flow: "echo", Limit: 100})
	if err != nil || len(page.Runs) != 4 {
		t.Fatalf("runs of echo: %d, %v (want 4: e1/all, e2/all, e2/big, e3/all once)", len(page.Runs), err)
	}
}

// Triggers managed at run time: put by one process, carried out by
// another once it reads them again (within ten poll intervals), replaced,
// listed with the declared ones, and deleted; a declared trigger is not
// replaced by a managed one.
func TestManagedTriggers(t *testing.T) {
	clk := clock.NewFake(time.Date(2032, 3, 1, 0, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "managed.db")
	c1, c2 := docClient(t, path, clk), docClient(t, path, clk)
	ctx := t.Context()
	for _, c := range []*heph.Client{c1, c2} {
		if err := c.Register(echoFlow); err != nil {
			t.Fatal(err)
		}
	}
	if err := c1.DeclareTriggers(ctx, &heph.Trigger{Name: "coded", Event: "other", Target: heph.TargetFlow, TargetName: "echo"}); err != nil {
		t.Fatal(err)
	}
	// c2 reads the managed triggers now (none), and not again for ten poll
	// intervals.
	if n, err := c2.DispatchTriggers(ctx); err != nil || n != 0 {
		t.Fatalf("first dispatch: %d, %v", n, err)
	}
	m := &heph.Trigger{Name: "managed", Event: "ping", Target: heph.TargetFlow, TargetName: "echo", Input: `"got " + event.data.msg`}
	if _, err := c1.PutTrigger(ctx, m); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		t    *heph.Trigger
		want error
	}{
		{&heph.Trigger{Name: "coded", Event: "ping", Target: heph.TargetFlow, TargetName: "echo"}, heph.ErrTriggerDeclared},
		{&heph.Trigger{Name: "bad", Event: "ping", Target: heph.TargetFlow, TargetName: "echo", Filter: "event.data.n >"}, heph.ErrInvalidInput},
		{&heph.Trigger{Name: "bad", Event: "ping", Target: "cron", TargetName: "echo"}, heph.ErrInvalidInput},
		{nil, heph.ErrInvalidInput},
	} {
		if _, err := c1.PutTrigger(ctx, bad.t); !errors.Is(err, bad.want) {
			t.Errorf("put %+v: %v, want %v", bad.t, err, bad.want)
		}
	}
	if _, err := c1.SendEvent(ctx, "ping", map[string]any{"msg": "one"}, &heph.SendEventOptions{ID: "p1"}); err != nil {
		t.Fatal(err)
	}
	if n, err := c2.DispatchTriggers(ctx); err != nil || n != 0 {
		t.Fatalf("c2 before it reads the triggers again: %d, %v", n, err)
	}
	clk.Advance(10 * time.Second) // ten default poll intervals (1s)
	if n, err := c2.DispatchTriggers(ctx); err != nil || n != 1 {
		t.Fatalf("c2 after ten poll intervals: %d, %v", n, err)
	}
	fs, err := c1.EventFirings(ctx, "p1")
	if err != nil || len(fs) != 1 || fs[0].Status != heph.FiringStarted {
		t.Fatalf("firings of p1: %+v, %v", fs, err)
	}
	if err := c2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := c2.WaitRun(ctx, fs[0].RunID); err != nil || !strings.Contains(string(r.Output), "got one") {
		t.Fatalf("the run: %+v, %v", r, err)
	}

	ts, err := c2.ListTriggers(ctx)
	if err != nil || len(ts) != 2 || ts[0].Name != "coded" || !ts[0].Declared || ts[1].Name != "managed" || ts[1].Declared || ts[1].Input != m.Input {
		t.Fatalf("list: %+v, %v", ts, err)
	}
	// Replaced: the putting process uses the new filter at once.
	m.Filter = `event.data.msg != "two"`
	if _, err := c1.PutTrigger(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.SendEvent(ctx, "ping", map[string]any{"msg": "two"}, &heph.SendEventOptions{ID: "p2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.DispatchTriggers(ctx); err != nil {
		t.Fatal(err)
	}
	if fs, err := c1.EventFirings(ctx, "p2"); err != nil || len(fs) != 1 || fs[0].Status != heph.FiringSkipped {
		t.Fatalf("firings of p2: %+v, %v", fs, err)
	}
	if err := c1.DeleteTrigger(ctx, "managed"); err != nil {
		t.Fatal(err)
	}
	if err := c1.DeleteTrigger(ctx, "managed"); !errors.Is(err, heph.ErrTriggerNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := c1.GetTrigger(ctx, "managed"); !errors.Is(err, heph.ErrTriggerNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := c1.SendEvent(ctx, "ping", map[string]any{"msg": "three"}, &heph.SendEventOptions{ID: "p3"}); err != nil {
		t.Fatal(err)
	}
	if fs, err := c1.EventFirings(ctx, "p3"); err != nil || len(fs) != 0 {
		t.Fatalf("firings after the delete: %+v, %v", fs, err)
	}
}

// Trigger keys: the business key makes one active run per key (a second
// event with the key while the run waits ends skipped, saying why; after
// the run ends, the key is free again), for a flow and a workflow; the
// concurrency key is stored on the run.
func TestTriggerKeys(t *testing.T) {
	clk := clock.NewFake(time.Date(2032, 3, 1, 0, 0, 0, 0, time.UTC))
	c := docClient(t, filepath.Join(t.TempDir(), "keys.db"), clk)
	ctx := t.Context()
	b := flow.New("invoice").BusinessKey("invoice", flow.ScopeActive)
	flow.EventStep(b, "wait", func(ctx context.Context, in any) (flow.Result[any], error) { return flow.Wait[any](), nil }, flow.Events("paid"), flow.Waits(0))
	keyed := b.Start("wait").Edge("wait", "paid", flow.Done).MustBuild()
	if err := c.Register(keyed); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWorkflows(echoWorkflow); err != nil {
		t.Fatal(err)
	}
	if err := c.DeclareTriggers(ctx,
		&heph.Trigger{Name: "per-invoice", Event: "invoice.sent", Target: heph.TargetFlow, TargetName: "invoice",
			BusinessKey: "event.data.invoice", ConcurrencyKey: `"tenant-" + event.data.tenant`},
		&heph.Trigger{Name: "wf", Event: "invoice.sent", Target: heph.TargetWorkflow, TargetName: "echo", Input: `"hi"`,
			BusinessKey: `"wf-" + string(int(event.data.invoice))`},
		&heph.Trigger{Name: "bad-key", Event: "invoice.sent", Target: heph.TargetFlow, TargetName: "invoice", BusinessKey: "event.data.tenant == 'x'"},
	); err != nil {
		t.Fatal(err)
	}
	send := func(id string) map[string]*heph.TriggerFiring {
		t.Helper()
		if _, err := c.SendEvent(ctx, "invoice.sent", map[string]any{"invoice": 42, "tenant": "acme"}, &heph.SendEventOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
		// Dispatched here, or by the started client's loop (which may hold
		// a firing's lease while this dispatch finds none).
		for {
			if _, err := c.DispatchTriggers(ctx); err != nil {
				t.Fatal(err)
			}
			fs, err := c.EventFirings(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]*heph.TriggerFiring{}
			pending := false
			for _, f := range fs {
				out[f.Trigger] = f
				pending = pending || f.Status == heph.FiringPending
			}
			if !pending {
				return out
			}
			if ctx.Err() != nil {
				t.Fatalf("event %s: firings stay pending: %+v", id, fs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	first := send("s1")
	if f := first["per-invoice"]; f.Status != heph.FiringStarted {
		t.Fatalf("first per-invoice: %+v", f)
	}
	if f := first["bad-key"]; f.Status != heph.FiringFailed || !strings.Contains(f.Error, "not a string or a number") {
		t.Fatalf("bad-key: %+v", f)
	}
	r, err := c.GetRun(ctx, first["per-invoice"].RunID)
	if err != nil || r.BusinessID != "invoice::42" || r.ConcurrencyKey != "tenant-acme" {
		t.Fatalf("the keyed run: %+v, %v", r, err)
	}
	if w, err := c.GetRun(ctx, first["wf"].RunID); err != nil || w.BusinessID != "id::wf-42" {
		t.Fatalf("the workflow run: %+v, %v", w, err)
	}
	// The flow's run still waits: the same key is taken.
	second := send("s2")
	if f := second["per-invoice"]; f.Status != heph.FiringSkipped || !strings.Contains(f.Error, `business key "42"`) {
		t.Fatalf("second per-invoice: %+v", f)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		err := c.ResumeRun(ctx, r.ID, "paid", nil)
		if err == nil {
			break
		}
		if !errors.Is(err, heph.ErrNotWaiting) || ctx.Err() != nil {
			t.Fatalf("resume: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the step has not run yet
	}
	if _, err := c.WaitRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	// Ended: the key is free, a third event starts a new run.
	if f := send("s3")["per-invoice"]; f.Status != heph.FiringStarted || f.RunID == r.ID {
		t.Fatalf("third per-invoice: %+v", f)
	}
}
