package hephaestus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
)

// groupFlow takes any input: a batch's run gets a list.
var groupFlow = func() *flow.Flow {
	b := flow.New("grouped")
	flow.Step(b, "take", func(ctx context.Context, in any) (any, error) { return in, nil })
	return b.MustBuild()
}()

// groupClient opens a client (not started: the tests dispatch) on a
// fresh store of a backend, with the fake clock and groupFlow.
func groupClient(t *testing.T, open func(t *testing.T) func() store.Store, clk clock.Clock) *heph.Client {
	t.Helper()
	st := open(t)()
	c, err := heph.New(&heph.Config{Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	if err := c.Register(groupFlow); err != nil {
		t.Fatal(err)
	}
	return c
}

// groupRuns dispatches and returns the inputs (compact JSON) of the runs
// of groupFlow started so far, sorted.
func groupRuns(t *testing.T, c *heph.Client) []string {
	t.Helper()
	ctx := t.Context()
	if _, err := c.DispatchTriggers(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := c.ListRuns(ctx, &heph.ListOptions{Flow: "grouped", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range page.Runs {
		var v any
		if err := json.Unmarshal(r.Input, &v); err != nil {
			t.Fatalf("run %s input %s: %v", r.ID, r.Input, err)
		}
		b, _ := json.Marshal(v)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// wantGroupList checks the groups of "deb" that ListTriggerGroups lists
// with opts, as "key:events:status".
func wantGroupList(t *testing.T, c *heph.Client, opts *heph.ListTriggerGroupsOptions, want ...string) {
	t.Helper()
	page, err := c.ListTriggerGroups(t.Context(), "deb", opts)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(page.Groups))
	for i, g := range page.Groups {
		got[i] = fmt.Sprintf("%s:%d:%s", g.Key, len(g.Events), g.Status)
		if g.Status == heph.GroupStarted && (g.RunID == "" || g.EndedAt == nil) {
			t.Errorf("started group %+v without its run or end", g)
		}
	}
	if !slices.Equal(got, want) || page.Next != 0 {
		t.Fatalf("groups %q (next %d), want %q", got, page.Next, want)
	}
}

func sendAll(t *testing.T, c *heph.Client, name string, data ...map[string]any) {
	t.Helper()
	for _, d := range data {
		if _, err := c.SendEvent(t.Context(), name, d, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func wantRuns(t *testing.T, c *heph.Client, when string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := groupRuns(t, c); !slices.Equal(got, want) {
		t.Fatalf("%s: runs with inputs %q, want %q", when, got, want)
	}
}

// Debounce 30s per document: events at t, t+10s and t+20s start nothing
// until t+50s, then one run with the last event's input; another key's
// events make their own run.
func TestTriggerDebounce(t *testing.T) {
	t.Parallel()
	for name, open := range webhookBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Date(2032, 3, 1, 0, 0, 0, 0, time.UTC))
			c := groupClient(t, open, clk)
			if err := c.DeclareTriggers(t.Context(), &heph.Trigger{Name: "deb", Event: "typed", Target: heph.TargetFlow, TargetName: "grouped",
				Input: "event.data.text", Key: "event.data.doc", Debounce: 30 * time.Second}); err != nil {
				t.Fatal(err)
			}
			sendAll(t, c, "typed", map[string]any{"doc": "a", "text": "a1"})
			wantRuns(t, c, "t")
			clk.Advance(10 * time.Second)
			sendAll(t, c, "typed", map[string]any{"doc": "a", "text": "a2"})
			wantRuns(t, c, "t+10s")
			clk.Advance(10 * time.Second)
			sendAll(t, c, "typed", map[string]any{"doc": "a", "text": "a3"}, map[string]any{"doc": "b", "text": "b1"})
			wantRuns(t, c, "t+20s")
			wantGroupList(t, c, &heph.ListTriggerGroupsOptions{Status: heph.GroupOpen}, "a:3:open", "b:1:open")
			clk.Advance(29 * time.Second)
			wantRuns(t, c, "t+49s")
			clk.Advance(time.Second)
			wantRuns(t, c, "t+50s", `"a3"`, `"b1"`)
			// Quiet since: a later event opens a new group.
			sendAll(t, c, "typed", map[string]any{"doc": "a", "text": "a4"})
			clk.Advance(30 * time.Second)
			wantRuns(t, c, "t+80s", `"a3"`, `"a4"`, `"b1"`)
			wantGroupList(t, c, nil, "a:3:started", "b:1:started", "a:1:started")
			wantGroupList(t, c, &heph.ListTriggerGroupsOptions{Status: heph.GroupOpen})
			first, err := c.ListTriggerGroups(t.Context(), "deb", &heph.ListTriggerGroupsOptions{Limit: 2})
			if err != nil || len(first.Groups) != 2 || first.Next != first.Groups[1].ID {
				t.Fatalf("a page of 2: %+v, %v", first, err)
			}
			wantGroupList(t, c, &heph.ListTriggerGroupsOptions{After: first.Next}, "a:1:started")
			if _, err := c.ListTriggerGroups(t.Context(), "nope", nil); !errors.Is(err, heph.ErrTriggerNotFound) {
				t.Errorf("groups of an unknown trigger: %v, want ErrTriggerNotFound", err)
			}
			if _, err := c.ListTriggerGroups(t.Context(), "deb", &heph.ListTriggerGroupsOptions{Status: "done"}); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), "status") {
				t.Errorf("groups of a bad status: %v, want ErrInvalidInput naming the status", err)
			}
			fs, err := c.ListEvents(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range fs {
				f, err := c.EventFirings(t.Context(), e.ID)
				if err != nil || len(f) != 1 || f[0].Status != heph.FiringGrouped {
					t.Fatalf("firings of %s: %+v, %v", e.ID, f, err)
				}
			}
		})
	}
}

// Throttle 2 per minute: 5 events start 2 runs now, 2 the next minute and
// 1 the minute after; none is dropped.
func TestTriggerThrottle(t *testing.T) {
	t.Parallel()
	for name, open := range webhookBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Date(2032, 3, 1, 0, 0, 15, 0, time.UTC))
			c := groupClient(t, open, clk)
			if err := c.DeclareTriggers(t.Context(), &heph.Trigger{Name: "thr", Event: "ping", Target: heph.TargetFlow, TargetName: "grouped",
				Input: "event.data.n", Throttle: &heph.Throttle{Limit: 2, Period: time.Minute}}); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				sendAll(t, c, "ping", map[string]any{"n": i + 1})
			}
			wantRuns(t, c, "now", "1", "2")
			clk.Advance(44 * time.Second) // 00:00:59
			wantRuns(t, c, "00:00:59", "1", "2")
			clk.Advance(time.Second)
			wantRuns(t, c, "00:01:00", "1", "2", "3", "4")
			clk.Advance(time.Minute)
			wantRuns(t, c, "00:02:00", "1", "2", "3", "4", "5")
			clk.Advance(time.Hour)
			wantRuns(t, c, "later", "1", "2", "3", "4", "5")
		})
	}
}

// Batch of 3 within a minute: 7 events start two runs of 3 at once and
// one of 1 when the window ends; the inputs are the lists in event order.
func TestTriggerBatch(t *testing.T) {
	t.Parallel()
	for name, open := range webhookBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Date(2032, 3, 1, 0, 0, 0, 0, time.UTC))
			c := groupClient(t, open, clk)
			ctx := t.Context()
			for _, bad := range []struct {
				t    *heph.Trigger
				want string
			}{
				{&heph.Trigger{Debounce: time.Second, Batch: &heph.Batch{Size: 2, Window: time.Second}}, "at most one of them"},
				{&heph.Trigger{Batch: &heph.Batch{Size: 1001, Window: time.Second}}, "batch size 1001"},
				{&heph.Trigger{Batch: &heph.Batch{Size: 2}}, "batch window 0s"},
				{&heph.Trigger{Throttle: &heph.Throttle{Period: time.Second}}, "throttle limit 0"},
				{&heph.Trigger{Debounce: -time.Second}, "debounce -1s"},
				{&heph.Trigger{Key: "event.data.k"}, "key is set without"},
				{&heph.Trigger{Key: "event.data.", Debounce: time.Second}, `key "event.data."`},
			} {
				bad.t.Name, bad.t.Event, bad.t.Target, bad.t.TargetName = "bad", "e", heph.TargetFlow, "grouped"
				if err := c.DeclareTriggers(ctx, bad.t); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), bad.want) {
					t.Errorf("declare %+v: %v, want ErrInvalidInput naming %q", bad.t, err, bad.want)
				}
			}
			if err := c.DeclareTriggers(ctx, &heph.Trigger{Name: "bat", Event: "item", Target: heph.TargetFlow, TargetName: "grouped",
				Input: "event.data.n", Batch: &heph.Batch{Size: 3, Window: time.Minute}}); err != nil {
				t.Fatal(err)
			}
			for i := range 7 {
				sendAll(t, c, "item", map[string]any{"n": i + 1})
			}
			wantRuns(t, c, "now", "[1,2,3]", "[4,5,6]")
			clk.Advance(59 * time.Second)
			wantRuns(t, c, "+59s", "[1,2,3]", "[4,5,6]")
			clk.Advance(time.Second)
			wantRuns(t, c, "+1m", "[1,2,3]", "[4,5,6]", "[7]")
			st, err := c.GetTrigger(ctx, "bat")
			if err != nil || st.Batch == nil || *st.Batch != (heph.Batch{Size: 3, Window: time.Minute}) || st.Throttle != nil || st.Debounce != 0 {
				t.Fatalf("the stored trigger: %+v, %v", st, err)
			}
		})
	}
}
