package dag_test

import (
	"testing"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/hephaestus-go/hephaestus/internal/dag"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// closure is the naive answer: reach[a][b] when a path of one or more
// edges leads from a to b.
func closure(succ [][]int) [][]bool {
	n := len(succ)
	reach := make([][]bool, n)
	for a := range n {
		reach[a] = make([]bool, n)
		stack := append([]int(nil), succ[a]...)
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if !reach[a][x] {
				reach[a][x] = true
				stack = append(stack, succ[x]...)
			}
		}
	}
	return reach
}

// graphOf draws a graph of up to 12 nodes; cyclic when cycles.
func graphOf(t *rapid.T, cycles bool) [][]int {
	n := rapid.IntRange(1, 12).Draw(t, "n")
	succ := make([][]int, n)
	edges := rapid.IntRange(0, 3*n).Draw(t, "edges")
	for range edges {
		a := rapid.IntRange(0, n-1).Draw(t, "from")
		b := rapid.IntRange(0, n-1).Draw(t, "to")
		if !cycles && a >= b {
			continue
		}
		succ[a] = append(succ[a], b)
	}
	return succ
}

// Leads answers as the transitive closure does, on graphs with and
// without cycles, and the positions order every edge.
func TestLeadsMatchesClosure(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		succ := graphOf(t, rapid.Bool().Draw(t, "cycles"))
		n := len(succ)
		reach := closure(succ)
		g := dag.New(succ)
		for a := range n {
			for _, b := range succ[a] {
				if g.Pos(a) > g.Pos(b) {
					t.Fatalf("edge %d->%d goes from position %d back to %d", a, b, g.Pos(a), g.Pos(b))
				}
				if g.Pos(a) == g.Pos(b) && !reach[b][a] {
					t.Fatalf("edge %d->%d within one position, but no cycle", a, b)
				}
			}
		}
		var qs []dag.Query
		for range rapid.IntRange(0, 20).Draw(t, "queries") {
			qs = append(qs, dag.Query{From: rapid.IntRange(0, n-1).Draw(t, "a"), To: rapid.IntRange(0, n-1).Draw(t, "b")})
		}
		for i, got := range g.Leads(qs) {
			if want := reach[qs[i].From][qs[i].To]; got != want {
				t.Fatalf("Leads(%d -> %d) = %v, want %v (graph %v)", qs[i].From, qs[i].To, got, want, succ)
			}
		}
		acyclic := true
		for a := range n {
			acyclic = acyclic && !reach[a][a]
		}
		if g.Acyclic() != acyclic {
			t.Fatalf("Acyclic() = %v, want %v (graph %v)", g.Acyclic(), acyclic, succ)
		}
	})
}

// Common tells whether the starts share a node they all reach (each
// reaching itself), as the intersection of their descendants does.
func TestCommonMatchesIntersection(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		succ := graphOf(t, false)
		n := len(succ)
		reach := closure(succ)
		perm := rapid.Permutation(func() []int {
			s := make([]int, n)
			for i := range s {
				s[i] = i
			}
			return s
		}()).Draw(t, "perm")
		starts := perm[:rapid.IntRange(1, n).Draw(t, "k")]
		want := false
		for x := range n {
			all := true
			for _, s := range starts {
				all = all && (s == x || reach[s][x])
			}
			want = want || all
		}
		if got := dag.New(succ).Common(starts); got != want {
			t.Fatalf("Common(%v) = %v, want %v (graph %v)", starts, got, want, succ)
		}
	})
}

// A long chain and a wide fan: the searches are bounded, so these finish
// in one pass (no timing is asserted; a quadratic search would still pass,
// only slowly: the benchmarks of packages flow and flowdoc measure it).
func TestLargeGraphs(t *testing.T) {
	const n = 30000
	chain := make([][]int, n)
	for i := range n - 1 {
		chain[i] = []int{i + 1}
	}
	g := dag.New(chain)
	qs := []dag.Query{{From: 0, To: n - 1}, {From: n - 1, To: 0}, {From: 5, To: 6}}
	if got := g.Leads(qs); !got[0] || got[1] || !got[2] {
		t.Errorf("chain: Leads = %v", got)
	}
	if !g.Acyclic() || !g.Common([]int{0, n / 2}) {
		t.Error("chain: not acyclic, or 0 and n/2 share no descendant")
	}
	fan := make([][]int, n)
	for i := 1; i < n-1; i++ {
		fan[0] = append(fan[0], i)
		fan[i] = []int{n - 1}
	}
	g = dag.New(fan)
	if !g.Common(fan[0]) {
		t.Error("fan: the branches share no descendant")
	}
	fan[5] = nil
	if dag.New(fan).Common(fan[0]) {
		t.Error("fan: a branch that ends alone still converges")
	}
}
