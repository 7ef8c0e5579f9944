package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
)

// The property test generates random workflow programs made of
// activities, sleeps, signal waits, publishes, random draws, failures and
// nested parallel blocks, and runs each to completion in a Sim, choosing
// at random which activity completes, which timer fires and when signals
// arrive, and how many of these reach one activation together. Then:
//
//   - the output is what the program computes, whatever the schedule;
//   - every decision of the history is reproduced exactly by a fresh
//     instance fed the history before it (replaying any prefix yields the
//     same commands);
//   - the sticky instance agrees with a fresh replay after every
//     activation (the Sim verifies it), and an instance fed the history
//     one transaction at a time ends in the same state as one fed it all
//     at once.

type opKind int

const (
	opActivity opKind = iota
	opSleep
	opWait
	opPublish
	opRandom
	opFail
	opParallel
)

type op struct {
	kind     opKind
	name     string // activity or signal
	d        time.Duration
	branches [][]op
}

func genOps(t *rapid.T, depth int, label string) []op {
	n := rapid.IntRange(1, 5).Draw(t, label+"len")
	ops := make([]op, n)
	for i := range ops {
		l := label + strconv.Itoa(i)
		max := int(opParallel)
		if depth >= 2 {
			max = int(opFail)
		}
		k := opKind(rapid.IntRange(0, max).Draw(t, l+"kind"))
		o := op{kind: k}
		switch k {
		case opActivity:
			o.name = rapid.SampledFrom([]string{"a", "b", "c", "bad"}).Draw(t, l+"act")
		case opSleep:
			o.d = time.Duration(rapid.IntRange(1, 3).Draw(t, l+"d")) * time.Hour
		case opWait:
			o.name = rapid.SampledFrom([]string{"x", "y"}).Draw(t, l+"sig")
		case opFail:
			if rapid.IntRange(0, 3).Draw(t, l+"failp") != 0 {
				o.kind = opPublish // keep failures rare
			}
		case opParallel:
			nb := rapid.IntRange(1, 3).Draw(t, l+"nb")
			for b := range nb {
				o.branches = append(o.branches, genOps(t, depth+1, l+"."+strconv.Itoa(b)+"."))
			}
		}
		ops[i] = o
	}
	return ops
}

// run interprets a program in workflow code.
func run(u *replay.Unit, ops []op, path string) (string, error) {
	var trace []string
	for i, o := range ops {
		p := path + "." + strconv.Itoa(i)
		switch o.kind {
		case opActivity:
			out, err := u.ExecuteActivity(o.name, json.RawMessage(strconv.Quote(p)), replay.ActivityOptions{RetryPolicy: flow.RetryPolicy{MaxAttempts: 2}})
			if err != nil {
				trace = append(trace, "err("+o.name+")")
			} else {
				trace = append(trace, string(out))
			}
		case opSleep:
			if err := u.Sleep(o.d); err != nil {
				return "", err
			}
			trace = append(trace, "slept")
		case opWait:
			payload, err := u.WaitSignal(o.name)
			if err != nil {
				return "", err
			}
			trace = append(trace, "sig:"+string(payload))
		case opPublish:
			u.Publish(json.RawMessage(strconv.Quote(strings.Join(trace, ","))))
		case opRandom:
			_ = u.Random()
			trace = append(trace, "rand")
		case opFail:
			return "", errors.New("failed at " + p)
		case opParallel:
			fns := make([]func(*replay.Unit) (any, error), len(o.branches))
			for b, br := range o.branches {
				fns[b] = func(u *replay.Unit) (any, error) { return run(u, br, p+"."+strconv.Itoa(b)) }
			}
			var parts []string
			for _, r := range u.Parallel(fns) {
				if r.Err != nil {
					parts = append(parts, "E["+r.Err.Error()+"]")
				} else {
					parts = append(parts, "["+r.Value.(string)+"]")
				}
			}
			trace = append(trace, "par("+strings.Join(parts, "|")+")")
		}
	}
	return strings.Join(trace, ","), nil
}

// expect computes what run returns, without any scheduler.
func expect(ops []op, path string) (string, error) {
	var trace []string
	for i, o := range ops {
		p := path + "." + strconv.Itoa(i)
		switch o.kind {
		case opActivity:
			if o.name == "bad" {
				trace = append(trace, "err(bad)")
			} else {
				trace = append(trace, strconv.Quote(o.name+"("+p+")"))
			}
		case opSleep:
			trace = append(trace, "slept")
		case opWait:
			trace = append(trace, "sig:"+strconv.Quote(o.name))
		case opRandom:
			trace = append(trace, "rand")
		case opFail:
			return "", errors.New("failed at " + p)
		case opParallel:
			var parts []string
			for b, br := range o.branches {
				v, err := expect(br, p+"."+strconv.Itoa(b))
				if err != nil {
					parts = append(parts, "E["+err.Error()+"]")
				} else {
					parts = append(parts, "["+v+"]")
				}
			}
			trace = append(trace, "par("+strings.Join(parts, "|")+")")
		}
	}
	return strings.Join(trace, ","), nil
}

func countWaits(ops []op, into map[string]int) {
	for _, o := range ops {
		if o.kind == opWait {
			into[o.name]++
		}
		for _, b := range o.branches {
			countWaits(b, into)
		}
	}
}

func activity(name string) replay.ActivityFunc {
	return func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		if name == "bad" {
			return nil, errors.New("bad activity")
		}
		var p string
		if err := json.Unmarshal(in, &p); err != nil {
			return nil, err
		}
		return json.RawMessage(strconv.Quote(name + "(" + p + ")")), nil
	}
}

func TestPropertyReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ops := genOps(t, 0, "")
		fn := func(u *replay.Unit, input json.RawMessage) (json.RawMessage, error) {
			out, err := run(u, ops, "main")
			if err != nil {
				return nil, err
			}
			return json.Marshal(out)
		}
		acts := map[string]replay.ActivityFunc{}
		for _, n := range []string{"a", "b", "c", "bad"} {
			acts[n] = activity(n)
		}
		sim, err := replay.NewSim(&replay.SimConfig{Workflows: map[string]replay.Func{"prog": fn}, Activities: acts, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer sim.Close()
		ctx := context.Background()
		r, err := sim.Start("prog", nil)
		if err != nil {
			t.Fatal(err)
		}
		signals := map[string]int{}
		countWaits(ops, signals)
		names := []string{"x", "y"}

		for step := 0; !r.Status().Terminal(); step++ {
			if step > 1000 {
				t.Fatalf("the run did not end; pending %v", sim.Pending())
			}
			hold := rapid.Bool().Draw(t, "hold")
			if hold {
				r.Hold()
			}
			n := rapid.IntRange(1, 3).Draw(t, "batch")
			for range n {
				if r.Status().Terminal() {
					break
				}
				actions := sim.Pending()
				var sendable []string
				for _, s := range names {
					if signals[s] > 0 {
						sendable = append(sendable, s)
					}
				}
				choices := len(actions) + len(sendable)
				if choices == 0 {
					break
				}
				c := rapid.IntRange(0, choices-1).Draw(t, "choice")
				if c < len(actions) {
					err = sim.Do(ctx, actions[c])
				} else {
					s := sendable[c-len(actions)]
					signals[s]--
					err = r.Signal(s, json.RawMessage(strconv.Quote(s)))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Release(); err != nil {
				t.Fatal(err)
			}
			if !hold && len(sim.Pending()) == 0 && signals["x"]+signals["y"] == 0 && !r.Status().Terminal() {
				t.Fatalf("the run is stuck: %s", r.Status())
			}
		}

		// The output does not depend on the schedule.
		want, werr := expect(ops, "main")
		switch {
		case werr != nil:
			if r.Status() != hephtype.StatusFailed || r.Err() != werr.Error() {
				t.Fatalf("run %s (%s), want failed with %q", r.Status(), r.Err(), werr)
			}
		case r.Status() != hephtype.StatusCompleted:
			t.Fatalf("run %s (%s), want completed", r.Status(), r.Err())
		default:
			var got string
			if err := json.Unmarshal(r.Output(), &got); err != nil || got != want {
				t.Fatalf("output %s, want %q", r.Output(), want)
			}
		}

		h := r.History()
		checkPrefixes(t, fn, h)
		checkChunks(t, fn, h)
	})
}

// checkPrefixes replays every prefix of the history that ends before a
// decision in a fresh instance and checks that it decides exactly what
// the history recorded.
func checkPrefixes(t *rapid.T, fn replay.Func, h []replay.Event) {
	for k, e := range h {
		at, ok := replay.DecisionTime(e)
		if !ok {
			continue
		}
		in, err := replay.New(&replay.Config{Workflow: fn})
		if err != nil {
			t.Fatal(err)
		}
		dec, err := in.Decide(&replay.Activation{Events: h[:k], Time: at})
		in.Close()
		if err != nil {
			t.Fatalf("deciding after %d events: %v", k, err)
		}
		end := k + 1
		for end < len(h) && isCommand(h[end].Kind) {
			end++
		}
		if diff := cmp.Diff(h[k:end], dec.History); diff != "" {
			t.Fatalf("decision after %d events (-recorded +replayed):\n%s", k, diff)
		}
	}
}

func isCommand(k hephtype.EventKind) bool {
	switch k {
	case hephtype.EventStepScheduled, hephtype.EventTimerStarted, hephtype.EventTimerCancelled,
		hephtype.EventMarker, hephtype.EventUpdateAccepted, hephtype.EventUpdateDone,
		hephtype.EventChildStarted, replay.EventChildCancelled,
		hephtype.EventRunCompleted, hephtype.EventRunFailed, hephtype.EventRunContinued:
		return true
	}
	return false
}

// checkChunks feeds the history to an instance one transaction at a time
// (each event the runtime wrote alone, each decision with its commands)
// and compares its state with an instance fed everything at once.
func checkChunks(t *rapid.T, fn replay.Func, h []replay.Event) {
	whole, err := replay.ReplaySnapshot(fn, h)
	if err != nil {
		t.Fatalf("replaying the whole history: %v", err)
	}
	in, err := replay.New(&replay.Config{Workflow: fn})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for i := 0; i < len(h); {
		j := i + 1
		if h[i].Kind == replay.EventDecision {
			for j < len(h) && isCommand(h[j].Kind) {
				j++
			}
		}
		if err := in.Replay(h[i:j]); err != nil {
			t.Fatalf("replaying events %d to %d: %v", i, j, err)
		}
		i = j
	}
	if diff := cmp.Diff(whole, in.Snapshot()); diff != "" {
		t.Fatalf("chunked replay differs from a whole one (-whole +chunked):\n%s", diff)
	}
}

// Check the test's own premise: different schedules of one program give
// different histories (so the property covers interleavings).
func TestPropertyHistoriesDiffer(t *testing.T) {
	ops := []op{{kind: opParallel, branches: [][]op{{{kind: opActivity, name: "a"}}, {{kind: opSleep, d: time.Hour}}, {{kind: opWait, name: "x"}}}}}
	fn := func(u *replay.Unit, _ json.RawMessage) (json.RawMessage, error) {
		out, err := run(u, ops, "main")
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
	histories := map[string]bool{}
	for order := range 3 {
		sim, err := replay.NewSim(&replay.SimConfig{Workflows: map[string]replay.Func{"p": fn}, Activities: map[string]replay.ActivityFunc{"a": activity("a")}, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		r, err := sim.Start("p", nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			switch (i + order) % 3 {
			case 0:
				err = r.Signal("x", json.RawMessage(`"x"`))
			default:
				if p := sim.Pending(); len(p) > 0 {
					err = sim.Do(context.Background(), p[0])
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if r.Status() != hephtype.StatusCompleted {
			t.Fatalf("order %d: %s", order, r.Status())
		}
		histories[fmt.Sprint(r.History())] = true
		sim.Close()
	}
	if len(histories) < 2 {
		t.Fatal("every schedule gave the same history")
	}
}
