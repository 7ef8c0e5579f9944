package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func attrs(kv ...any) map[string]store.Attr {
	m := map[string]store.Attr{}
	for i := 0; i < len(kv); i += 3 {
		m[kv[i].(string)] = store.Attr{Type: kv[i+1].(store.AttrType), Value: kv[i+2]}
	}
	return m
}

func cond(name string, t store.AttrType, op store.AttrOp, vals ...any) store.AttrCond {
	return store.AttrCond{Name: name, Type: t, Op: op, Values: vals}
}

// testSearchAttributes: a run's search attributes are stored at create,
// upserted by updates (a refused update writes none), read back with the
// run, filtered by every operator of every type, and deleted with the run.
func testSearchAttributes(t *testing.T, h *harness) {
	ctx := t.Context()
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	a := newRun("a")
	a.SearchAttributes = attrs("amount", store.AttrInt, int64(150), "region", store.AttrKeywordList, []string{"eu", "us"},
		"score", store.AttrFloat, 2.5, "vip", store.AttrBool, true, "updated", store.AttrTime, day.Add(-time.Hour),
		"customer", store.AttrKeyword, "acme")
	b := newRun("b")
	b.SearchAttributes = attrs("amount", store.AttrInt, int64(50), "region", store.AttrKeywordList, []string{"apac"},
		"vip", store.AttrBool, false, "updated", store.AttrTime, day.Add(time.Nanosecond*1500))
	c := newRun("c")
	h.create(at(0), a, b)
	h.create(at(time.Second), c)
	got, err := h.s.GetRun(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	want := store.NormAttrs(b.SearchAttributes)
	diff(t, "b's attributes", want, got.SearchAttributes)
	// Upsert: replaces amount, adds note; the others stay.
	res := h.mustUpdate(at(2*time.Second), "b", nil, &store.Update{History: marker("u"),
		SearchAttributes: attrs("amount", store.AttrInt, int64(500), "note", store.AttrString, "late")})
	want["amount"] = store.Attr{Type: store.AttrInt, Value: int64(500)}
	want["note"] = store.Attr{Type: store.AttrString, Value: "late"}
	diff(t, "b's attributes in the result", want, res.Run.SearchAttributes)
	if got, err = h.s.GetRun(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	diff(t, "b's attributes after the upsert", want, got.SearchAttributes)
	// An update that leaves them keeps them; a bad one is refused.
	h.mustUpdate(at(3*time.Second), "b", nil, &store.Update{History: marker("v")})
	bad := h.update(at(3*time.Second), "b", nil, &store.Update{SearchAttributes: attrs("amount", store.AttrInt, "x")})
	if !errors.Is(bad.Err, hephtype.ErrInvalidInput) {
		t.Fatalf("update with a string int: %v, want ErrInvalidInput", bad.Err)
	}
	for _, tc := range []struct {
		name string
		f    store.AttrFilter
		want []string
	}{
		{"int >", store.AttrFilter{cond("amount", store.AttrInt, store.OpGt, int64(100))}, []string{"b", "a"}},
		{"int <=", store.AttrFilter{cond("amount", store.AttrInt, store.OpLe, int64(150))}, []string{"a"}},
		{"int range", store.AttrFilter{cond("amount", store.AttrInt, store.OpGt, int64(100)), cond("amount", store.AttrInt, store.OpLt, int64(200))}, []string{"a"}},
		{"int !=", store.AttrFilter{cond("amount", store.AttrInt, store.OpNe, int64(500))}, []string{"a"}},
		{"list has", store.AttrFilter{cond("region", store.AttrKeywordList, store.OpEq, "us")}, []string{"a"}},
		{"list in", store.AttrFilter{cond("region", store.AttrKeywordList, store.OpIn, "apac", "us")}, []string{"b", "a"}},
		{"list has none", store.AttrFilter{cond("region", store.AttrKeywordList, store.OpNe, "eu")}, []string{"b"}},
		{"float", store.AttrFilter{cond("score", store.AttrFloat, store.OpGe, 2.5)}, []string{"a"}},
		{"bool", store.AttrFilter{cond("vip", store.AttrBool, store.OpEq, false)}, []string{"b"}},
		{"time <", store.AttrFilter{cond("updated", store.AttrTime, store.OpLt, day)}, []string{"a"}},
		{"time >= to the microsecond", store.AttrFilter{cond("updated", store.AttrTime, store.OpGe, day.Add(time.Microsecond))}, []string{"b"}},
		{"keyword in", store.AttrFilter{cond("customer", store.AttrKeyword, store.OpIn, "acme", "x")}, []string{"a"}},
		{"string", store.AttrFilter{cond("note", store.AttrString, store.OpEq, "late")}, []string{"b"}},
		{"string order", store.AttrFilter{cond("note", store.AttrString, store.OpGt, "a")}, []string{"b"}},
		{"another type", store.AttrFilter{cond("amount", store.AttrFloat, store.OpGt, 1.0)}, nil},
		{"absent", store.AttrFilter{cond("nope", store.AttrInt, store.OpNe, int64(1))}, nil},
	} {
		diff(t, tc.name, tc.want, ids(h.list(store.ListRunsParams{Attrs: tc.f}).Runs))
	}
	if _, err := h.s.ListRuns(ctx, &store.ListRunsParams{Attrs: store.AttrFilter{cond("vip", store.AttrBool, store.OpLt, true)}}); !errors.Is(err, hephtype.ErrInvalidInput) {
		t.Fatalf("bool <: %v, want ErrInvalidInput", err)
	}
	// Deleted with the run: a new run of the same id has none.
	h.mustUpdate(at(4*time.Second), "a", nil, &store.Update{Status: hephtype.StatusCompleted})
	if _, err := h.s.DeleteRun(ctx, &store.DeleteRunParams{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	h.create(at(5*time.Second), newRun("a"))
	diff(t, "after delete", []string(nil), ids(h.list(store.ListRunsParams{Attrs: store.AttrFilter{cond("score", store.AttrFloat, store.OpGe, 0.0)}}).Runs))
}

// testSearchAttributesFenced: an upsert rides in its change: a change whose
// lease is lost writes no attribute, and the fenced one writes it once.
func testSearchAttributesFenced(t *testing.T, h *harness) {
	r := withTasks(newRun("f"), task("q", "s", at(0)))
	h.create(at(0), r)
	tk := h.claim(at(time.Second), "w", 1, time.Minute, "q")[0]
	lease := tk.Lease()
	stale := lease
	stale.Token++
	up := &store.Update{History: marker("s"), SearchAttributes: attrs("n", store.AttrInt, int64(1))}
	if res := h.update(at(2*time.Second), "f", &stale, up); !errors.Is(res.Err, store.ErrLeaseLost) {
		t.Fatalf("stale fence: %v, want ErrLeaseLost", res.Err)
	}
	has := store.ListRunsParams{Attrs: store.AttrFilter{cond("n", store.AttrInt, store.OpEq, int64(1))}}
	diff(t, "after the refused upsert", []string(nil), ids(h.list(has).Runs))
	h.mustUpdate(at(3*time.Second), "f", &lease, up)
	if res := h.update(at(4*time.Second), "f", &lease, up); !errors.Is(res.Err, store.ErrLeaseLost) {
		t.Fatalf("second commit: %v, want ErrLeaseLost", res.Err)
	}
	diff(t, "after the upsert", []string{"f"}, ids(h.list(has).Runs))
}

// testSearchAttributesProperty: a list with a random filter returns
// exactly the runs that AttrFilter.Matches keeps of all runs, over random
// runs with random attributes, set at create and upserted.
func testSearchAttributesProperty(t *testing.T, h *harness) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	all := map[string]map[string]store.Attr{}
	for i := range 40 {
		n := newRun(fmt.Sprintf("p%02d", i))
		n.SearchAttributes = randAttrs(rng)
		res := h.create(at(time.Duration(i)*time.Second), n)
		all[n.ID] = res[0].Run.SearchAttributes
	}
	for i := range 20 {
		id := fmt.Sprintf("p%02d", rng.IntN(40))
		res := h.mustUpdate(at(time.Minute+time.Duration(i)*time.Second), id, nil, &store.Update{SearchAttributes: randAttrs(rng)})
		all[id] = res.Run.SearchAttributes
	}
	for i := range 150 {
		f := randFilter(rng)
		var want []string
		for id, m := range all {
			if f.Matches(m) {
				want = append(want, id)
			}
		}
		slices.Sort(want)
		slices.Reverse(want) // created in id order: the list is newest first
		diff(t, fmt.Sprintf("filter %d %+v", i, f), want, ids(h.list(store.ListRunsParams{Attrs: f, Limit: 1000}).Runs))
	}
}

// The attributes of the property test: few names and values, so that
// filters meet runs.
var propAttrs = []struct {
	name string
	t    store.AttrType
}{{"i", store.AttrInt}, {"f", store.AttrFloat}, {"s", store.AttrString}, {"k", store.AttrKeyword},
	{"l", store.AttrKeywordList}, {"b", store.AttrBool}, {"t", store.AttrTime}, {"x", store.AttrInt}}

func randValue(rng *rand.Rand, t store.AttrType) any {
	words := []string{"", "a", "b", "eu", "us", "Z", "ü"}
	switch t {
	case store.AttrInt:
		return int64(rng.IntN(7) - 3)
	case store.AttrFloat:
		return float64(rng.IntN(7)-3) / 2
	case store.AttrString, store.AttrKeyword:
		return words[rng.IntN(len(words))]
	case store.AttrKeywordList:
		l := []string{}
		for range rng.IntN(3) {
			l = append(l, words[rng.IntN(len(words))])
		}
		return l
	case store.AttrBool:
		return rng.IntN(2) == 0
	}
	return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(5)-2) * time.Microsecond)
}

func randAttrs(rng *rand.Rand) map[string]store.Attr {
	m := map[string]store.Attr{}
	for _, a := range propAttrs {
		if rng.IntN(3) > 0 {
			t := a.t
			if a.name == "x" && rng.IntN(2) == 0 {
				t = store.AttrKeyword // one name under two types
			}
			m[a.name] = store.Attr{Type: t, Value: randValue(rng, t)}
		}
	}
	return m
}

func randFilter(rng *rand.Rand) store.AttrFilter {
	var f store.AttrFilter
	for range 1 + rng.IntN(2) {
		a := propAttrs[rng.IntN(len(propAttrs))]
		et := a.t
		if et == store.AttrKeywordList {
			et = store.AttrKeyword
		}
		ops := []store.AttrOp{store.OpEq, store.OpNe, store.OpIn}
		if a.t.Ordered() {
			ops = append(ops, store.OpLt, store.OpLe, store.OpGt, store.OpGe)
		}
		c := store.AttrCond{Name: a.name, Type: a.t, Op: ops[rng.IntN(len(ops))]}
		n := 1
		if c.Op == store.OpIn {
			n = 1 + rng.IntN(3)
		}
		for range n {
			c.Values = append(c.Values, randValue(rng, et))
		}
		f = append(f, c)
	}
	return f
}
