package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/internal/flowgraph"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func wantStatus(t *testing.T, r *runT, want hephtype.RunStatus) {
	t.Helper()
	if r.s.Status != want {
		t.Fatalf("run status = %s, want %s (error %q)", r.s.Status, want, r.s.Error)
	}
}

func wantSteps(t *testing.T, r *runT, want map[string]hephtype.StepStatus) {
	t.Helper()
	for name, st := range want {
		if got := r.step(name).Status; got != st {
			t.Errorf("step %q is %s, want %s", name, got, st)
		}
	}
}

func TestStartSchedulesRoots(t *testing.T) {
	g := newGraph(t).
		step("a").step("b").step("c").
		edge("a", "ok", "c").edge("b", "ok", "c").edge("c", "ok", "done").
		build()
	if !slices.Equal(g.Roots, []int{0, 1}) {
		t.Fatalf("roots = %v", g.Roots)
	}
	r, d := startRun(t, g, `{"order":42}`)
	expect(t, d,
		[]string{
			`schedule a #1 in={"input":{"order":42}}`,
			`schedule b #1 in={"input":{"order":42}}`,
		},
		[]string{
			`run_started data={"order":42}`,
			`step_scheduled a a=1`,
			`step_scheduled b a=1`,
		})
	wantStatus(t, r, hephtype.StatusRunning)
	wantSteps(t, r, map[string]hephtype.StepStatus{"a": hephtype.StepScheduled, "b": hephtype.StepScheduled, "c": hephtype.StepPending})
	if st := r.step("a"); st.Attempt != 1 {
		t.Errorf("a attempt = %d, want 1", st.Attempt)
	}
	if in := r.step("c").In; !slices.Equal(in, []engine.EdgeState{engine.EdgeOpen, engine.EdgeOpen}) {
		t.Errorf("c.In = %v, want two open edges", in)
	}
	if string(r.s.Input) != `{"order":42}` {
		t.Errorf("state input = %s", r.s.Input)
	}

	// No input at all: the input document still has "input", as null.
	_, d = startRun(t, newGraph(t).step("a").edge("a", "ok", "done").build(), "")
	expect(t, d,
		[]string{`schedule a #1 in={"input":null}`},
		[]string{`run_started`, `step_scheduled a a=1`})
}

func TestLinearChain(t *testing.T) {
	g := newGraph(t).step("a").step("b").step("c").
		edge("a", "ok", "b").edge("b", "ok", "c").edge("c", "ok", "done").build()
	r, d := startRun(t, g, `"x"`)
	expect(t, d, []string{`schedule a #1 in={"input":"x"}`}, []string{`run_started data="x"`, `step_scheduled a a=1`})

	// An empty event means "ok".
	d = r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`{"v":1}`)})
	expect(t, d,
		[]string{`schedule b #1 in={"input":"x","a":{"v":1}}`},
		[]string{`step_completed a a=1 ev=ok data={"v":1}`, `step_scheduled b a=1`})
	wantStatus(t, r, hephtype.StatusRunning)

	// c sees every completed ancestor: b and, two hops back, a.
	d = r.apply(engine.StepCompleted{Step: "b", Attempt: 1, Event: "ok", Output: raw(`{"v":2}`)})
	expect(t, d,
		[]string{`schedule c #1 in={"input":"x","a":{"v":1},"b":{"v":2}}`},
		[]string{`step_completed b a=1 ev=ok data={"v":2}`, `step_scheduled c a=1`})

	d = r.apply(engine.StepCompleted{Step: "c", Attempt: 1, Output: raw(`{"v":3}`)})
	expect(t, d,
		[]string{`complete-run {"c":{"v":3}}`},
		[]string{`step_completed c a=1 ev=ok data={"v":3}`, `run_completed data={"c":{"v":3}}`})
	wantStatus(t, r, hephtype.StatusCompleted)
	if string(r.s.Output) != `{"c":{"v":3}}` {
		t.Errorf("run output = %s", r.s.Output)
	}
	for _, name := range []string{"a", "b", "c"} {
		if st := r.step(name); st.Status != hephtype.StepCompleted || st.Event != "ok" {
			t.Errorf("step %s = %+v, want completed with ok", name, st)
		}
	}
}

// A step that declares what it reads gets only those outputs, whatever
// else completed before it; an empty declaration leaves the run input.
func TestDeclaredReads(t *testing.T) {
	g := newGraph(t).step("a").step("b").step("c", reads("a")).step("d", reads()).
		edge("a", "ok", "b").edge("b", "ok", "c").edge("c", "ok", "d").edge("d", "ok", "done").build()
	if !g.IsAncestor(0, 2) || !g.IsAncestor(1, 2) || g.IsAncestor(2, 1) || g.IsAncestor(2, 2) {
		t.Errorf("IsAncestor: a and b lead to c, c leads to neither itself nor b")
	}
	r, _ := startRun(t, g, `"x"`)
	r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`1`)})
	d := r.apply(engine.StepCompleted{Step: "b", Attempt: 1, Output: raw(`2`)})
	expect(t, d,
		[]string{`schedule c #1 in={"input":"x","a":1}`},
		[]string{`step_completed b a=1 ev=ok data=2`, `step_scheduled c a=1`})
	d = r.apply(engine.StepCompleted{Step: "c", Attempt: 1, Output: raw(`3`)})
	expect(t, d,
		[]string{`schedule d #1 in={"input":"x"}`},
		[]string{`step_completed c a=1 ev=ok data=3`, `step_scheduled d a=1`})
}

func TestFanOutFanIn(t *testing.T) {
	g := newGraph(t).step("a").step("b").step("c", key("charge")).step("d").
		edge("a", "ok", "b", "c").edge("b", "ok", "d").edge("c", "ok", "d").edge("d", "ok", "done").build()
	r, _ := startRun(t, g, `{}`)

	d := r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`1`)})
	expect(t, d,
		[]string{
			`schedule b #1 in={"input":{},"a":1}`,
			`schedule c #1 in={"input":{},"a":1}`,
		},
		[]string{`step_completed a a=1 ev=ok data=1`, `step_scheduled b a=1`, `step_scheduled c a=1`})

	// The join waits for its second predecessor.
	d = r.apply(engine.StepCompleted{Step: "c", Attempt: 1, Output: raw(`"C"`)})
	expect(t, d, nil, []string{`step_completed c a=1 ev=ok data="C"`})
	wantSteps(t, r, map[string]hephtype.StepStatus{"d": hephtype.StepPending})
	if in := r.step("d").In; !slices.Equal(in, []engine.EdgeState{engine.EdgeOpen, engine.EdgeFired}) {
		t.Errorf("d.In = %v, want [open fired]", in)
	}
	wantStatus(t, r, hephtype.StatusRunning)

	// Both outputs, each under its predecessor's key.
	d = r.apply(engine.StepCompleted{Step: "b", Attempt: 1, Output: raw(`"B"`)})
	expect(t, d,
		[]string{`schedule d #1 in={"input":{},"a":1,"b":"B","charge":"C"}`},
		[]string{`step_completed b a=1 ev=ok data="B"`, `step_scheduled d a=1`})

	d = r.apply(engine.StepCompleted{Step: "d", Attempt: 1, Output: raw(`"D"`)})
	expect(t, d, []string{`complete-run {"d":"D"}`}, []string{`step_completed d a=1 ev=ok data="D"`, `run_completed data={"d":"D"}`})
}

func TestBranchDeadPathElimination(t *testing.T) {
	// a -yes-> b ------------> d
	// a -no--> c -> e -------> d
	g := newGraph(t).step("a", events("yes", "no")).step("b").step("c").step("e").step("d").
		edge("a", "yes", "b").edge("a", "no", "c").
		edge("c", "ok", "e").edge("b", "ok", "d").edge("e", "ok", "d").edge("d", "ok", "done").build()
	r, _ := startRun(t, g, `{"n":1}`)

	d := r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Event: "yes", Output: raw(`{"ok":true}`)})
	expect(t, d,
		[]string{`schedule b #1 in={"input":{"n":1},"a":{"ok":true}}`},
		[]string{
			`step_completed a a=1 ev=yes data={"ok":true}`,
			`step_scheduled b a=1`,
			`step_skipped c`, // every incoming edge dead
			`step_skipped e`, // the skip propagates
		})
	wantSteps(t, r, map[string]hephtype.StepStatus{"c": hephtype.StepSkipped, "e": hephtype.StepSkipped, "d": hephtype.StepPending})
	if in := r.step("d").In; !slices.Equal(in, []engine.EdgeState{engine.EdgeOpen, engine.EdgeDead}) {
		t.Errorf("d.In = %v, want [open dead]", in)
	}

	// The join sees the completed ancestors a and b; the skipped c and e are
	// absent.
	d = r.apply(engine.StepCompleted{Step: "b", Attempt: 1, Output: raw(`"B"`)})
	expect(t, d,
		[]string{`schedule d #1 in={"input":{"n":1},"a":{"ok":true},"b":"B"}`},
		[]string{`step_completed b a=1 ev=ok data="B"`, `step_scheduled d a=1`})

	d = r.apply(engine.StepCompleted{Step: "d", Attempt: 1, Output: raw(`"D"`)})
	expect(t, d, []string{`complete-run {"d":"D"}`}, []string{`step_completed d a=1 ev=ok data="D"`, `run_completed data={"d":"D"}`})
	wantSteps(t, r, map[string]hephtype.StepStatus{"c": hephtype.StepSkipped, "e": hephtype.StepSkipped, "d": hephtype.StepCompleted})
}

func TestAllEdgesDeadSkipsAndCompletes(t *testing.T) {
	g := newGraph(t).step("a", events("x", "y")).step("b").step("c").
		edge("a", "x", "b").edge("a", "y", "done").edge("b", "ok", "c").edge("c", "ok", "done").build()
	r, _ := startRun(t, g, `null`)
	d := r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Event: "y", Output: raw(`"A"`)})
	expect(t, d,
		[]string{`complete-run {"a":"A"}`},
		[]string{`step_completed a a=1 ev=y data="A"`, `step_skipped b`, `step_skipped c`, `run_completed data={"a":"A"}`})
	wantSteps(t, r, map[string]hephtype.StepStatus{"b": hephtype.StepSkipped, "c": hephtype.StepSkipped})
	if in := r.step("c").In; !slices.Equal(in, []engine.EdgeState{engine.EdgeDead}) {
		t.Errorf("c.In = %v, want [dead]", in)
	}
}

func TestMapOverInput(t *testing.T) {
	g := newGraph(t).step("m", mapOver("", "")).edge("m", "ok", "done").build()
	r, d := startRun(t, g, `[10,20,30]`)
	expect(t, d,
		[]string{
			`schedule m[0] #1 in={"input":[10,20,30]} item=10`,
			`schedule m[1] #1 in={"input":[10,20,30]} item=20`,
			`schedule m[2] #1 in={"input":[10,20,30]} item=30`,
		},
		[]string{`run_started data=[10,20,30]`, `map_expanded m i=3`})
	if n := len(r.step("m").Items); n != 3 {
		t.Fatalf("m has %d items, want 3", n)
	}

	// Out of order: the output is still in index order.
	d = r.apply(engine.ItemCompleted{Step: "m", Index: 2, Attempt: 1, Output: raw(`"z"`)})
	expect(t, d, nil, []string{`map_item_completed m i=2 a=1 data="z"`})
	r.refuse(engine.ItemCompleted{Step: "m", Index: 2, Attempt: 1, Output: raw(`"dup"`)}, engine.ErrStale)
	r.refuse(engine.ItemCompleted{Step: "m", Index: 3, Attempt: 1}, engine.ErrStale)
	r.refuse(engine.ItemCompleted{Step: "m", Index: -1, Attempt: 1}, engine.ErrStale)
	d = r.apply(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 1, Output: raw(`"x"`)})
	expect(t, d, nil, []string{`map_item_completed m a=1 data="x"`})
	wantStatus(t, r, hephtype.StatusRunning)
	d = r.apply(engine.ItemCompleted{Step: "m", Index: 1, Attempt: 1, Output: raw(`"y"`)})
	expect(t, d,
		[]string{`complete-run {"m":["x","y","z"]}`},
		[]string{
			`map_item_completed m i=1 a=1 data="y"`,
			`step_completed m a=1 ev=ok data=["x","y","z"]`,
			`run_completed data={"m":["x","y","z"]}`,
		})
	if st := r.step("m"); st.Status != hephtype.StepCompleted || string(st.Output) != `["x","y","z"]` {
		t.Errorf("m = %+v", st)
	}
}

func TestMapEmptyArrayCompletesAtOnce(t *testing.T) {
	g := newGraph(t).step("m", mapOver("", "")).step("n").
		edge("m", "ok", "n").edge("n", "ok", "done").build()
	r, d := startRun(t, g, `[]`)
	expect(t, d,
		[]string{`schedule n #1 in={"input":[],"m":[]}`},
		[]string{`run_started data=[]`, `map_expanded m`, `step_completed m a=1 ev=ok data=[]`, `step_scheduled n a=1`})
	wantSteps(t, r, map[string]hephtype.StepStatus{"m": hephtype.StepCompleted, "n": hephtype.StepScheduled})

	// A flow that is only an empty map step completes in Start.
	_, d = startRun(t, newGraph(t).step("m", mapOver("", "")).edge("m", "ok", "done").build(), `[]`)
	expect(t, d,
		[]string{`complete-run {"m":[]}`},
		[]string{`run_started data=[]`, `map_expanded m`, `step_completed m a=1 ev=ok data=[]`, `run_completed data={"m":[]}`})
}

func TestMapSourceNotAnArray(t *testing.T) {
	for _, c := range []struct {
		name, input, kind string
	}{
		{"object", `{"a":1}`, "an object"},
		{"string", `"abc"`, "a string"},
		{"number", `7`, "a number"},
		{"null", `null`, "null"},
		{"missing", ``, "nothing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGraph(t).step("m", mapOver("", "")).edge("m", "ok", "done").build()
			r, d := startRun(t, g, c.input)
			msg := `map step "m": the run input is not a JSON array (got ` + c.kind + `)`
			runErr := `step "m" failed: ` + msg
			hist := []string{`run_started data=` + c.input, `step_scheduled m a=1`, `step_failed m a=1 err=` + msg, `run_failed m err=` + runErr}
			if c.input == "" {
				hist[0] = `run_started`
			}
			expect(t, d, []string{`fail-run ` + runErr}, hist)
			wantStatus(t, r, hephtype.StatusFailed)
			wantSteps(t, r, map[string]hephtype.StepStatus{"m": hephtype.StepFailed})
			if r.s.Error != runErr {
				t.Errorf("run error = %q", r.s.Error)
			}
		})
	}
}

// A map step that fails as it expands must end the decision: no step may be
// scheduled after the run failed (here, the second root).
func TestMapSourceFailureStopsEverything(t *testing.T) {
	g := newGraph(t).step("m", mapOver("", "")).step("r").
		edge("m", "ok", "done").edge("r", "ok", "done").build()
	r, d := startRun(t, g, `{}`)
	runErr := `step "m" failed: map step "m": the run input is not a JSON array (got an object)`
	expect(t, d, []string{`fail-run ` + runErr}, []string{
		`run_started data={}`, `step_scheduled m a=1`,
		`step_failed m a=1 err=map step "m": the run input is not a JSON array (got an object)`,
		`run_failed m err=` + runErr,
	})
	wantStatus(t, r, hephtype.StatusFailed)
	wantSteps(t, r, map[string]hephtype.StepStatus{"r": hephtype.StepPending})

	// The same in the middle of a run: a fans out to a map step over its
	// output and to another step; the map fails, the other must not start.
	g = newGraph(t).step("a").step("m", mapOver("a", "")).step("b").
		edge("a", "ok", "m", "b").edge("m", "ok", "done").edge("b", "ok", "done").build()
	r, _ = startRun(t, g, `{}`)
	d = r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`{"not":"an array"}`)})
	runErr = `step "m" failed: map step "m": the output of step "a" is not a JSON array (got an object)`
	expect(t, d, []string{`fail-run ` + runErr}, []string{
		`step_completed a a=1 ev=ok data={"not":"an array"}`, `step_scheduled m a=1`,
		`step_failed m a=1 err=map step "m": the output of step "a" is not a JSON array (got an object)`,
		`run_failed m err=` + runErr,
	})
	wantStatus(t, r, hephtype.StatusFailed)
	wantSteps(t, r, map[string]hephtype.StepStatus{"b": hephtype.StepPending, "m": hephtype.StepFailed})
}

func TestMapOverFieldOfDependency(t *testing.T) {
	build := func() *engine.Graph {
		return newGraph(t).step("a").step("m", mapOver("a", "items")).step("n").
			edge("a", "ok", "m").edge("m", "ok", "n").edge("n", "ok", "done").build()
	}
	r, _ := startRun(t, build(), `{"k":1}`)
	d := r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`{"items":["p","q"],"n":2}`)})
	in := `{"input":{"k":1},"a":{"items":["p","q"],"n":2}}`
	expect(t, d,
		[]string{`schedule m[0] #1 in=` + in + ` item="p"`, `schedule m[1] #1 in=` + in + ` item="q"`},
		[]string{`step_completed a a=1 ev=ok data={"items":["p","q"],"n":2}`, `map_expanded m i=2`})
	r.apply(engine.ItemCompleted{Step: "m", Index: 1, Attempt: 1, Output: raw(`"Q"`)})
	d = r.apply(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 1, Output: raw(`"P"`)})
	expect(t, d,
		[]string{`schedule n #1 in={"input":{"k":1},"a":{"items":["p","q"],"n":2},"m":["P","Q"]}`},
		[]string{`map_item_completed m a=1 data="P"`, `step_completed m a=1 ev=ok data=["P","Q"]`, `step_scheduled n a=1`})

	for _, c := range []struct{ out, msg string }{
		{`{"n":2}`, `map step "m": the output of step "a" has no field "items"`},
		{`[1,2]`, `map step "m": the output of step "a" is not a JSON object, so it has no field "items"`},
		{`{"items":5}`, `map step "m": field "items" of the output of step "a" is not a JSON array (got a number)`},
		{`{"items":null}`, `map step "m": field "items" of the output of step "a" is not a JSON array (got null)`},
	} {
		r, _ := startRun(t, build(), `{}`)
		d := r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(c.out)})
		expect(t, d, []string{`fail-run step "m" failed: ` + c.msg}, []string{
			`step_completed a a=1 ev=ok data=` + c.out, `step_scheduled m a=1`,
			`step_failed m a=1 err=` + c.msg, `run_failed m err=step "m" failed: ` + c.msg,
		})
	}
}

func TestMapOverMapOutput(t *testing.T) {
	g := newGraph(t).step("m1", mapOver("", "")).step("m2", mapOver("m1", "")).
		edge("m1", "ok", "m2").edge("m2", "ok", "done").build()
	r, _ := startRun(t, g, `[1,2]`)
	r.apply(engine.ItemCompleted{Step: "m1", Index: 0, Attempt: 1, Output: raw(`[]`)})
	d := r.apply(engine.ItemCompleted{Step: "m1", Index: 1, Attempt: 1, Output: raw(`{"x":1}`)})
	in := `{"input":[1,2],"m1":[[],{"x":1}]}`
	expect(t, d,
		[]string{`schedule m2[0] #1 in=` + in + ` item=[]`, `schedule m2[1] #1 in=` + in + ` item={"x":1}`},
		[]string{`map_item_completed m1 i=1 a=1 data={"x":1}`, `step_completed m1 a=1 ev=ok data=[[],{"x":1}]`, `map_expanded m2 i=2`})
	// An element with no output counts as null in the array.
	r.apply(engine.ItemCompleted{Step: "m2", Index: 0, Attempt: 1})
	d = r.apply(engine.ItemCompleted{Step: "m2", Index: 1, Attempt: 1, Output: raw(`2`)})
	expect(t, d, []string{`complete-run {"m2":[null,2]}`}, []string{
		`map_item_completed m2 i=1 a=1 data=2`, `step_completed m2 a=1 ev=ok data=[null,2]`, `run_completed data={"m2":[null,2]}`,
	})
}

func TestMapPerItemRetry(t *testing.T) {
	g := newGraph(t).step("m", mapOver("", ""), attempts(3)).edge("m", "ok", "done").build()
	r, _ := startRun(t, g, `["a","b","c"]`)
	in := `{"input":["a","b","c"]}`

	d := r.apply(engine.ItemFailed{Step: "m", Index: 1, Attempt: 1, Error: "flaky", Retryable: true})
	expect(t, d,
		[]string{`schedule m[1] #2 retry in=` + in + ` item="b"`},
		[]string{`map_item_failed m i=1 a=1 err=flaky`, `step_retrying m i=1 a=2`})
	if it := r.step("m").Items[1]; it.Attempt != 2 || it.Status != hephtype.StepScheduled {
		t.Errorf("item 1 = %+v", it)
	}
	// The late report of attempt 1 is stale.
	r.refuse(engine.ItemCompleted{Step: "m", Index: 1, Attempt: 1, Output: raw(`"late"`)}, engine.ErrStale)
	r.refuse(engine.ItemFailed{Step: "m", Index: 1, Attempt: 1, Error: "late", Retryable: true}, engine.ErrStale)

	d = r.apply(engine.ItemFailed{Step: "m", Index: 1, Attempt: 2, Error: "flaky", Retryable: true})
	expect(t, d,
		[]string{`schedule m[1] #3 retry in=` + in + ` item="b"`},
		[]string{`map_item_failed m i=1 a=2 err=flaky`, `step_retrying m i=1 a=3`})
	d = r.apply(engine.ItemCompleted{Step: "m", Index: 1, Attempt: 3, Output: raw(`"B"`)})
	expect(t, d, nil, []string{`map_item_completed m i=1 a=3 data="B"`})

	// A permanent failure of element 0 fails the run and cancels element 2,
	// which is still in flight.
	d = r.apply(engine.ItemFailed{Step: "m", Index: 0, Attempt: 1, Error: "bad", Retryable: false})
	runErr := `step "m" failed: element 0: bad`
	expect(t, d,
		[]string{`cancel m[2]`, `fail-run ` + runErr},
		[]string{`map_item_failed m a=1 err=bad`, `run_failed m err=` + runErr})
	wantStatus(t, r, hephtype.StatusFailed)
	items := r.step("m").Items
	if items[0].Status != hephtype.StepFailed || items[1].Status != hephtype.StepCompleted || items[2].Status != hephtype.StepCancelled {
		t.Errorf("items = %+v", items)
	}
	r.refuse(engine.ItemCompleted{Step: "m", Index: 2, Attempt: 1}, engine.ErrStale)
}

func TestMapItemRetriesExhausted(t *testing.T) {
	g := newGraph(t).step("m", mapOver("", ""), attempts(2)).edge("m", "ok", "done").build()
	r, _ := startRun(t, g, `[1]`)
	r.apply(engine.ItemFailed{Step: "m", Index: 0, Attempt: 1, Error: "e1", Retryable: true})
	d := r.apply(engine.ItemFailed{Step: "m", Index: 0, Attempt: 2, Error: "e2", Retryable: true})
	expect(t, d,
		[]string{`fail-run step "m" failed: element 0: e2`},
		[]string{`map_item_failed m a=2 err=e2`, `run_failed m err=step "m" failed: element 0: e2`})
}

func TestWaitResume(t *testing.T) {
	g := newGraph(t).step("a", events("approve", "reject")).step("b").
		edge("a", "approve", "b").edge("a", "reject", "done").edge("b", "ok", "done").build()
	r, _ := startRun(t, g, `{"amount":5}`)

	d := r.apply(engine.StepWaiting{Step: "a", Attempt: 1})
	expect(t, d, nil, []string{`step_waiting a a=1`})
	wantStatus(t, r, hephtype.StatusWaiting)
	wantSteps(t, r, map[string]hephtype.StepStatus{"a": hephtype.StepWaiting})
	if r.step("a").Timer {
		t.Error("a step without a timeout armed a timer")
	}

	err := r.refuseErr(engine.Resume{Step: "a", Event: "maybe", Payload: raw(`1`)}, engine.ErrUnknownEvent)
	if !strings.Contains(err.Error(), `"maybe"`) || !strings.Contains(err.Error(), "approve, reject") {
		t.Errorf("error %q should name the event and the declared ones", err)
	}
	r.refuse(engine.Resume{Step: "b", Event: "ok"}, engine.ErrNotWaiting)
	r.refuse(engine.Resume{Step: "nope", Event: "ok"}, engine.ErrUnknownStep)
	if err := r.refuseErr(engine.Resume{Step: "bb", Event: "ok"}, engine.ErrUnknownStep); !strings.Contains(err.Error(), `unknown step: "bb"; did you mean "b"?`) {
		t.Errorf("error %q should suggest the step b", err)
	}
	if err := r.refuseErr(engine.Resume{Step: "zzzz", Event: "ok"}, engine.ErrUnknownStep); strings.Contains(err.Error(), "did you mean") {
		t.Errorf("error %q suggests a step nothing like the name", err)
	}
	r.refuse(engine.StepCompleted{Step: "a", Attempt: 1, Event: "approve"}, engine.ErrStale)
	r.refuse(engine.TimerFired{Step: "a"}, engine.ErrStale)

	d = r.apply(engine.Resume{Step: "a", Event: "approve", Payload: raw(`{"by":"ann"}`)})
	expect(t, d,
		[]string{`schedule b #1 in={"input":{"amount":5},"a":{"by":"ann"}}`},
		[]string{`step_resumed a ev=approve data={"by":"ann"}`, `step_scheduled b a=1`})
	wantStatus(t, r, hephtype.StatusRunning)
	if st := r.step("a"); st.Status != hephtype.StepCompleted || st.Event != "approve" || string(st.Output) != `{"by":"ann"}` {
		t.Errorf("a = %+v", st)
	}
	r.refuse(engine.Resume{Step: "a", Event: "approve"}, engine.ErrNotWaiting)

	d = r.apply(engine.StepCompleted{Step: "b", Attempt: 1, Output: raw(`"shipped"`)})
	expect(t, d, []string{`complete-run {"b":"shipped"}`}, []string{`step_completed b a=1 ev=ok data="shipped"`, `run_completed data={"b":"shipped"}`})
	r.refuse(engine.Resume{Step: "a", Event: "approve"}, engine.ErrRunFinished)
}

func TestWaitTimeout(t *testing.T) {
	build := func() *engine.Graph {
		return newGraph(t).step("a", events("approve", "timeout"), waitTimeout(90*time.Minute)).step("b").step("esc").
			edge("a", "approve", "b").edge("a", "timeout", "esc").
			edge("b", "ok", "done").edge("esc", "ok", "done").build()
	}
	waiting := func(t *testing.T) *runT {
		r, _ := startRun(t, build(), `{}`)
		d := r.apply(engine.StepWaiting{Step: "a", Attempt: 1})
		expect(t, d,
			[]string{`start-timer a 1h30m0s`},
			[]string{`step_waiting a a=1`, `timer_started a data="1h30m0s"`})
		if !r.step("a").Timer {
			t.Fatal("timer not recorded as armed")
		}
		wantStatus(t, r, hephtype.StatusWaiting)
		return r
	}

	t.Run("fires", func(t *testing.T) {
		r := waiting(t)
		d := r.apply(engine.TimerFired{Step: "a"})
		expect(t, d,
			[]string{`schedule esc #1 in={"input":{},"a":null}`},
			[]string{`timer_fired a`, `step_completed a a=1 ev=timeout`, `step_skipped b`, `step_scheduled esc a=1`})
		if st := r.step("a"); st.Status != hephtype.StepCompleted || st.Event != "timeout" || st.Timer {
			t.Errorf("a = %+v", st)
		}
		r.refuse(engine.TimerFired{Step: "a"}, engine.ErrStale)
		r.refuse(engine.Resume{Step: "a", Event: "approve"}, engine.ErrNotWaiting)
	})

	t.Run("resumed", func(t *testing.T) {
		r := waiting(t)
		d := r.apply(engine.Resume{Step: "a", Event: "approve", Payload: raw(`{"ok":1}`)})
		expect(t, d,
			[]string{`cancel-timer a`, `schedule b #1 in={"input":{},"a":{"ok":1}}`},
			[]string{`timer_cancelled a`, `step_resumed a ev=approve data={"ok":1}`, `step_scheduled b a=1`, `step_skipped esc`})
		if r.step("a").Timer {
			t.Error("timer still armed after resume")
		}
		// The timer that fires anyway, late, changes nothing.
		r.refuse(engine.TimerFired{Step: "a"}, engine.ErrStale)
	})

	t.Run("resumed with timeout by hand", func(t *testing.T) {
		r := waiting(t)
		d := r.apply(engine.Resume{Step: "a", Event: "timeout", Payload: raw(`"now"`)})
		expect(t, d,
			[]string{`cancel-timer a`, `schedule esc #1 in={"input":{},"a":"now"}`},
			[]string{`timer_cancelled a`, `step_resumed a ev=timeout data="now"`, `step_skipped b`, `step_scheduled esc a=1`})
	})
}

func TestRetries(t *testing.T) {
	g := newGraph(t).step("a", attempts(3)).edge("a", "ok", "done").build()
	r, _ := startRun(t, g, `1`)

	d := r.apply(engine.StepFailed{Step: "a", Attempt: 1, Error: "e1", Retryable: true})
	expect(t, d,
		[]string{`schedule a #2 retry in={"input":1}`},
		[]string{`step_failed a a=1 err=e1`, `step_retrying a a=2`})
	wantStatus(t, r, hephtype.StatusRunning)
	if st := r.step("a"); st.Status != hephtype.StepScheduled || st.Attempt != 2 {
		t.Errorf("a = %+v", st)
	}
	r.refuse(engine.StepCompleted{Step: "a", Attempt: 1}, engine.ErrStale)
	r.refuse(engine.StepFailed{Step: "a", Attempt: 1, Error: "dup", Retryable: true}, engine.ErrStale)

	d = r.apply(engine.StepFailed{Step: "a", Attempt: 2, Error: "e2", Retryable: true})
	expect(t, d,
		[]string{`schedule a #3 retry in={"input":1}`},
		[]string{`step_failed a a=2 err=e2`, `step_retrying a a=3`})

	// Exhausted.
	d = r.apply(engine.StepFailed{Step: "a", Attempt: 3, Error: "e3", Retryable: true})
	expect(t, d,
		[]string{`fail-run step "a" failed: e3`},
		[]string{`step_failed a a=3 err=e3`, `run_failed a err=step "a" failed: e3`})
	wantStatus(t, r, hephtype.StatusFailed)
	wantSteps(t, r, map[string]hephtype.StepStatus{"a": hephtype.StepFailed})

	// MaxAttempts below 1 means one attempt.
	r, _ = startRun(t, newGraph(t).step("a", attempts(0)).edge("a", "ok", "done").build(), `1`)
	d = r.apply(engine.StepFailed{Step: "a", Attempt: 1, Error: "once", Retryable: true})
	expect(t, d, []string{`fail-run step "a" failed: once`}, []string{`step_failed a a=1 err=once`, `run_failed a err=step "a" failed: once`})
}

func TestNonRetryableFailureCancelsTheRest(t *testing.T) {
	g := newGraph(t).
		step("a", attempts(5)).
		step("b").
		step("c", events("ok", "timeout"), waitTimeout(time.Minute)).
		step("m", mapOver("", "")).
		step("w", events("ok")).
		edge("a", "ok", "done").edge("b", "ok", "done").
		edge("c", "ok", "done").edge("c", "timeout", "done").
		edge("m", "ok", "done").edge("w", "ok", "done").build()
	r, d := startRun(t, g, `[1,2]`)
	if len(d.Commands) != 6 {
		t.Fatalf("start: %v", showCommands(d.Commands))
	}
	r.apply(engine.StepWaiting{Step: "c", Attempt: 1})
	r.apply(engine.StepWaiting{Step: "w", Attempt: 1})
	r.apply(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 1, Output: raw(`0`)})

	d = r.apply(engine.StepFailed{Step: "a", Attempt: 1, Error: "fatal", Retryable: false})
	runErr := `step "a" failed: fatal`
	expect(t, d,
		[]string{`cancel b`, `cancel-timer c`, `cancel m[1]`, `fail-run ` + runErr},
		[]string{
			`step_failed a a=1 err=fatal`,
			`step_cancelled b`,
			`timer_cancelled c`, `step_cancelled c`,
			`step_cancelled m`,
			`step_cancelled w`,
			`run_failed a err=` + runErr,
		})
	wantStatus(t, r, hephtype.StatusFailed)
	if r.s.Error != runErr {
		t.Errorf("run error = %q", r.s.Error)
	}
	wantSteps(t, r, map[string]hephtype.StepStatus{
		"a": hephtype.StepFailed, "b": hephtype.StepCancelled, "c": hephtype.StepCancelled,
		"m": hephtype.StepCancelled, "w": hephtype.StepCancelled,
	})
	if r.step("c").Timer {
		t.Error("c's timer is still armed")
	}
	// Everything after is stale or refused.
	r.refuse(engine.StepCompleted{Step: "b", Attempt: 1}, engine.ErrStale)
	r.refuse(engine.ItemCompleted{Step: "m", Index: 1, Attempt: 1}, engine.ErrStale)
	r.refuse(engine.TimerFired{Step: "c"}, engine.ErrStale)
	r.refuse(engine.Resume{Step: "w", Event: "ok"}, engine.ErrRunFinished)
	r.refuse(engine.Cancel{Reason: "late"}, engine.ErrRunFinished)
}

func TestFailureRouting(t *testing.T) {
	g := newGraph(t).step("a", events("ok", "failed"), attempts(2)).step("b").step("comp").
		edge("a", "ok", "b").edge("a", "failed", "comp").
		edge("b", "ok", "done").edge("comp", "ok", "done").build()
	r, _ := startRun(t, g, `{"card":"x"}`)
	r.apply(engine.StepFailed{Step: "a", Attempt: 1, Error: "declined", Retryable: true})
	d := r.apply(engine.StepFailed{Step: "a", Attempt: 2, Error: "declined", Retryable: true})
	expect(t, d,
		[]string{`schedule comp #1 in={"input":{"card":"x"},"a":{"error":"declined"}}`},
		[]string{
			`step_failed a a=2 err=declined`,
			`step_completed a a=2 ev=failed data={"error":"declined"} err=declined`,
			`step_skipped b`,
			`step_scheduled comp a=1`,
		})
	wantStatus(t, r, hephtype.StatusRunning)
	if st := r.step("a"); st.Status != hephtype.StepCompleted || st.Event != "failed" || string(st.Output) != `{"error":"declined"}` {
		t.Errorf("a = %+v", st)
	}
	d = r.apply(engine.StepCompleted{Step: "comp", Attempt: 1, Output: raw(`"refunded"`)})
	expect(t, d, []string{`complete-run {"comp":"refunded"}`}, []string{`step_completed comp a=1 ev=ok data="refunded"`, `run_completed data={"comp":"refunded"}`})

	// A non-retryable failure routes at once.
	r, _ = startRun(t, g, `{}`)
	d = r.apply(engine.StepFailed{Step: "a", Attempt: 1, Error: "no such card"})
	expect(t, d,
		[]string{`schedule comp #1 in={"input":{},"a":{"error":"no such card"}}`},
		[]string{`step_failed a a=1 err=no such card`, `step_completed a a=1 ev=failed data={"error":"no such card"} err=no such card`, `step_skipped b`, `step_scheduled comp a=1`})

	// A map step's failure routes too; the other elements are cancelled.
	g = newGraph(t).step("m", mapOver("", ""), events("ok", "failed")).step("n").
		edge("m", "ok", "n").edge("m", "failed", "done").edge("n", "ok", "done").build()
	r, _ = startRun(t, g, `[1,2]`)
	d = r.apply(engine.ItemFailed{Step: "m", Index: 1, Attempt: 1, Error: "x"})
	expect(t, d,
		[]string{`cancel m[0]`, `complete-run {"m":{"error":"element 1: x"}}`},
		[]string{
			`map_item_failed m i=1 a=1 err=x`,
			`step_completed m a=1 ev=failed data={"error":"element 1: x"} err=element 1: x`,
			`step_skipped n`,
			`run_completed data={"m":{"error":"element 1: x"}}`,
		})
}

func TestUndeclaredEventFailsTheStep(t *testing.T) {
	g := newGraph(t).step("a", events("ok", "other"), attempts(3)).step("b").
		edge("a", "ok", "b").edge("a", "other", "done").edge("b", "ok", "done").build()
	r, _ := startRun(t, g, `{}`)
	d := r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Event: "surprise", Output: raw(`1`)})
	msg := `step "a" emitted event "surprise", which it does not declare (declared: ok, other)`
	// Permanent: no retry although attempts remain.
	expect(t, d,
		[]string{`fail-run step "a" failed: ` + msg},
		[]string{`step_failed a a=1 err=` + msg, `run_failed a err=step "a" failed: ` + msg})
	wantSteps(t, r, map[string]hephtype.StepStatus{"a": hephtype.StepFailed, "b": hephtype.StepPending})

	// Routed: the step takes its failed edge.
	g = newGraph(t).step("a", events("ok", "failed")).step("b").
		edge("a", "ok", "done").edge("a", "failed", "b").edge("b", "ok", "done").build()
	r, _ = startRun(t, g, `{}`)
	d = r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Event: "surprise"})
	msg = `step "a" emitted event "surprise", which it does not declare (declared: ok, failed)`
	errJSON, _ := json.Marshal(map[string]string{"error": msg})
	expect(t, d,
		[]string{`schedule b #1 in={"input":{},"a":` + string(errJSON) + `}`},
		[]string{`step_failed a a=1 err=` + msg, `step_completed a a=1 ev=failed data=` + string(errJSON) + ` err=` + msg, `step_scheduled b a=1`})
}

func TestCancel(t *testing.T) {
	g := newGraph(t).
		step("a").
		step("b", events("ok", "timeout"), waitTimeout(time.Minute)).
		step("m", mapOver("", "")).
		step("after").
		edge("a", "ok", "after").edge("b", "ok", "done").edge("b", "timeout", "done").
		edge("m", "ok", "done").edge("after", "ok", "done").build()
	r, _ := startRun(t, g, `[1,2,3]`)
	r.apply(engine.StepWaiting{Step: "b", Attempt: 1})
	r.apply(engine.ItemCompleted{Step: "m", Index: 1, Attempt: 1})

	d := r.apply(engine.Cancel{Reason: "user asked"})
	expect(t, d,
		[]string{`cancel a`, `cancel-timer b`, `cancel m[0]`, `cancel m[2]`, `cancel-run user asked`},
		[]string{`step_cancelled a`, `timer_cancelled b`, `step_cancelled b`, `step_cancelled m`, `run_cancelled err=user asked`})
	wantStatus(t, r, hephtype.StatusCancelled)
	if r.s.Error != "user asked" {
		t.Errorf("run error = %q", r.s.Error)
	}
	wantSteps(t, r, map[string]hephtype.StepStatus{
		"a": hephtype.StepCancelled, "b": hephtype.StepCancelled, "m": hephtype.StepCancelled, "after": hephtype.StepPending,
	})

	r.refuse(engine.Cancel{Reason: "again"}, engine.ErrRunFinished)
	r.refuse(engine.Resume{Step: "b", Event: "ok"}, engine.ErrRunFinished)
	r.refuse(engine.StepCompleted{Step: "a", Attempt: 1}, engine.ErrStale)
	r.refuse(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 1}, engine.ErrStale)
	r.refuse(engine.TimerFired{Step: "b"}, engine.ErrStale)

	// Cancelling a run that is waiting.
	r, _ = startRun(t, g, `[]`)
	r.apply(engine.StepCompleted{Step: "a", Attempt: 1})
	r.apply(engine.StepWaiting{Step: "b", Attempt: 1})
	r.apply(engine.StepCompleted{Step: "after", Attempt: 1})
	wantStatus(t, r, hephtype.StatusWaiting)
	d = r.apply(engine.Cancel{})
	expect(t, d, []string{`cancel-timer b`, `cancel-run `}, []string{`timer_cancelled b`, `step_cancelled b`, `run_cancelled`})
}

func TestCancelFinishedRun(t *testing.T) {
	g := newGraph(t).step("a").edge("a", "ok", "done").build()
	r, _ := startRun(t, g, `{}`)
	r.apply(engine.StepCompleted{Step: "a", Attempt: 1})
	wantStatus(t, r, hephtype.StatusCompleted)
	r.refuse(engine.Cancel{Reason: "too late"}, engine.ErrRunFinished)

	r, _ = startRun(t, g, `{}`)
	r.apply(engine.StepFailed{Step: "a", Attempt: 1, Error: "x"})
	wantStatus(t, r, hephtype.StatusFailed)
	r.refuse(engine.Cancel{Reason: "too late"}, engine.ErrRunFinished)
}

func TestStaleReports(t *testing.T) {
	g := newGraph(t).step("a").step("m", mapOver("", "")).step("b").
		edge("a", "ok", "b").edge("m", "ok", "done").edge("b", "ok", "done").build()
	r, _ := startRun(t, g, `[1]`)

	r.refuse(engine.StepCompleted{Step: "a", Attempt: 2}, engine.ErrStale)
	r.refuse(engine.StepCompleted{Step: "a", Attempt: 0}, engine.ErrStale)
	r.refuse(engine.StepFailed{Step: "a", Attempt: 2, Error: "x"}, engine.ErrStale)
	r.refuse(engine.StepWaiting{Step: "a", Attempt: 2}, engine.ErrStale)
	r.refuse(engine.StepCompleted{Step: "b", Attempt: 1}, engine.ErrStale) // pending, never scheduled
	r.refuse(engine.StepCompleted{Step: "m", Attempt: 1}, engine.ErrStale) // a map step completes by its elements
	r.refuse(engine.StepCompleted{Step: "zz", Attempt: 1}, engine.ErrUnknownStep)
	r.refuse(engine.ItemCompleted{Step: "a", Index: 0, Attempt: 1}, engine.ErrNotMap)
	r.refuse(engine.ItemFailed{Step: "a", Index: 0, Attempt: 1}, engine.ErrNotMap)
	r.refuse(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 2}, engine.ErrStale)
	r.refuse(engine.ItemCompleted{Step: "zz", Index: 0, Attempt: 1}, engine.ErrUnknownStep)
	r.refuse(engine.TimerFired{Step: "a"}, engine.ErrStale)
	r.refuse(engine.TimerFired{Step: "zz"}, engine.ErrUnknownStep)

	r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`1`)})
	// Duplicate completion of a finished step.
	r.refuse(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`2`)}, engine.ErrStale)
	r.refuse(engine.StepFailed{Step: "a", Attempt: 1, Error: "x", Retryable: true}, engine.ErrStale)
	r.refuse(engine.StepWaiting{Step: "a", Attempt: 1}, engine.ErrStale)
	if out := r.step("a").Output; string(out) != `1` {
		t.Errorf("a's output changed to %s", out)
	}
}

func TestRunOutput(t *testing.T) {
	// a's ok leads to b (and to done): a continues, so its output is not the
	// run's. c's "stop" leads nowhere but done, and b's ok too.
	g := newGraph(t).step("a").step("b").step("c", events("more", "stop")).step("d").
		edge("a", "ok", "b", "done").edge("b", "ok", "done").
		edge("c", "more", "d").edge("c", "stop", "done").edge("d", "ok", "done").build()
	r, _ := startRun(t, g, `{}`)
	r.apply(engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`"A"`)})
	d := r.apply(engine.StepCompleted{Step: "c", Attempt: 1, Event: "stop", Output: raw(`"C"`)})
	expect(t, d, nil, []string{`step_completed c a=1 ev=stop data="C"`, `step_skipped d`})
	d = r.apply(engine.StepCompleted{Step: "b", Attempt: 1})
	expect(t, d,
		[]string{`complete-run {"b":null,"c":"C"}`},
		[]string{`step_completed b a=1 ev=ok`, `run_completed data={"b":null,"c":"C"}`})
	if string(r.s.Output) != `{"b":null,"c":"C"}` {
		t.Errorf("run output = %s", r.s.Output)
	}
}

// TestApplyDoesNotTouchItsInput applies many different events to one state
// and checks, by JSON snapshot, that the state stays as it was; and that the
// decision's state shares no mutable memory with it.
func TestApplyDoesNotTouchItsInput(t *testing.T) {
	g := newGraph(t).
		step("a", attempts(2)).
		step("w", events("ok", "timeout"), waitTimeout(time.Second)).
		step("m", mapOver("", ""), attempts(2)).
		step("j").
		edge("a", "ok", "j").edge("w", "ok", "j").edge("w", "timeout", "j").
		edge("m", "ok", "j").edge("j", "ok", "done").build()
	r, _ := startRun(t, g, `[1,2]`)
	r.apply(engine.StepWaiting{Step: "w", Attempt: 1})
	r.apply(engine.ItemCompleted{Step: "m", Index: 0, Attempt: 1, Output: raw(`"x"`)})
	s := r.s
	before := snapshot(t, s)

	evs := []engine.Event{
		engine.StepCompleted{Step: "a", Attempt: 1, Output: raw(`1`)},
		engine.StepCompleted{Step: "a", Attempt: 1, Event: "bogus"},
		engine.StepFailed{Step: "a", Attempt: 1, Error: "x", Retryable: true},
		engine.StepFailed{Step: "a", Attempt: 1, Error: "x"},
		engine.ItemCompleted{Step: "m", Index: 1, Attempt: 1, Output: raw(`"y"`)},
		engine.ItemFailed{Step: "m", Index: 1, Attempt: 1, Error: "x", Retryable: true},
		engine.ItemFailed{Step: "m", Index: 1, Attempt: 1, Error: "x"},
		engine.Resume{Step: "w", Event: "ok", Payload: raw(`{}`)},
		engine.Resume{Step: "w", Event: "nope"},
		engine.TimerFired{Step: "w"},
		engine.Cancel{Reason: "r"},
	}
	for _, ev := range evs {
		d, err := engine.Apply(g, s, ev)
		if got := snapshot(t, s); got != before {
			t.Fatalf("Apply(%#v) modified its input:\nbefore %s\nafter  %s", ev, before, got)
		}
		if err != nil {
			continue
		}
		// Scribble over the new state: the old one must not see it.
		ns := d.State
		for i := range ns.Steps {
			ns.Steps[i].Status = "scribbled"
			ns.Steps[i].Attempt = 99
			for k := range ns.Steps[i].In {
				ns.Steps[i].In[k] = 42
			}
			for k := range ns.Steps[i].Items {
				ns.Steps[i].Items[k].Status = "scribbled"
				ns.Steps[i].Items[k].Attempt = 99
			}
		}
		ns.Status = "scribbled"
		if got := snapshot(t, s); got != before {
			t.Fatalf("the state from Apply(%#v) shares memory with its input:\nbefore %s\nafter  %s", ev, before, got)
		}
	}
	// Start and the refused event on a finished run leave nothing behind
	// either: the same Apply twice gives the same decision.
	d1, err1 := engine.Apply(g, s, evs[0])
	d2, err2 := engine.Apply(g, s, evs[0])
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if snapshot(t, d1.State) != snapshot(t, d2.State) || !slices.Equal(showCommands(d1.Commands), showCommands(d2.Commands)) ||
		!slices.Equal(showHistory(d1.History), showHistory(d2.History)) {
		t.Error("the same Apply twice gave different decisions")
	}
}

// TestStateJSONRoundTrip encodes the state after every event, decodes it, and
// checks that Apply continues identically from the decoded copy.
func TestStateJSONRoundTrip(t *testing.T) {
	g := newGraph(t).
		step("a", attempts(2)).
		step("m", mapOver("a", "items"), attempts(2)).
		step("w", events("ok", "timeout"), waitTimeout(time.Hour)).
		step("x", events("ok", "failed")).
		step("z").
		edge("a", "ok", "m").edge("m", "ok", "w").
		edge("w", "ok", "x").edge("w", "timeout", "done").
		edge("x", "ok", "z").edge("x", "failed", "z").edge("z", "ok", "done").build()
	r, _ := startRun(t, g, `{"id":"r1"}`)
	evs := []engine.Event{
		engine.StepFailed{Step: "a", Attempt: 1, Error: "e", Retryable: true},
		engine.StepCompleted{Step: "a", Attempt: 2, Output: raw(`{"items":[1,2]}`)},
		engine.ItemCompleted{Step: "m", Index: 1, Attempt: 1, Output: raw(`"two"`)},
		engine.ItemFailed{Step: "m", Index: 0, Attempt: 1, Error: "e", Retryable: true},
		engine.ItemCompleted{Step: "m", Index: 0, Attempt: 2, Output: raw(`"one"`)},
		engine.StepWaiting{Step: "w", Attempt: 1},
		engine.Resume{Step: "w", Event: "ok", Payload: raw(`{"p":1}`)},
		engine.StepFailed{Step: "x", Attempt: 1, Error: "boom"},
		engine.StepCompleted{Step: "z", Attempt: 1, Output: raw(`"Z"`)},
	}
	for _, ev := range evs {
		enc, err := json.Marshal(r.s)
		if err != nil {
			t.Fatal(err)
		}
		var decoded engine.State
		if err := json.Unmarshal(enc, &decoded); err != nil {
			t.Fatalf("state does not decode: %v\n%s", err, enc)
		}
		if again := snapshot(t, &decoded); again != string(enc) {
			t.Fatalf("state changed in a JSON round trip:\nbefore %s\nafter  %s", enc, again)
		}
		want, errWant := engine.Apply(g, r.s, ev)
		got, errGot := engine.Apply(g, &decoded, ev)
		if errWant != nil || errGot != nil {
			t.Fatalf("Apply(%#v): original %v, decoded %v", ev, errWant, errGot)
		}
		sameLines(t, "commands from the decoded state", showCommands(got.Commands), showCommands(want.Commands))
		sameLines(t, "history from the decoded state", showHistory(got.History), showHistory(want.History))
		if a, b := snapshot(t, got.State), snapshot(t, want.State); a != b {
			t.Fatalf("Apply(%#v) from the decoded state:\n%s\nwant\n%s", ev, a, b)
		}
		r.s = want.State
	}
	wantStatus(t, r, hephtype.StatusCompleted)
	if string(r.s.Output) != `{"z":"Z"}` {
		t.Errorf("run output = %s", r.s.Output)
	}
}

// TestFlowCompiledGraph drives a graph compiled by package flow: the seed's
// order flow (explicit start, events, fan-out, fan-in, Done).
func TestFlowCompiledGraph(t *testing.T) {
	nop := func(ctx context.Context, in any) (any, error) { return nil, nil }
	b := flow.New("order").Start("validate")
	flow.EventStep(b, "validate", func(ctx context.Context, in any) (flow.Result[any], error) { return flow.Ok[any](nil), nil },
		flow.Events("valid", "invalid"))
	flow.Step(b, "charge", nop, flow.Retry(flow.RetryPolicy{MaxAttempts: 2}))
	flow.Step(b, "reserve", nop)
	flow.Step(b, "ship", nop)
	f, err := b.
		Edge("validate", "valid", "charge", "reserve").
		Edge("validate", "invalid", flow.Done).
		Edge("charge", flow.EventOK, "ship").
		Edge("reserve", flow.EventOK, "ship").
		Edge("ship", flow.EventOK, flow.Done).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	g := flowgraph.Of(f)
	r, d := startRun(t, g, `{"id":"42"}`)
	expect(t, d, []string{`schedule validate #1 in={"input":{"id":"42"}}`}, []string{`run_started data={"id":"42"}`, `step_scheduled validate a=1`})
	d = r.apply(engine.StepCompleted{Step: "validate", Attempt: 1, Event: "valid", Output: raw(`{"id":"42"}`)})
	expect(t, d,
		[]string{`schedule charge #1 in={"input":{"id":"42"},"validate":{"id":"42"}}`, `schedule reserve #1 in={"input":{"id":"42"},"validate":{"id":"42"}}`},
		[]string{`step_completed validate a=1 ev=valid data={"id":"42"}`, `step_scheduled charge a=1`, `step_scheduled reserve a=1`})
	d = r.apply(engine.StepFailed{Step: "charge", Attempt: 1, Error: "503", Retryable: true})
	expect(t, d,
		[]string{`schedule charge #2 retry in={"input":{"id":"42"},"validate":{"id":"42"}}`},
		[]string{`step_failed charge a=1 err=503`, `step_retrying charge a=2`})
	r.apply(engine.StepCompleted{Step: "reserve", Attempt: 1, Output: raw(`{"warehouse":"north"}`)})
	d = r.apply(engine.StepCompleted{Step: "charge", Attempt: 2, Output: raw(`{"charge_id":"ch_42"}`)})
	expect(t, d,
		[]string{`schedule ship #1 in={"input":{"id":"42"},"charge":{"charge_id":"ch_42"},"reserve":{"warehouse":"north"},"validate":{"id":"42"}}`},
		[]string{`step_completed charge a=2 ev=ok data={"charge_id":"ch_42"}`, `step_scheduled ship a=1`})
	d = r.apply(engine.StepCompleted{Step: "ship", Attempt: 1, Output: raw(`{"tracking":"north/ch_42"}`)})
	expect(t, d, []string{`complete-run {"ship":{"tracking":"north/ch_42"}}`},
		[]string{`step_completed ship a=1 ev=ok data={"tracking":"north/ch_42"}`, `run_completed data={"ship":{"tracking":"north/ch_42"}}`})

	// The invalid branch skips everything else.
	r, _ = startRun(t, g, `{"id":"43"}`)
	d = r.apply(engine.StepCompleted{Step: "validate", Attempt: 1, Event: "invalid", Output: raw(`"no"`)})
	expect(t, d, []string{`complete-run {"validate":"no"}`}, []string{
		`step_completed validate a=1 ev=invalid data="no"`,
		`step_skipped charge`, `step_skipped reserve`, `step_skipped ship`,
		`run_completed data={"validate":"no"}`,
	})
	r.refuse(engine.Cancel{}, engine.ErrRunFinished)
}
