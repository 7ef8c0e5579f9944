// Package dag answers reachability questions over the graph of a flow's
// steps in time and memory near-linear in its steps and edges, without
// the per-step sets of ancestors or descendants that grow with the square
// of the steps. Flow validation (package flow), document compilation
// (package flowdoc) and the engine use it.
//
// Nodes are indices 0..n-1. The graph may have cycles: each node gets the
// topological position of its strongly connected component, and a path
// from a to b only passes through nodes whose positions lie between a's
// and b's, which bounds every search.
package dag

import (
	"container/heap"
	"slices"
)

// Graph is a directed graph given by its successor lists. Its searches
// share scratch space: a Graph is not safe for concurrent use.
type Graph struct {
	succ [][]int
	// pos is the topological position of each node's strongly connected
	// component: an edge a→b has pos[a] <= pos[b], equal only inside a
	// cycle.
	pos []int
	// mark and stamp are the scratch of a search.
	mark  []int
	stamp int
}

// New returns the graph of the successor lists succ (succ[i] are the
// nodes an edge from i leads to; each in [0, len(succ))). It does not copy
// succ, which must not change afterwards.
func New(succ [][]int) *Graph {
	g := &Graph{succ: succ, mark: make([]int, len(succ))}
	g.pos = components(succ)
	return g
}

// Pos returns the topological position of node i's strongly connected
// component.
func (g *Graph) Pos(i int) int { return g.pos[i] }

// Query asks whether a path of one or more edges leads from From to To.
type Query struct{ From, To int }

// Leads answers the queries, in their order. Queries from one node share
// a search, bounded by the positions of their targets, so a flow whose
// steps read nearby steps, or one step, costs about one pass over its
// edges.
func (g *Graph) Leads(qs []Query) []bool {
	out := make([]bool, len(qs))
	order := make([]int, len(qs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return qs[a].From - qs[b].From })
	var stack []int
	for k := 0; k < len(order); {
		from := qs[order[k]].From
		end, limit := k, -1
		for ; end < len(order) && qs[order[end]].From == from; end++ {
			if to := qs[order[end]].To; g.pos[to] >= g.pos[from] {
				limit = max(limit, g.pos[to])
			}
		}
		if limit >= 0 {
			g.stamp++
			stack = append(stack[:0], from)
			for len(stack) > 0 {
				x := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				for _, y := range g.succ[x] {
					if g.mark[y] != g.stamp && g.pos[y] <= limit {
						g.mark[y] = g.stamp
						stack = append(stack, y)
					}
				}
			}
			for _, i := range order[k:end] {
				out[i] = g.mark[qs[i].To] == g.stamp
			}
		}
		k = end
	}
	return out
}

// components numbers the strongly connected components of the graph in
// topological order (Tarjan's algorithm, without recursion) and returns
// each node's component number.
func components(succ [][]int) []int {
	n := len(succ)
	index := make([]int, n) // 0 = not visited; else visit order + 1
	low := make([]int, n)
	onStack := make([]bool, n)
	comp := make([]int, n)
	var stack []int
	type frame struct{ v, next int }
	var calls []frame
	counter, ncomp := 0, 0
	for root := range n {
		if index[root] != 0 {
			continue
		}
		calls = append(calls, frame{v: root})
		counter++
		index[root], low[root] = counter, counter
		stack = append(stack, root)
		onStack[root] = true
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if f.next < len(succ[v]) {
				w := succ[v][f.next]
				f.next++
				switch {
				case index[w] == 0:
					counter++
					index[w], low[w] = counter, counter
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{v: w})
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				p := calls[len(calls)-1].v
				low[p] = min(low[p], low[v])
			}
			if low[v] == index[v] {
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp[w] = ncomp
					if w == v {
						break
					}
				}
				ncomp++
			}
		}
	}
	// Tarjan's algorithm finds the components in reverse topological
	// order.
	for i := range comp {
		comp[i] = ncomp - 1 - comp[i]
	}
	return comp
}

// Acyclic reports whether the graph has no cycle (no component of more
// than one node, no edge from a node to itself).
func (g *Graph) Acyclic() bool {
	seen := make(map[int]bool, len(g.pos))
	for i, p := range g.pos {
		if seen[p] {
			return false
		}
		seen[p] = true
		if slices.Contains(g.succ[i], i) {
			return false
		}
	}
	return true
}

// Common reports whether some node is reachable (by zero or more edges)
// from every one of the starts, which are distinct. The searches from the
// starts advance together in topological order, so they stop at the first
// node they share: the cost is the nodes each start reaches before the
// branches meet (all they reach when they never do).
func (g *Graph) Common(starts []int) bool {
	if len(starts) == 0 {
		return false
	}
	n := len(g.succ)
	count := map[int]int{}
	seen := map[int]bool{}
	h := &sweep{pos: g.pos}
	for t, s := range starts {
		heap.Push(h, visit{node: s, start: t})
	}
	for h.Len() > 0 {
		v := heap.Pop(h).(visit)
		key := v.start*n + v.node
		if seen[key] {
			continue
		}
		seen[key] = true
		if count[v.node]++; count[v.node] == len(starts) {
			return true
		}
		for _, y := range g.succ[v.node] {
			if !seen[v.start*n+y] {
				heap.Push(h, visit{node: y, start: v.start})
			}
		}
	}
	return false
}

// visit is a node reached by the search from starts[start].
type visit struct{ node, start int }

// sweep is a heap of visits, by topological position.
type sweep struct {
	pos []int
	v   []visit
}

func (h *sweep) Len() int           { return len(h.v) }
func (h *sweep) Less(i, j int) bool { return h.pos[h.v[i].node] < h.pos[h.v[j].node] }
func (h *sweep) Swap(i, j int)      { h.v[i], h.v[j] = h.v[j], h.v[i] }
func (h *sweep) Push(x any)         { h.v = append(h.v, x.(visit)) }
func (h *sweep) Pop() any {
	x := h.v[len(h.v)-1]
	h.v = h.v[:len(h.v)-1]
	return x
}
