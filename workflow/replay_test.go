package workflow_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var (
	stepA = workflow.NewActivity("step_a", func(ctx context.Context, in string) (string, error) { return "a(" + in + ")", nil })
	stepB = workflow.NewActivity("step_b", func(ctx context.Context, in string) (string, error) { return "b(" + in + ")", nil })
	stepC = workflow.NewActivity("step_c", func(ctx context.Context, in string) (string, error) { return "c(" + in + ")", nil })
)

// record runs a workflow in a sim until it waits or ends and returns its
// history.
func record(t *testing.T, w registered, drive func(e *env, r *replay.SimRun)) []replay.Event {
	t.Helper()
	e := newEnv(t, modes[0], wfs(w), stepA, stepB, stepC)
	r := e.start(w, "in")
	drive(e, r)
	return r.History()
}

// resume loads a history into a sim running the workflow w (registered
// under the history's workflow name).
func resume(t *testing.T, m mode, w registered, history []replay.Event) (*env, *replay.SimRun, error) {
	t.Helper()
	e := newEnv(t, m, wfs(w), stepA, stepB, stepC)
	r, err := e.sim.Resume(history)
	return e, r, err
}

// --- Patching -------------------------------------------------------------

// Version 1 of a workflow, and version 2, which changes the first step
// behind a patch.
var (
	pricingV1 = workflow.New("pricing", func(ctx workflow.Context, in string) (string, error) {
		a, err := stepA.Execute(ctx, in)
		if err != nil {
			return "", err
		}
		if _, err := workflow.WaitSignal[struct{}](ctx, "go"); err != nil {
			return "", err
		}
		return stepC.Execute(ctx, a)
	})
	pricingV2 = workflow.New("pricing", func(ctx workflow.Context, in string) (string, error) {
		var a string
		var err error
		if workflow.Patched(ctx, "use-b") {
			a, err = stepB.Execute(ctx, in)
		} else {
			a, err = stepA.Execute(ctx, in)
		}
		if err != nil {
			return "", err
		}
		if _, err := workflow.WaitSignal[struct{}](ctx, "go"); err != nil {
			return "", err
		}
		return stepC.Execute(ctx, a)
	})
	// Version 3: every run of version 1 has ended.
	pricingV3 = workflow.New("pricing", func(ctx workflow.Context, in string) (string, error) {
		workflow.DeprecatePatch(ctx, "use-b")
		a, err := stepB.Execute(ctx, in)
		if err != nil {
			return "", err
		}
		if _, err := workflow.WaitSignal[struct{}](ctx, "go"); err != nil {
			return "", err
		}
		return stepC.Execute(ctx, a)
	})
	// Version 4: the deprecated patch is gone too.
	pricingV4 = workflow.New("pricing", func(ctx workflow.Context, in string) (string, error) {
		a, err := stepB.Execute(ctx, in)
		if err != nil {
			return "", err
		}
		if _, err := workflow.WaitSignal[struct{}](ctx, "go"); err != nil {
			return "", err
		}
		return stepC.Execute(ctx, a)
	})
)

func settled(e *env, r *replay.SimRun) { e.settle() }

func finishPricing(t *testing.T, e *env, r *replay.SimRun, want string) {
	t.Helper()
	e.signal(r, "go", nil)
	e.settle()
	if got := output[string](t, r); got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

func TestPatched(t *testing.T) {
	old := record(t, pricingV1, settled) // a run of version 1, waiting for "go"
	eachMode(t, func(t *testing.T, m mode) {
		// The old run replays with version 2: Patched is false there.
		e, r, err := resume(t, m, pricingV2, old)
		if err != nil {
			t.Fatalf("version 2 does not replay version 1's history: %v", err)
		}
		finishPricing(t, e, r, "c(a(in))")
		if n := countKind(r.History(), hephtype.EventMarker); n != 0 {
			t.Fatalf("the old run got %d markers", n)
		}

		// A new run of version 2 takes the new path and records the patch.
		e2 := newEnv(t, m, wfs(pricingV2), stepA, stepB, stepC)
		nr := e2.start(pricingV2, "in")
		e2.settle()
		markers := find(nr.History(), hephtype.EventMarker)
		if len(markers) != 1 || markers[0].Name != "use-b" || markers[0].Ref != "patch" {
			t.Fatalf("markers %v", markers)
		}
		// Its history replays with version 2 (the marker), version 3
		// (DeprecatePatch consumes it) and version 4 (it is skipped).
		for _, w := range []registered{pricingV2, pricingV3, pricingV4} {
			e, r, err := resume(t, m, w, nr.History())
			if err != nil {
				t.Fatalf("the new run does not replay: %v", err)
			}
			finishPricing(t, e, r, "c(b(in))")
		}
	})
}

func TestDeprecatePatch(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		// A new run of version 3 records a deprecated marker.
		e := newEnv(t, m, wfs(pricingV3), stepA, stepB, stepC)
		r := e.start(pricingV3, "in")
		e.settle()
		markers := find(r.History(), hephtype.EventMarker)
		if len(markers) != 1 || markers[0].Ref != "deprecated" {
			t.Fatalf("markers %v", markers)
		}
		// A history without the marker (written by version 4) replays with
		// version 3: the marker's absence is tolerated.
		h4 := record(t, pricingV4, settled)
		e3, r3, err := resume(t, m, pricingV3, h4)
		if err != nil {
			t.Fatalf("version 3 does not replay a history without the marker: %v", err)
		}
		finishPricing(t, e3, r3, "c(b(in))")
	})
}

// --- Non-determinism -------------------------------------------------------

// callSite is set by the changed workflows to the line of the call that
// issues the diverging command.
var (
	siteMu   sync.Mutex
	callSite = map[string]string{}
)

func here(name string, offset int) {
	_, file, line, _ := runtime.Caller(1)
	siteMu.Lock()                                            //heph:nondeterministic-ok the test records the line of a call; no command depends on it
	callSite[name] = fmt.Sprintf("%s:%d", file, line+offset) // (covered by the line above)
	siteMu.Unlock()                                          //heph:nondeterministic-ok as above
}

var (
	original = workflow.New("orders", func(ctx workflow.Context, in string) (string, error) {
		a, err := stepA.Execute(ctx, in)
		if err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return "", err
		}
		return stepB.Execute(ctx, a)
	})
	otherActivity = workflow.New("orders", func(ctx workflow.Context, in string) (string, error) {
		a, err := stepA.Execute(ctx, in)
		if err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, time.Hour); err != nil {
			return "", err
		}
		here("otherActivity", 1)
		return stepC.Execute(ctx, a)
	})
	noSleep = workflow.New("orders", func(ctx workflow.Context, in string) (string, error) {
		a, err := stepA.Execute(ctx, in)
		if err != nil {
			return "", err
		}
		here("noSleep", 1)
		return stepB.Execute(ctx, a)
	})
	longerSleep = workflow.New("orders", func(ctx workflow.Context, in string) (string, error) {
		a, err := stepA.Execute(ctx, in)
		if err != nil {
			return "", err
		}
		here("longerSleep", 1)
		if err := workflow.Sleep(ctx, 2*time.Hour); err != nil {
			return "", err
		}
		return stepB.Execute(ctx, a)
	})
	waitsInstead = workflow.New("orders", func(ctx workflow.Context, in string) (string, error) {
		a, err := stepA.Execute(ctx, in)
		if err != nil {
			return "", err
		}
		here("waitsInstead", 1)
		if _, err := workflow.WaitSignal[string](ctx, "go"); err != nil {
			return "", err
		}
		return stepB.Execute(ctx, a)
	})
)

func TestNonDeterminism(t *testing.T) {
	history := record(t, original, func(e *env, r *replay.SimRun) { e.drive() })
	if got := decodeAs[string](t, history[len(history)-1].Data); got != "b(a(in))" {
		t.Fatalf("the original run returned %q", got)
	}
	cases := []struct {
		name     string
		w        registered
		recorded string
		command  string
		changed  string // "what: old -> new"
	}{
		{"otherActivity", otherActivity, `step_scheduled #3 "step_b"`, `Execute activity "step_c" (step_scheduled #3)`, `activity name: "step_b" -> "step_c"`},
		{"noSleep", noSleep, `timer_started #2 (1h0m0s)`, `Execute activity "step_b" (step_scheduled #2)`, ``},
		{"longerSleep", longerSleep, `timer_started #2 (1h0m0s)`, `workflow.Sleep or phase timeout of 2h0m0s (timer_started #2)`, `timer duration: 1h0m0s -> 2h0m0s`},
		{"waitsInstead", waitsInstead, `timer_started #2 (1h0m0s)`, ``, ``},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, err := replay.New(&replay.Config{Workflow: wfdef.Of(c.w)})
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			err = in.Replay(history)
			var nde *replay.NonDeterminismError
			if !errors.As(err, &nde) {
				t.Fatalf("replay: %v, want a *NonDeterminismError", err)
			}
			msg := err.Error()
			siteMu.Lock()
			site := callSite[c.name]
			siteMu.Unlock()
			for _, want := range []string{c.recorded, c.command, site, `workflow "orders"`, "workflow.Patched", "hephtest.ReplayHistory"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not mention %q:\n%s", want, msg)
				}
			}
			// One vocabulary: history kinds and workflow API words, not
			// the core's.
			for _, word := range []string{"activation", "schedule activity", "start timer"} {
				if strings.Contains(msg, word) {
					t.Errorf("the error says %q:\n%s", word, msg)
				}
			}
			if nde.Command != c.command || nde.Recorded != c.recorded || nde.CommandAt != site || nde.Hint == "" {
				t.Errorf("error fields: %+v", nde)
			}
			if got := nde.Changed + ": " + nde.Old + " -> " + nde.New; c.changed != "" && got != c.changed || c.changed == "" && nde.Changed != "" {
				t.Errorf("changed %q, want %q", got, c.changed)
			}
			// The history knows where the recorded command was issued:
			// in the original workflow, in this file.
			if !strings.HasPrefix(nde.RecordedAt, "workflow/replay_test.go:") || nde.Entry == 0 || nde.Decision == 0 {
				t.Errorf("recorded at %q, entry %d, decision %d", nde.RecordedAt, nde.Entry, nde.Decision)
			}
			t.Log(msg)
			// The instance is unusable, the history untouched: replay it
			// with the original code.
			if err := in.Replay(nil); !errors.Is(err, nde) {
				t.Errorf("a failed instance returned %v", err)
			}
			fixed, err := replay.New(&replay.Config{Workflow: wfdef.Of(original)})
			if err != nil {
				t.Fatal(err)
			}
			defer fixed.Close()
			if err := fixed.Replay(history); err != nil {
				t.Fatalf("the original code does not replay: %v", err)
			}
			if got := fixed.Snapshot().Status; got != hephtype.StatusCompleted {
				t.Fatalf("replayed status %s", got)
			}
		})
	}
}

// A decision that fails with non-determinism writes nothing; the run
// continues once the code is fixed.
func TestNonDeterminismMidRun(t *testing.T) {
	e := newEnv(t, modes[0], wfs(original), stepA, stepB, stepC)
	r := e.start(original, "in")
	e.settle() // waits on the timer
	h := r.History()
	_, br, err := resume(t, modes[0], noSleep, h)
	var nde *replay.NonDeterminismError
	if !errors.As(err, &nde) {
		t.Fatalf("resume with changed code: %v", err)
	}
	if len(br.History()) != len(h) {
		t.Fatal("the failed replay changed the history")
	}
	good, gr, err := resume(t, modes[0], original, h)
	if err != nil {
		t.Fatal(err)
	}
	good.drive()
	if got := output[string](t, gr); got != "b(a(in))" {
		t.Fatalf("output %q", got)
	}
}

// --- Determinism of time and randomness ------------------------------------

type draws struct {
	Now    time.Time
	Random float64
	UUID   uuid.UUID
}

var drawing = workflow.New("drawing", func(ctx workflow.Context, _ struct{}) ([]draws, error) {
	draw := func() draws {
		return draws{Now: workflow.Now(ctx), Random: workflow.Random(ctx), UUID: workflow.UUID(ctx)}
	}
	first := draw()
	workflow.Publish(ctx, first)
	if err := workflow.Sleep(ctx, 30*24*time.Hour); err != nil {
		return nil, err
	}
	second := draw()
	workflow.Publish(ctx, second)
	return []draws{first, second}, nil
})

func TestNowRandomUUID(t *testing.T) {
	var outs [][]draws
	for _, m := range modes {
		e := newEnv(t, m, wfs(drawing))
		start := e.sim.Now()
		r := e.start(drawing, struct{}{})
		e.drive()
		got := output[[]draws](t, r)
		if !got[0].Now.Equal(start) || !got[1].Now.Equal(start.Add(30*24*time.Hour)) {
			t.Fatalf("%s: now = %v, %v; the 30-day sleep should end at once on the virtual clock", m.name, got[0].Now, got[1].Now)
		}
		if got[0].Random == got[1].Random || got[0].UUID == got[1].UUID || got[0].UUID.Version() != 4 {
			t.Fatalf("%s: draws %+v", m.name, got)
		}
		// A replay of the history sees the same values: the published
		// state, rebuilt by replay, is the last draw.
		snap, err := replay.ReplaySnapshot(wfdef.Of(drawing), r.History())
		if err != nil {
			t.Fatal(err)
		}
		if pub := decodeAs[draws](t, []byte(snap.Published)); pub != got[1] {
			t.Fatalf("%s: replay published %+v, want %+v", m.name, pub, got[1])
		}
		outs = append(outs, got)
	}
	if diff := cmp.Diff(outs[0], outs[1]); diff != "" {
		t.Fatalf("sticky and fresh execution drew differently (-sticky +fresh):\n%s", diff)
	}
}

// --- Logging --------------------------------------------------------------

var chatty = workflow.New("chatty", func(ctx workflow.Context, _ struct{}) (string, error) {
	workflow.Logger(ctx).Info("starting")
	if _, err := stepA.Execute(ctx, "x"); err != nil {
		return "", err
	}
	workflow.Logger(ctx).Info("between")
	if err := workflow.Sleep(ctx, time.Minute); err != nil {
		return "", err
	}
	workflow.Logger(ctx).Info("done", "run", workflow.GetInfo(ctx).RunID)
	return "ok", nil
})

func TestLoggerQuietOnReplay(t *testing.T) {
	var buf bytes.Buffer
	cfg := &replay.SimConfig{
		Workflows:  map[string]replay.Func{chatty.Name(): wfdef.Of(chatty)},
		Activities: map[string]replay.ActivityFunc{stepA.Name(): stepA.Invoke},
		Fresh:      true, // every activation replays the whole history
		Logger:     slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})),
	}
	sim, err := replay.NewSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	r, err := sim.Start(chatty.Name(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Drive(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, r, hephtype.StatusCompleted)
	want := "level=INFO msg=starting workflow=chatty run_id=run-1\n" +
		"level=INFO msg=between workflow=chatty run_id=run-1\n" +
		"level=INFO msg=done workflow=chatty run_id=run-1 run=run-1\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Fatalf("logs (-want +got):\n%s", diff)
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
