package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

func nop(ctx context.Context, in any) (any, error) { return nil, nil }

func task(b *flow.Builder, name string, opts ...flow.StepOption) *flow.StepRef[any, any] {
	return flow.Step(b, name, nop, opts...)
}

func events(b *flow.Builder, name string, evs ...string) {
	flow.EventStep(b, name, func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Emit[any](evs[0], nil), nil
	}, flow.Events(evs...))
}

func mapOf(b *flow.Builder, name string, opts ...flow.StepOption) {
	flow.Map(b, name, func(ctx context.Context, item any) (any, error) { return item, nil }, opts...)
}

func source[Out any](b *flow.Builder, name string, opts ...flow.StepOption) {
	flow.Step(b, name, func(ctx context.Context, in any) (Out, error) { var z Out; return z, nil }, opts...)
}

type ruleCase struct {
	name  string
	rule  flow.Rule
	build func() *flow.Builder
	// want are substrings of the message: the names at fault and a hint
	// on how to fix the problem.
	want []string
	// steps must all be in ValidationError.Steps.
	steps []string
}

var ruleCases = []ruleCase{
	{
		name: "no steps", rule: flow.RuleNoSteps,
		build: func() *flow.Builder { return flow.New("empty") },
		want:  []string{"no steps", "add one with flow.Step"},
	},
	{
		name: "invalid step name", rule: flow.RuleInvalidName,
		build: func() *flow.Builder { b := flow.New("f"); task(b, "9lives"); return b },
		want:  []string{`"9lives"`, "start with a letter"}, steps: []string{"9lives"},
	},
	{
		name: "reserved step name", rule: flow.RuleInvalidName,
		build: func() *flow.Builder { b := flow.New("f"); task(b, "input"); return b },
		want:  []string{`"input"`, "reserved", "choose another name"}, steps: []string{"input"},
	},
	{
		name: "invalid flow name", rule: flow.RuleInvalidName,
		build: func() *flow.Builder { b := flow.New("my flow"); task(b, "a"); return b },
		want:  []string{`"my flow"`, "start with a letter"},
	},
	{
		name: "bad retry policy", rule: flow.RuleInvalidOption,
		build: func() *flow.Builder {
			b := flow.New("f")
			task(b, "a", flow.Retry(flow.RetryPolicy{MaxAttempts: -1}))
			return b
		},
		want: []string{`"a"`, "MaxAttempts is -1", "must be at least 1"}, steps: []string{"a"},
	},
	{
		name: "bad timeout", rule: flow.RuleInvalidOption,
		build: func() *flow.Builder { b := flow.New("f"); task(b, "a", flow.Timeout(-time.Second)); return b },
		want:  []string{`"a"`, "Timeout is -1s", "must be positive"}, steps: []string{"a"},
	},
	{
		name: "Defaults with DependsOn", rule: flow.RuleInvalidOption,
		build: func() *flow.Builder {
			b := flow.New("f").Defaults(flow.DependsOn("a"))
			task(b, "a")
			return b
		},
		want: []string{"Defaults accepts only Retry, Timeout, Queue and Priority", "DependsOn", "belong to single steps"},
	},
	{
		name: "Waits on a map step", rule: flow.RuleInvalidOption,
		build: func() *flow.Builder { b := flow.New("f"); mapOf(b, "m", flow.Waits(0)); return b },
		want:  []string{`"m"`, "cannot wait", "make the waiting step a plain step after it"}, steps: []string{"m"},
	},
	{
		name: "Over on a non-map step", rule: flow.RuleInvalidOption,
		build: func() *flow.Builder { b := flow.New("f"); task(b, "a", flow.Over("", "items")); return b },
		want:  []string{`"a"`, "Over applies only to map steps", "drop the option"}, steps: []string{"a"},
	},
	{
		name: "nil step function", rule: flow.RuleInvalidOption,
		build: func() *flow.Builder { b := flow.New("f"); flow.Step[any, any](b, "a", nil); return b },
		want:  []string{`"a"`, "function is nil", "pass the function"}, steps: []string{"a"},
	},
	{
		name: "duplicate step", rule: flow.RuleDuplicateStep,
		build: func() *flow.Builder { b := flow.New("f"); task(b, "a"); task(b, "a"); return b },
		want:  []string{`"a"`, "declared twice", "give each step its own name"}, steps: []string{"a"},
	},
	{
		name: "duplicate key", rule: flow.RuleDuplicateKey,
		build: func() *flow.Builder {
			b := flow.New("f")
			task(b, "a", flow.Key("k"))
			task(b, "b", flow.Key("k"), flow.DependsOn("a"))
			return b
		},
		want: []string{`"a"`, `"b"`, `"k"`, "another key with flow.Key"}, steps: []string{"a", "b"},
	},
	{
		name: "edge to a missing step", rule: flow.RuleUnknownStep,
		build: func() *flow.Builder { b := flow.New("f"); task(b, "a"); return b.Edge("a", flow.EventOK, "zzz") },
		want:  []string{`"a"`, `"zzz"`, "declare the step or fix the name"}, steps: []string{"a", "zzz"},
	},
	{
		name: "edge from a missing step", rule: flow.RuleUnknownStep,
		build: func() *flow.Builder { b := flow.New("f"); task(b, "a"); return b.Edge("zzz", flow.EventOK, "a") },
		want:  []string{`"zzz"`, "declare the step or fix the name"}, steps: []string{"zzz"},
	},
	{
		name: "edge to a misspelled step", rule: flow.RuleUnknownStep,
		build: func() *flow.Builder {
			b := flow.New("f")
			task(b, "a")
			task(b, "ship")
			return b.Start("a").Edge("a", flow.EventOK, "shp")
		},
		want: []string{`"a"`, `"shp"`, `did you mean "ship"?`}, steps: []string{"a", "shp"},
	},
	{
		name: "Start names a missing step", rule: flow.RuleUnknownStep,
		build: func() *flow.Builder { b := flow.New("f"); task(b, "a"); return b.Start("zzz") },
		want:  []string{"Start", `"zzz"`, "declare the step or fix the name"}, steps: []string{"zzz"},
	},
	{
		name: "missing dependency", rule: flow.RuleMissingDep,
		build: func() *flow.Builder {
			b := flow.New("f")
			task(b, "charge")
			task(b, "ship", flow.DependsOn("chrage"))
			return b
		},
		want: []string{`"ship"`, `"chrage"`, `did you mean "charge"?`}, steps: []string{"ship", "chrage"},
	},
	{
		name: "undeclared event", rule: flow.RuleUndeclaredEvent,
		build: func() *flow.Builder { b := flow.New("f"); task(b, "a"); return b.Edge("a", "maybe", flow.Done) },
		want:  []string{`"a"`, `"maybe"`, "declare it with flow.Events"}, steps: []string{"a"},
	},
	{
		name: "timeout edge without a wait timeout", rule: flow.RuleUndeclaredEvent,
		build: func() *flow.Builder {
			b := flow.New("f")
			task(b, "a", flow.Waits(0))
			return b.Edge("a", flow.EventOK, flow.Done).Edge("a", flow.EventTimeout, flow.Done)
		},
		want: []string{`"a"`, `"timeout"`, "flow.Waits(d)"}, steps: []string{"a"},
	},
	{
		name: "declared event without an edge", rule: flow.RuleUnroutedEvent,
		build: func() *flow.Builder {
			b := flow.New("f")
			events(b, "a", "yes", "no")
			return b.Edge("a", "yes", flow.Done)
		},
		want: []string{`"a"`, `"no"`, `add Edge("a", "no"`}, steps: []string{"a"},
	},
	{
		name: "implicit ok leaf in a Done-terminated flow", rule: flow.RuleUnroutedEvent,
		build: func() *flow.Builder {
			b := flow.New("f")
			events(b, "a", "x", "y")
			task(b, "b")
			return b.Start("a").Edge("a", "x", flow.Done).Edge("a", "y", "b")
		},
		want: []string{`"b"`, "without reaching Done", `add Edge("b", "ok", flow.Done)`}, steps: []string{"b"},
	},
	{
		name: "start step with an incoming edge", rule: flow.RuleStart,
		build: func() *flow.Builder {
			b := flow.New("f")
			task(b, "a")
			task(b, "b")
			return b.Start("b").Edge("a", flow.EventOK, "b")
		},
		want: []string{`"b"`, "incoming edges", "remove the edges into it or start elsewhere"}, steps: []string{"b"},
	},
	{
		name: "no step without incoming edges", rule: flow.RuleStart,
		build: func() *flow.Builder {
			b := flow.New("f")
			task(b, "a", flow.DependsOn("b"))
			task(b, "b", flow.DependsOn("a"))
			return b
		},
		want: []string{"every step has an incoming edge", "name the first step with Start"},
	},
	{
		name: "cycle", rule: flow.RuleCycle,
		build: func() *flow.Builder {
			b := flow.New("f")
			for _, n := range []string{"s", "a", "b", "c"} {
				task(b, n)
			}
			return b.Start("s").
				Edge("s", flow.EventOK, "a").
				Edge("a", flow.EventOK, "b").
				Edge("b", flow.EventOK, "c").
				Edge("c", flow.EventOK, "a")
		},
		want: []string{"a -> b -> c -> a", "remove one of these edges"}, steps: []string{"a", "b", "c"},
	},
	{
		name: "unreachable", rule: flow.RuleUnreachable,
		build: func() *flow.Builder { b := flow.New("f"); task(b, "a"); task(b, "b"); return b.Start("a") },
		want:  []string{`"b"`, `"a"`, "unreachable", "add an edge or DependsOn that leads to it"}, steps: []string{"b"},
	},
	{
		name: "map over a struct output", rule: flow.RuleMapSource,
		build: func() *flow.Builder {
			b := flow.New("f")
			source[Order](b, "src")
			mapOf(b, "m", flow.DependsOn("src"))
			return b
		},
		want: []string{`"m"`, `"src"`, "flow_test.Order", "not an array", "map over a slice"}, steps: []string{"m"},
	},
	{
		name: "map over a string field", rule: flow.RuleMapSource,
		build: func() *flow.Builder {
			b := flow.New("f")
			source[Order](b, "src")
			mapOf(b, "m", flow.DependsOn("src"), flow.Over("src", "sku"))
			return b
		},
		want: []string{`"m"`, `field "sku"`, `"src"`, "string, not an array", "map over a slice"}, steps: []string{"m"},
	},
	{
		name: "map over []byte", rule: flow.RuleMapSource,
		build: func() *flow.Builder {
			b := flow.New("f")
			source[[]byte](b, "src")
			mapOf(b, "m", flow.DependsOn("src"))
			return b
		},
		want: []string{`"m"`, `"src"`, "[]uint8", "not an array"}, steps: []string{"m"},
	},
	{
		name: "map over a struct run input", rule: flow.RuleMapSource,
		build: func() *flow.Builder { b := flow.New("f"); flow.Input[Order](b); mapOf(b, "m"); return b },
		want:  []string{`"m"`, "the run input", "not an array"}, steps: []string{"m"},
	},
	{
		name: "map over a step that does not lead to it", rule: flow.RuleMapSource,
		build: func() *flow.Builder {
			b := flow.New("f")
			source[[]int](b, "src")
			mapOf(b, "m", flow.Over("src", ""))
			return b.Edge("src", flow.EventOK, flow.Done).Edge("m", flow.EventOK, flow.Done)
		},
		want: []string{`"m"`, `"src"`, `add DependsOn("src")`}, steps: []string{"m", "src"},
	},
	{
		name: "map with several predecessors", rule: flow.RuleMapSource,
		build: func() *flow.Builder {
			b := flow.New("f")
			source[[]int](b, "x")
			source[[]int](b, "y")
			mapOf(b, "m", flow.DependsOn("x", "y"))
			return b
		},
		want: []string{`"m"`, "x, y", "flow.Over"}, steps: []string{"m"},
	},
	{
		name: "fan-out that never converges", rule: flow.RuleNoConvergence,
		build: func() *flow.Builder {
			b := flow.New("f")
			task(b, "a")
			task(b, "b")
			task(b, "c")
			return b.Start("a").
				Edge("a", flow.EventOK, "b", "c").
				Edge("b", flow.EventOK, flow.Done).
				Edge("c", flow.EventOK, flow.Done)
		},
		want: []string{`"a"`, "b, c", "never converges", "add a join step"}, steps: []string{"a", "b", "c"},
	},
	{
		name: "metadata func value", rule: flow.RuleInvalidMetadata,
		build: func() *flow.Builder {
			b := flow.New("f").Metadata(map[string]any{"fn": func() {}})
			task(b, "a")
			return b
		},
		want: []string{`"fn"`, "not a JSON value", "use strings, numbers"},
	},
	{
		name: "metadata channel value", rule: flow.RuleInvalidMetadata,
		build: func() *flow.Builder {
			b := flow.New("f").Metadata(map[string]any{"ch": make(chan int)})
			task(b, "a")
			return b
		},
		want: []string{`"ch"`, "not a JSON value", "use strings, numbers"},
	},
	{
		name: "metadata empty key", rule: flow.RuleInvalidMetadata,
		build: func() *flow.Builder { b := flow.New("f").Metadata(map[string]any{"": 1}); task(b, "a"); return b },
		want:  []string{"empty key", "keys must be non-empty strings"},
	},
	{
		name: "business key with bad characters", rule: flow.RuleInvalidBusinessK,
		build: func() *flow.Builder { b := flow.New("f").BusinessKey("Order-ID", ""); task(b, "a"); return b },
		want:  []string{`"Order-ID"`, "'O' at position 0", "use only lower-case letters"},
	},
	{
		name: "unknown business key scope", rule: flow.RuleInvalidBusinessK,
		build: func() *flow.Builder { b := flow.New("f").BusinessKey("orderid", "sometimes"); task(b, "a"); return b },
		want:  []string{`"sometimes"`, "use flow.ScopeActive, flow.ScopeForever or flow.ScopeNone"},
	},
}

func TestValidationRules(t *testing.T) {
	covered := map[flow.Rule]bool{}
	for _, tc := range ruleCases {
		covered[tc.rule] = true
		t.Run(tc.name, func(t *testing.T) {
			b := tc.build()
			f, err := b.Build()
			if err == nil {
				t.Fatalf("Build succeeded (%v), want a %s error", f.Name(), tc.rule)
			}
			all := flow.ValidationErrors(err)
			var matched []*flow.ValidationError
			for _, ve := range all {
				if ve.Rule == tc.rule {
					matched = append(matched, ve)
				}
			}
			if len(matched) == 0 {
				t.Fatalf("no %s error in:\n%v", tc.rule, err)
			}
			var ve *flow.ValidationError
			for _, m := range matched {
				if containsAll(m.Message, tc.want) {
					ve = m
					break
				}
			}
			if ve == nil {
				t.Fatalf("no %s error mentions all of %q; got:\n%v", tc.rule, tc.want, err)
			}
			for _, s := range tc.steps {
				if !slices.Contains(ve.Steps, s) {
					t.Errorf("Steps = %q, want it to include %q", ve.Steps, s)
				}
			}
			if !strings.Contains(ve.Error(), fmt.Sprintf("flow %q: ", ve.Flow)) || ve.Flow == "" {
				t.Errorf("Error() = %q, want it to name the flow", ve.Error())
			}
			if !strings.Contains(err.Error(), ve.Message) {
				t.Errorf("the joined error does not include the message %q", ve.Message)
			}
			var as *flow.ValidationError
			if !errors.As(err, &as) {
				t.Errorf("errors.As cannot find a *ValidationError in %T", err)
			}
		})
	}
	for _, r := range []flow.Rule{
		flow.RuleNoSteps, flow.RuleInvalidName, flow.RuleInvalidOption, flow.RuleDuplicateStep,
		flow.RuleDuplicateKey, flow.RuleUnknownStep, flow.RuleMissingDep, flow.RuleUndeclaredEvent,
		flow.RuleUnroutedEvent, flow.RuleStart, flow.RuleCycle, flow.RuleUnreachable, flow.RuleMapSource,
		flow.RuleNoConvergence, flow.RuleInvalidMetadata, flow.RuleInvalidBusinessK,
	} {
		if !covered[r] {
			t.Errorf("no test case for rule %s", r)
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestValidationAt checks that errors about a declaration point at it.
func TestValidationAt(t *testing.T) {
	b := flow.New("f")
	task(b, "a")
	b.Edge("a", flow.EventOK, "zzz")
	_, err := b.Build()
	for _, ve := range flow.ValidationErrors(err) {
		if ve.Rule == flow.RuleUnknownStep && !strings.HasPrefix(ve.At, "validate_test.go:") {
			t.Errorf("At = %q, want the line of the Edge call in validate_test.go", ve.At)
		}
	}
	b = flow.New("f")
	flow.Step[any, any](b, "a", nil)
	_, err = b.Build()
	for _, ve := range flow.ValidationErrors(err) {
		if !strings.HasPrefix(ve.At, "validate_test.go:") {
			t.Errorf("At = %q, want the line of the Step call in validate_test.go", ve.At)
		}
	}
}

func TestMapSourceOK(t *testing.T) {
	type withSlice struct {
		Items []int `json:"items"`
		Named []int // no tag: matched case-insensitively
	}
	cases := []struct {
		name  string
		build func(b *flow.Builder)
	}{
		{"slice", func(b *flow.Builder) { source[[]string](b, "src"); mapOf(b, "m", flow.DependsOn("src")) }},
		{"array", func(b *flow.Builder) { source[[3]int](b, "src"); mapOf(b, "m", flow.DependsOn("src")) }},
		{"pointer to slice", func(b *flow.Builder) { source[*[]int](b, "src"); mapOf(b, "m", flow.DependsOn("src")) }},
		{"any", func(b *flow.Builder) { source[any](b, "src"); mapOf(b, "m", flow.DependsOn("src")) }},
		{"json.RawMessage", func(b *flow.Builder) { source[json.RawMessage](b, "src"); mapOf(b, "m", flow.DependsOn("src")) }},
		{"map step output", func(b *flow.Builder) {
			flow.Map(b, "src", func(ctx context.Context, item int) (Order, error) { return Order{}, nil })
			mapOf(b, "m", flow.DependsOn("src"))
		}},
		{"slice field", func(b *flow.Builder) {
			source[withSlice](b, "src")
			mapOf(b, "m", flow.DependsOn("src"), flow.Over("src", "items"))
		}},
		{"untagged slice field", func(b *flow.Builder) {
			source[withSlice](b, "src")
			mapOf(b, "m", flow.DependsOn("src"), flow.Over("src", "named"))
		}},
		{"unknown field", func(b *flow.Builder) {
			source[withSlice](b, "src")
			mapOf(b, "m", flow.DependsOn("src"), flow.Over("src", "nope"))
		}},
		{"map field", func(b *flow.Builder) {
			source[map[string][]int](b, "src")
			mapOf(b, "m", flow.DependsOn("src"), flow.Over("src", "k"))
		}},
		{"slice input", func(b *flow.Builder) { flow.Input[[]Order](b); mapOf(b, "m") }},
		{"undeclared input", func(b *flow.Builder) { mapOf(b, "m") }},
		{"input field", func(b *flow.Builder) { flow.Input[withSlice](b); mapOf(b, "m", flow.Over("", "items")) }},
		{"several predecessors with Over", func(b *flow.Builder) {
			source[[]int](b, "x")
			source[Order](b, "y")
			mapOf(b, "m", flow.DependsOn("x", "y"), flow.Over("x", ""))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := flow.New("f")
			tc.build(b)
			if _, err := b.Build(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestConvergingFanOut(t *testing.T) {
	b := flow.New("f")
	for _, n := range []string{"a", "b", "c", "join"} {
		task(b, n)
	}
	f, err := b.Start("a").
		Edge("a", flow.EventOK, "b", "c").
		Edge("b", flow.EventOK, "join").
		Edge("c", flow.EventOK, "join").
		Edge("join", flow.EventOK, flow.Done).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	run, err := hephtest.RunFlow(context.Background(), f, nil)
	if err != nil || run.Status() != hephtype.StatusCompleted || run.Calls["join"] != 1 {
		t.Fatalf("run: %v, status %s, join called %d times", err, run.Status(), run.Calls["join"])
	}
}

func TestImplicitLeafWithoutDone(t *testing.T) {
	// PgFlow style: leaves end their path without an edge.
	b := flow.New("f")
	task(b, "a")
	task(b, "b", flow.DependsOn("a"))
	task(b, "c", flow.DependsOn("a"))
	if _, err := b.Build(); err != nil {
		t.Fatal(err)
	}
}

func TestBuildReportsEveryProblem(t *testing.T) {
	b := flow.New("f")
	task(b, "a", flow.Retry(flow.RetryPolicy{Multiplier: 0.5}))
	task(b, "a")
	task(b, "b", flow.DependsOn("c"))
	task(b, "c", flow.DependsOn("b"))
	b.Edge("a", flow.EventOK, "nowhere")
	_, err := b.Build()
	if err == nil {
		t.Fatal("Build succeeded")
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("Build returned %T, want an errors.Join of every problem", err)
	}
	rules := map[flow.Rule]bool{}
	for _, e := range joined.Unwrap() {
		ve, ok := e.(*flow.ValidationError)
		if !ok {
			t.Errorf("joined error %T is not a *ValidationError: %v", e, e)
			continue
		}
		rules[ve.Rule] = true
	}
	for _, r := range []flow.Rule{flow.RuleInvalidOption, flow.RuleDuplicateStep, flow.RuleUnknownStep, flow.RuleCycle, flow.RuleUnreachable} {
		if !rules[r] {
			t.Errorf("no %s error among %v", r, err)
		}
	}
}

func mixedFlow() *flow.Flow {
	b := flow.New("mixed")
	flow.EventStep(b, "validate", func(ctx context.Context, o Order) (flow.Result[Order], error) {
		if o.Amount <= 0 {
			return flow.Emit("invalid", o), nil
		}
		return flow.Emit("valid", o), nil
	}, flow.Events("valid", "invalid"))
	flow.Step(b, "charge", func(ctx context.Context, o Order) (Charge, error) { return Charge{ChargeID: "ch_" + o.ID}, nil })
	flow.Step(b, "ship", func(ctx context.Context, o Order) (Shipment, error) { return Shipment{Tracking: "t"}, nil },
		flow.DependsOn("charge"))
	return b.Start("validate").
		Edge("validate", "valid", "charge").
		Edge("validate", "invalid", flow.Done).
		Edge("ship", flow.EventOK, flow.Done).
		MustBuild()
}

func TestValidFlows(t *testing.T) {
	flows := map[string]struct {
		mk    func() *flow.Flow
		input any
	}{
		"hephaestus": {orderFlow, Order{ID: "1", Amount: 5}},
		"pgflow":     {processOrderFlow, Order{ID: "1", Amount: 5}},
		"mixed":      {mixedFlow, Order{ID: "1", Amount: 5}},
		"approval":   {approvalFlow, []int{1, 2}},
	}
	for name, tc := range flows {
		t.Run(name, func(t *testing.T) {
			f := tc.mk()
			if f.Shape() == "" || f.Mermaid() == "" || len(f.Steps()) == 0 {
				t.Fatalf("flow %q is incomplete: shape %q, %d steps", f.Name(), f.Shape(), len(f.Steps()))
			}
			run, err := hephtest.RunFlow(context.Background(), f, tc.input)
			if err != nil {
				t.Fatal(err)
			}
			if s := run.Status(); s != hephtype.StatusCompleted && s != hephtype.StatusWaiting {
				t.Fatalf("status %s (%s)", s, run.Err())
			}
		})
	}
}

func TestMustBuildPanics(t *testing.T) {
	defer func() {
		p := recover()
		err, ok := p.(error)
		if !ok {
			t.Fatalf("MustBuild panicked with %T %v, want the validation error", p, p)
		}
		if ves := flow.ValidationErrors(err); len(ves) == 0 || ves[0].Rule != flow.RuleNoSteps {
			t.Fatalf("panic value %v lacks the no-steps error", err)
		}
	}()
	flow.New("empty").MustBuild()
	t.Fatal("MustBuild did not panic")
}

func TestBuildNilBuilder(t *testing.T) {
	var b *flow.Builder
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "flow.New") {
		t.Fatalf("err = %v, want a hint to use flow.New", err)
	}
}

func TestShape(t *testing.T) {
	def := func(mod func(b *flow.Builder)) *flow.Flow {
		b := flow.New("shape")
		task(b, "a")
		task(b, "b")
		task(b, "c")
		b.Start("a").Edge("a", flow.EventOK, "b").Edge("b", flow.EventOK, "c")
		if mod != nil {
			mod(b)
		}
		return b.MustBuild()
	}
	base := def(nil)
	if again := def(nil); again.Shape() != base.Shape() {
		t.Fatalf("identical definitions have different shapes: %s and %s", base.Shape(), again.Shape())
	}
	if len(base.Shape()) != 64 {
		t.Errorf("shape %q is not a sha256 hex digest", base.Shape())
	}
	changes := map[string]func() *flow.Flow{
		"extra edge": func() *flow.Flow { return def(func(b *flow.Builder) { b.Edge("a", flow.EventOK, "c") }) },
		"retry option": func() *flow.Flow {
			return def(func(b *flow.Builder) { b.Defaults(flow.Retry(flow.RetryPolicy{MaxAttempts: 9})) })
		},
		"timeout option": func() *flow.Flow { return def(func(b *flow.Builder) { b.Defaults(flow.Timeout(2 * time.Minute)) }) },
		"version":        func() *flow.Flow { return def(func(b *flow.Builder) { b.Version(2) }) },
		"edge target": func() *flow.Flow {
			b := flow.New("shape")
			task(b, "a")
			task(b, "b")
			task(b, "c")
			return b.Start("a").Edge("a", flow.EventOK, "c").Edge("c", flow.EventOK, "b").MustBuild()
		},
		"step type": func() *flow.Flow {
			b := flow.New("shape")
			task(b, "a")
			task(b, "b")
			source[int](b, "c")
			return b.Start("a").Edge("a", flow.EventOK, "b").Edge("b", flow.EventOK, "c").MustBuild()
		},
	}
	for name, mk := range changes {
		if mk().Shape() == base.Shape() {
			t.Errorf("%s: the shape did not change", name)
		}
	}
}

func TestResolvedOptions(t *testing.T) {
	b := flow.New("opts").Defaults(
		flow.Retry(flow.RetryPolicy{MaxAttempts: 5, InitialBackoff: 2 * time.Second}),
		flow.Timeout(10*time.Second),
		flow.Queue("flowq"),
		flow.Priority(3),
	)
	task(b, "own", flow.Retry(flow.RetryPolicy{MaxAttempts: 7, Jitter: -1}), flow.Timeout(time.Second), flow.Queue("stepq"), flow.Priority(-1), flow.Key("mine"))
	task(b, "inherits", flow.DependsOn("own"))
	task(b, "waits", flow.DependsOn("inherits"), flow.Waits(time.Hour))
	b.Edge("waits", flow.EventTimeout, flow.Done).Edge("waits", flow.EventOK, flow.Done)
	f := b.MustBuild()

	check := func(name string, want flow.StepSpec) {
		t.Helper()
		got, ok := f.Step(name)
		if !ok {
			t.Fatalf("no step %q", name)
		}
		got.Retry.NonRetryable = nil
		if !equalSpec(got, want) {
			t.Errorf("step %q:\n got %+v\nwant %+v", name, got, want)
		}
	}
	check("own", flow.StepSpec{
		Name: "own", Key: "mine", Kind: flow.KindTask, Events: []string{"ok"},
		Retry:   flow.RetryPolicy{MaxAttempts: 7, InitialBackoff: 2 * time.Second, MaxBackoff: 5 * time.Minute, Multiplier: 2, Jitter: -1},
		Timeout: time.Second, Queue: "stepq", Priority: -1,
	})
	check("inherits", flow.StepSpec{
		Name: "inherits", Key: "inherits", Kind: flow.KindTask, Events: []string{"ok"}, DependsOn: []string{"own"},
		Retry:   flow.RetryPolicy{MaxAttempts: 5, InitialBackoff: 2 * time.Second, MaxBackoff: 5 * time.Minute, Multiplier: 2, Jitter: 0.2},
		Timeout: 10 * time.Second, Queue: "flowq", Priority: 3,
	})
	check("waits", flow.StepSpec{
		Name: "waits", Key: "waits", Kind: flow.KindTask, Events: []string{"ok", "timeout"}, DependsOn: []string{"inherits"},
		Retry:   flow.RetryPolicy{MaxAttempts: 5, InitialBackoff: 2 * time.Second, MaxBackoff: 5 * time.Minute, Multiplier: 2, Jitter: 0.2},
		Timeout: 10 * time.Second, Queue: "flowq", Priority: 3, Waits: true, WaitTimeout: time.Hour,
	})

	// Without flow defaults, the built-in defaults apply.
	b = flow.New("builtin")
	task(b, "a")
	got, _ := b.MustBuild().Step("a")
	d := flow.DefaultRetryPolicy
	if got.Timeout != flow.DefaultTimeout || got.Queue != flow.DefaultQueue || got.Priority != 0 ||
		got.Retry.MaxAttempts != d.MaxAttempts || got.Retry.InitialBackoff != d.InitialBackoff ||
		got.Retry.MaxBackoff != d.MaxBackoff || got.Retry.Multiplier != d.Multiplier || got.Retry.Jitter != d.Jitter {
		t.Errorf("built-in defaults not applied: %+v", got)
	}
	if _, ok := b.MustBuild().Step("nope"); ok {
		t.Error("Step found a step that does not exist")
	}
}

func equalSpec(a, b flow.StepSpec) bool {
	return a.Name == b.Name && a.Key == b.Key && a.Kind == b.Kind && slices.Equal(a.Events, b.Events) &&
		slices.Equal(a.DependsOn, b.DependsOn) && a.Retry.MaxAttempts == b.Retry.MaxAttempts &&
		a.Retry.InitialBackoff == b.Retry.InitialBackoff && a.Retry.MaxBackoff == b.Retry.MaxBackoff &&
		a.Retry.Multiplier == b.Retry.Multiplier && a.Retry.Jitter == b.Retry.Jitter &&
		a.Timeout == b.Timeout && a.Queue == b.Queue && a.Priority == b.Priority &&
		a.Waits == b.Waits && a.WaitTimeout == b.WaitTimeout && a.MapSource == b.MapSource && a.MapField == b.MapField
}

func TestBackoff(t *testing.T) {
	p := flow.RetryPolicy{InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, Multiplier: 2, Jitter: -1}
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{0, 0}, {1, 0}, {2, time.Second}, {3, 2 * time.Second}, {4, 4 * time.Second},
		{5, 8 * time.Second}, {6, 10 * time.Second}, {7, 10 * time.Second}, {100, 10 * time.Second}, {5000, 10 * time.Second},
	} {
		if got := p.Backoff(tc.attempt, 0.5); got != tc.want {
			t.Errorf("Backoff(%d) = %s, want %s", tc.attempt, got, tc.want)
		}
	}
	// The zero policy uses DefaultRetryPolicy: 1s, 2s, … with ±20% jitter.
	var zero flow.RetryPolicy
	if got := zero.Backoff(2, 0.5); got != time.Second {
		t.Errorf("zero policy: Backoff(2, 0.5) = %s, want 1s", got)
	}
	if got := zero.Backoff(2, 0); got != 800*time.Millisecond {
		t.Errorf("zero policy: Backoff(2, 0) = %s, want 800ms", got)
	}
	if got := (flow.RetryPolicy{Multiplier: 1.5, Jitter: -1}).Backoff(4, 0); got != 2250*time.Millisecond {
		t.Errorf("multiplier 1.5: Backoff(4) = %s, want 2.25s", got)
	}
}

func TestBackoffProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		initial := time.Duration(rapid.Int64Range(1, int64(time.Minute)).Draw(t, "initial"))
		maxB := initial + time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "extra"))
		mult := rapid.Float64Range(1, 10).Draw(t, "multiplier")
		jitter := rapid.Float64Range(0, 1).Draw(t, "jitter")
		attempt := rapid.IntRange(2, 200).Draw(t, "attempt")
		r := rapid.Float64Range(0, 0.999999).Draw(t, "r")
		plain := flow.RetryPolicy{InitialBackoff: initial, MaxBackoff: maxB, Multiplier: mult, Jitter: -1}
		base := plain.Backoff(attempt, r)
		if base < initial || base > maxB {
			t.Fatalf("un-jittered backoff %s outside [%s, %s]", base, initial, maxB)
		}
		if next := plain.Backoff(attempt+1, r); next < base {
			t.Fatalf("backoff shrank from %s to %s", base, next)
		}
		if want := float64(initial) * math.Pow(mult, float64(attempt-2)); want < float64(maxB) && math.Abs(float64(base)-want) > 1 {
			t.Fatalf("backoff %s, want initial*multiplier^(attempt-2) = %v", base, time.Duration(want))
		}
		if jitter == 0 {
			return // 0 inherits the default jitter
		}
		jittered := flow.RetryPolicy{InitialBackoff: initial, MaxBackoff: maxB, Multiplier: mult, Jitter: jitter}.Backoff(attempt, r)
		// base is the un-jittered backoff truncated to whole nanoseconds:
		// the exact one is in [base, base+1), and the jitter scales that.
		lo, hi := float64(base)*(1-jitter), float64(base+1)*(1+jitter)
		if float64(jittered) < lo-1 || float64(jittered) > hi {
			t.Fatalf("jittered backoff %s outside [%v, %v] (base %s, jitter %v)", jittered, time.Duration(lo), time.Duration(hi), base, jitter)
		}
	})
}

var errPermanent = errors.New("card declined")

func TestRetryable(t *testing.T) {
	transient := errors.New("connection reset")
	p := flow.RetryPolicy{NonRetryable: func(err error) bool { return errors.Is(err, errPermanent) }}
	cases := []struct {
		name string
		p    flow.RetryPolicy
		err  error
		want bool
	}{
		{"plain error", flow.RetryPolicy{}, transient, true},
		{"NonRetryable", flow.RetryPolicy{}, flow.NonRetryable(transient), false},
		{"wrapped NonRetryable", flow.RetryPolicy{}, fmt.Errorf("charge: %w", flow.NonRetryable(transient)), false},
		{"joined NonRetryable", flow.RetryPolicy{}, errors.Join(transient, flow.NonRetryable(transient)), false},
		{"policy func matches", p, fmt.Errorf("charge: %w", errPermanent), false},
		{"policy func does not match", p, transient, true},
	}
	for _, tc := range cases {
		if got := tc.p.Retryable(tc.err); got != tc.want {
			t.Errorf("%s: Retryable = %v, want %v", tc.name, got, tc.want)
		}
	}
	if flow.NonRetryable(nil) != nil {
		t.Error("NonRetryable(nil) is not nil")
	}
	nr := flow.NonRetryable(errPermanent)
	if !errors.Is(nr, errPermanent) || nr.Error() != errPermanent.Error() {
		t.Errorf("NonRetryable hides its error: %v", nr)
	}
	// A flow's Defaults pass the NonRetryable func on to steps.
	b := flow.New("f").Defaults(flow.Retry(p))
	task(b, "a")
	spec, _ := b.MustBuild().Step("a")
	if spec.Retry.Retryable(errPermanent) {
		t.Error("a step does not inherit the flow's NonRetryable func")
	}
}

func invokeFlow(t *testing.T) *flow.Flow {
	t.Helper()
	b := flow.New("invoke")
	charge := flow.Step(b, "charge", func(ctx context.Context, o Order) (Charge, error) {
		return Charge{ChargeID: "ch_" + o.ID}, nil
	})
	flow.Step(b, "ship", func(ctx context.Context, o Order) (Shipment, error) {
		c, err := charge.Output(ctx)
		if err != nil {
			return Shipment{}, err
		}
		info, ok := flow.CallInfo(ctx)
		if !ok {
			return Shipment{}, errors.New("no CallInfo")
		}
		return Shipment{Tracking: fmt.Sprintf("%s/%s/%s/%d/%d/%s", c.ChargeID, info.RunID, info.Step, info.Index, info.Attempt, info.IdempotencyKey)}, nil
	}, flow.DependsOn("charge"))
	flow.Step(b, "stray", func(ctx context.Context, o Order) (Charge, error) {
		return charge.Output(ctx) // an ancestor, two hops back
	}, flow.DependsOn("ship"))
	flow.Map(b, "lines", func(ctx context.Context, n int) (string, error) {
		o, err := flow.RunInput[Order](ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s#%d", o.ID, n), nil
	}, flow.DependsOn("stray"), flow.Over("", "lines"))
	flow.Step(b, "boom", func(ctx context.Context, in any) (any, error) { panic("kaboom") }, flow.DependsOn("lines"))
	flow.EventStep(b, "impatient", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.DependsOn("boom"))
	flow.Step(b, "badout", func(ctx context.Context, in any) (any, error) { return make(chan int), nil }, flow.DependsOn("impatient"))
	return b.MustBuild()
}

func TestInvoke(t *testing.T) {
	ctx := context.Background()
	f := invokeFlow(t)
	spec := func(name string) flow.RetryPolicy { s, _ := f.Step(name); return s.Retry }

	t.Run("typed input and output", func(t *testing.T) {
		out, err := f.Invoke(ctx, flow.Call{RunID: "r1", Step: "charge", Index: -1, Attempt: 1, Input: json.RawMessage(`{"input":{"id":"7"}}`)})
		if err != nil || out.Event != flow.EventOK || string(out.Output) != `{"charge_id":"ch_7"}` {
			t.Fatalf("got %+v, %v", out, err)
		}
	})
	t.Run("StepRef.Output and CallInfo", func(t *testing.T) {
		out, err := f.Invoke(ctx, flow.Call{RunID: "r1", Step: "ship", Index: -1, Attempt: 2, IdempotencyKey: "k",
			Input: json.RawMessage(`{"input":{"id":"7"},"charge":{"charge_id":"ch_7"}}`)})
		if err != nil || string(out.Output) != `{"tracking":"ch_7/r1/ship/-1/2/k"}` {
			t.Fatalf("got %s, %v", out.Output, err)
		}
	})
	t.Run("Output of an ancestor two hops back", func(t *testing.T) {
		out, err := f.Invoke(ctx, flow.Call{Step: "stray", Index: -1, Attempt: 1, Input: json.RawMessage(`{"input":{},"charge":{"charge_id":"c"},"ship":{}}`)})
		if err != nil || string(out.Output) != `{"charge_id":"c"}` {
			t.Fatalf("got %s, %v", out.Output, err)
		}
	})
	t.Run("Output of an ancestor missing from the context", func(t *testing.T) {
		_, err := f.Invoke(ctx, flow.Call{Step: "stray", Index: -1, Attempt: 1, Input: json.RawMessage(`{"input":{},"ship":{}}`)})
		if !errors.Is(err, flow.ErrSkipped) || !containsAll(err.Error(), []string{`"stray"`, `"charge"`, "skipped"}) || spec("stray").Retryable(err) {
			t.Fatalf("err = %v, want a permanent ErrSkipped naming both steps", err)
		}
	})
	t.Run("RunInput in a map step", func(t *testing.T) {
		out, err := f.Invoke(ctx, flow.Call{Step: "lines", Index: 1, Attempt: 1, Item: json.RawMessage(`5`),
			Input: json.RawMessage(`{"input":{"id":"9","lines":[4,5]}}`)})
		if err != nil || string(out.Output) != `"9#5"` {
			t.Fatalf("got %s, %v", out.Output, err)
		}
	})
	t.Run("invalid input", func(t *testing.T) {
		for _, c := range []flow.Call{
			{Step: "charge", Index: -1, Input: json.RawMessage(`{"input":"not an order"}`)},
			{Step: "charge", Index: -1, Input: json.RawMessage(`{"input":{"id":`)},
			{Step: "charge", Index: -1, Input: json.RawMessage(`[1,2]`)},
			{Step: "lines", Index: 0, Input: json.RawMessage(`{"input":{}}`), Item: json.RawMessage(`"five"`)},
			{Step: "ship", Index: -1, Input: json.RawMessage(`{"input":{},"charge":42}`)},
		} {
			_, err := f.Invoke(ctx, c)
			var ie *flow.InputError
			if !errors.As(err, &ie) {
				t.Errorf("%s with %s: err = %v, want an *InputError", c.Step, c.Input, err)
				continue
			}
			if ie.Step != c.Step || !strings.Contains(err.Error(), fmt.Sprintf("step %q", c.Step)) {
				t.Errorf("the error does not name step %q: %v", c.Step, err)
			}
			if spec(c.Step).Retryable(err) {
				t.Errorf("%s: an input error is retryable", c.Step)
			}
		}
	})
	t.Run("panic", func(t *testing.T) {
		_, err := f.Invoke(ctx, flow.Call{Step: "boom", Index: -1, Input: json.RawMessage(`{}`)})
		if err == nil || !containsAll(err.Error(), []string{`"boom"`, "panicked", "kaboom"}) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("Wait without Waits", func(t *testing.T) {
		_, err := f.Invoke(ctx, flow.Call{Step: "impatient", Index: -1, Input: json.RawMessage(`{}`)})
		if err == nil || !containsAll(err.Error(), []string{`"impatient"`, "Waits"}) || spec("impatient").Retryable(err) {
			t.Fatalf("err = %v, want a non-retryable error about the Waits option", err)
		}
	})
	t.Run("output that does not encode", func(t *testing.T) {
		_, err := f.Invoke(ctx, flow.Call{Step: "badout", Index: -1, Input: json.RawMessage(`{}`)})
		if err == nil || !strings.Contains(err.Error(), `"badout"`) || spec("badout").Retryable(err) {
			t.Fatalf("err = %v, want a non-retryable encoding error", err)
		}
	})
	t.Run("unknown step", func(t *testing.T) {
		_, err := f.Invoke(ctx, flow.Call{Step: "nope"})
		if err == nil || !strings.Contains(err.Error(), `"nope"`) || flow.DefaultRetryPolicy.Retryable(err) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("outside step code", func(t *testing.T) {
		if _, ok := flow.CallInfo(ctx); ok {
			t.Error("CallInfo ok outside step code")
		}
		if _, err := flow.Output[any](ctx, "charge"); err == nil {
			t.Error("Output works outside step code")
		}
		if _, err := flow.RunInput[any](ctx); err == nil {
			t.Error("RunInput works outside step code")
		}
	})
}

func TestStepRefOutputThroughRun(t *testing.T) {
	run, err := hephtest.RunFlow(context.Background(), orderFlow(), Order{ID: "1", Amount: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(run.Output()); got != `{"ship":{"tracking":"north/ch_1"}}` {
		t.Fatalf("output %s", got)
	}
	if ship, _ := run.Step("ship"); ship.Status != hephtype.StepCompleted {
		t.Fatalf("ship is %s", ship.Status)
	}
}

func TestOutputOfInputKey(t *testing.T) {
	b := flow.New("f")
	flow.Step(b, "a", func(ctx context.Context, in any) (any, error) {
		return flow.Output[any](ctx, "input")
	})
	run, err := hephtest.RunFlow(context.Background(), b.MustBuild(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status() != hephtype.StatusFailed || !strings.Contains(run.Err(), `"input"`) {
		t.Fatalf("status %s, err %q: Output(\"input\") must be refused (use RunInput)", run.Status(), run.Err())
	}
}

// A fan-out is every target of one step's event, however the edges are
// declared: in one Edge call, in several, or through DependsOn.
func TestNoConvergenceHowEverDeclared(t *testing.T) {
	cases := map[string]func(b *flow.Builder){
		"one Edge call": func(b *flow.Builder) {
			task(b, "b")
			task(b, "c")
			b.Edge("a", flow.EventOK, "b", "c")
		},
		"two Edge calls": func(b *flow.Builder) {
			task(b, "b")
			task(b, "c")
			b.Edge("a", flow.EventOK, "b").Edge("a", flow.EventOK, "c")
		},
		"DependsOn": func(b *flow.Builder) {
			task(b, "b", flow.DependsOn("a"))
			task(b, "c", flow.DependsOn("a"))
		},
	}
	for name, decl := range cases {
		t.Run(name, func(t *testing.T) {
			b := flow.New("f")
			task(b, "a")
			decl(b)
			b.Start("a").Edge("b", flow.EventOK, flow.Done).Edge("c", flow.EventOK, flow.Done)
			_, err := b.Build()
			found := false
			for _, ve := range flow.ValidationErrors(err) {
				found = found || (ve.Rule == flow.RuleNoConvergence && containsAll(ve.Message, []string{`"a"`, "b, c"}))
			}
			if !found {
				t.Fatalf("no no-convergence error naming a, b and c: %v", err)
			}
		})
	}
}
