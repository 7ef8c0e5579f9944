package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// A step reads the output of any completed ancestor, however many hops
// back, typed through that step's handle (seed 001's context).
func TestContextHoldsEveryAncestor(t *testing.T) {
	b := flow.New("chain")
	a := flow.Step(b, "a", func(ctx context.Context, n int) (int, error) { return n + 1, nil })
	bb := flow.Step(b, "b", func(ctx context.Context, n int) (string, error) { return "b", nil }, flow.DependsOn("a"))
	flow.Step(b, "c", func(ctx context.Context, n int) (string, error) { return "c", nil }, flow.DependsOn("b"))
	flow.Step(b, "d", func(ctx context.Context, n int) (string, error) {
		x, err := a.Output(ctx) // three hops back
		if err != nil {
			return "", err
		}
		y, err := bb.Output(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d%s", x, y), nil
	}, flow.DependsOn("c"))
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), 41)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusCompleted || string(run.Output()) != `{"d":"42b"}` {
		t.Fatalf("run %s %s (%s), want completed with {\"d\":\"42b\"}", run.Status(), run.Output(), run.Err())
	}
	if run.Calls["d"] != 1 {
		t.Errorf("d ran %d times, want 1", run.Calls["d"])
	}
}

// Reading a step that does not lead to the reader fails at once (no
// retry), naming both steps.
func TestContextNotAncestorFailsOnce(t *testing.T) {
	b := flow.New("siblings")
	flow.Step(b, "root", func(ctx context.Context, n int) (int, error) { return n, nil })
	left := flow.Step(b, "left", func(ctx context.Context, n int) (int, error) { return 1, nil }, flow.DependsOn("root"))
	flow.Step(b, "right", func(ctx context.Context, n int) (int, error) {
		return left.Output(ctx) // a sibling: never in right's context
	}, flow.DependsOn("root"), flow.Retry(flow.RetryPolicy{MaxAttempts: 3}))
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusFailed {
		t.Fatalf("run %s, want failed", run.Status())
	}
	if run.Calls["right"] != 1 {
		t.Errorf("right ran %d times, want 1: the error is not retried", run.Calls["right"])
	}
	for _, want := range []string{`step "right" reads the output of step "left"`, "not an ancestor"} {
		if !strings.Contains(run.Err(), want) {
			t.Errorf("run error %q does not say %q", run.Err(), want)
		}
	}
}

// Reading an ancestor that was skipped (its branch was not taken) is a
// clear, permanent error the step can test for and handle.
func TestContextSkippedAncestor(t *testing.T) {
	b := flow.New("branch")
	flow.EventStep(b, "decide", func(ctx context.Context, in string) (flow.Result[string], error) {
		return flow.Emit(in, in), nil
	}, flow.Events("left", "right"))
	left := flow.Step(b, "left", func(ctx context.Context, in string) (string, error) { return "L", nil })
	right := flow.Step(b, "right", func(ctx context.Context, in string) (string, error) { return "R", nil })
	var readErr error
	flow.Step(b, "join", func(ctx context.Context, in string) (string, error) {
		l, err := left.Output(ctx)
		if errors.Is(err, flow.ErrSkipped) {
			readErr = err
			l = "-"
		} else if err != nil {
			return "", err
		}
		r, err := right.Output(ctx)
		if errors.Is(err, flow.ErrSkipped) {
			readErr = err
			r = "-"
		} else if err != nil {
			return "", err
		}
		return l + r, nil
	}, flow.DependsOn("left", "right"))
	f := b.Edge("decide", "left", "left").Edge("decide", "right", "right").MustBuild()
	run, err := hephtest.RunFlow(context.Background(), f, "right")
	if err != nil {
		t.Fatal(err)
	}
	if string(run.Output()) != `{"join":"-R"}` {
		t.Fatalf("output %s (%s), want {\"join\":\"-R\"}", run.Output(), run.Err())
	}
	var re *flow.ReadError
	if !errors.As(readErr, &re) || re.Step != "join" || re.Read != "left" || !strings.Contains(readErr.Error(), "skipped") {
		t.Errorf("reading the skipped left: %v, want a *ReadError from join of left", readErr)
	}
}

// A map step's handle reads the array of results, typed []Out, from the
// steps after it, however far.
func TestMapHandleIsTheArray(t *testing.T) {
	b := flow.New("check")
	flow.Step(b, "items", func(ctx context.Context, n int) ([]string, error) {
		return []string{"a", "bb", "ccc"}[:n], nil
	})
	check := flow.Map(b, "check_items", func(ctx context.Context, s string) (string, error) {
		return strings.ToUpper(s), nil
	}, flow.DependsOn("items"))
	count := flow.Map(b, "count", func(ctx context.Context, s string) (int, error) { return len(s), nil },
		flow.DependsOn("check_items"))
	flow.Step(b, "report", func(ctx context.Context, n int) (string, error) { return "", nil }, flow.DependsOn("count"))
	flow.Step(b, "summary", func(ctx context.Context, n int) (string, error) {
		checked, err := check.Output(ctx) // []string, two hops back
		if err != nil {
			return "", err
		}
		lens, err := count.Output(ctx) // []int, two hops back
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %v", strings.Join(checked, ","), lens), nil
	}, flow.DependsOn("report"))
	func(*flow.StepRef[string, []string]) {}(check) // typed end to end: this compiles only if it is
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusCompleted || string(run.Output()) != `{"summary":"A,BB,CCC [1 2 3]"}` {
		t.Fatalf("run %s %s (%s)", run.Status(), run.Output(), run.Err())
	}
}

// A map element reads the outputs of the map step's ancestors.
func TestMapElementReadsAncestors(t *testing.T) {
	b := flow.New("prices")
	rate := flow.Step(b, "rate", func(ctx context.Context, in []int) (int, error) { return 10, nil })
	flow.Step(b, "pass", func(ctx context.Context, in []int) ([]int, error) { return in, nil }, flow.DependsOn("rate"))
	flow.Map(b, "scale", func(ctx context.Context, x int) (int, error) {
		r, err := rate.Output(ctx)
		return x * r, err
	}, flow.DependsOn("pass"))
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if string(run.Output()) != `{"scale":[10,20]}` {
		t.Fatalf("output %s (%s)", run.Output(), run.Err())
	}
}

// Reads declares what a step reads: Build rejects a step that is not an
// ancestor, and at run time the context holds only the declared outputs.
func TestReads(t *testing.T) {
	nop := func(ctx context.Context, n int) (int, error) { return n, nil }
	t.Run("build errors", func(t *testing.T) {
		b := flow.New("bad")
		flow.Step(b, "root", nop)
		flow.Step(b, "left", nop, flow.DependsOn("root"))
		flow.Step(b, "right", nop, flow.DependsOn("root"), flow.Reads("root", "left", "rigth", "right"))
		_, err := b.Build()
		errs := flow.ValidationErrors(err)
		got := map[flow.Rule][]string{}
		for _, e := range errs {
			got[e.Rule] = append(got[e.Rule], e.Message)
		}
		if len(errs) != 3 || len(got[flow.RuleNotAncestor]) != 2 || len(got[flow.RuleUnknownStep]) != 1 {
			t.Fatalf("errors: %v, want two not-ancestor (left, right itself) and one unknown step", err)
		}
		for _, want := range []string{`step "right" reads the output of step "left", which is not an ancestor of "right"`, `step "right" reads "rigth", which is not a step of the flow (did you mean "right"?)`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("errors %v do not say %q", err, want)
			}
		}
		if _, err := flow.New("d").Defaults(flow.Reads("x")).Build(); err == nil || !strings.Contains(err.Error(), "Reads belong") {
			t.Errorf("Reads in Defaults: %v", err)
		}
	})
	t.Run("run", func(t *testing.T) {
		b := flow.New("reads")
		a := flow.Step(b, "a", nop)
		bb := flow.Step(b, "b", nop, flow.DependsOn("a"))
		flow.Step(b, "c", func(ctx context.Context, n int) (int, error) {
			x, err := a.Output(ctx)
			if err != nil {
				return 0, err
			}
			_, err = bb.Output(ctx) // not declared
			return x, err
		}, flow.DependsOn("b"), flow.Reads("a"))
		f := b.MustBuild()
		if s, _ := f.Step("c"); len(s.Reads) != 1 || s.Reads[0] != "a" {
			t.Errorf("StepSpec.Reads = %v", s.Reads)
		}
		run, err := hephtest.RunFlow(context.Background(), f, 5)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status() != hephtype.StatusFailed || run.Calls["c"] != 1 || !strings.Contains(run.Err(), `step "c" reads the output of step "b", which is not among the steps it declares with flow.Reads`) {
			t.Errorf("run %s after %d calls: %s", run.Status(), run.Calls["c"], run.Err())
		}
	})
}

// Reading a key no step has, or the run input through Output, is a
// permanent error that says what to do.
func TestOutputBadKeys(t *testing.T) {
	b := flow.New("keys")
	flow.Step(b, "a", func(ctx context.Context, n int) (int, error) {
		_, err1 := flow.Output[int](ctx, "nope")
		_, err2 := flow.Output[int](ctx, "input")
		if !errors.Is(err1, flow.ErrUnknownKey) || !strings.Contains(err1.Error(), `step "a" reads the output of "nope"`) {
			return 0, fmt.Errorf("unknown key: %v", err1)
		}
		if err2 == nil || !strings.Contains(err2.Error(), "flow.RunInput") {
			return 0, fmt.Errorf("input key: %v", err2)
		}
		return 0, nil
	})
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusCompleted {
		t.Fatal(run.Err())
	}
}

// Over names any ancestor as a map step's source, not only a direct
// dependency; a step that does not lead to the map step is a build error.
func TestMapOverAncestor(t *testing.T) {
	b := flow.New("over")
	flow.Step(b, "list", func(ctx context.Context, n int) ([]int, error) { return []int{n, n + 1}, nil })
	flow.Step(b, "log", func(ctx context.Context, n int) (string, error) { return "logged", nil }, flow.DependsOn("list"))
	flow.Map(b, "double", func(ctx context.Context, x int) (int, error) { return 2 * x, nil },
		flow.DependsOn("log"), flow.Over("list", ""))
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), 4)
	if err != nil {
		t.Fatal(err)
	}
	if string(run.Output()) != `{"double":[8,10]}` {
		t.Fatalf("output %s (%s)", run.Output(), run.Err())
	}

	bad := flow.New("over")
	flow.Step(bad, "list", func(ctx context.Context, n int) ([]int, error) { return nil, nil })
	flow.Step(bad, "other", func(ctx context.Context, n int) (int, error) { return 0, nil })
	flow.Map(bad, "double", func(ctx context.Context, x int) (int, error) { return x, nil },
		flow.DependsOn("other"), flow.Over("list", ""))
	_, err = bad.Build()
	if errs := flow.ValidationErrors(err); len(errs) != 1 || errs[0].Rule != flow.RuleMapSource || !strings.Contains(err.Error(), `map step "double" iterates over "list", which does not lead to it`) {
		t.Errorf("map over a step that does not lead to it: %v", err)
	}
}
