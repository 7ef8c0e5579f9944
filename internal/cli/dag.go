package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/apiclient"
)

// The markers of step states in a DAG drawing, in legend order.
var stateMarks = []struct{ status, mark string }{
	{"completed", "✓"},
	{"running", "▸"},
	{"scheduled", "▸"},
	{"waiting", "…"},
	{"failed", "✗"},
	{"skipped", "–"},
	{"cancelled", "⊘"},
	{"pending", "·"},
}

func markOf(status string) string {
	for _, m := range stateMarks {
		if m.status == status {
			return m.mark
		}
	}
	return "?"
}

// drawDAG draws a graph as text, in layers: each step in the layer one
// below its deepest predecessor, with the events it emits and where they
// lead under it. states, when not nil, maps step names to their status,
// drawn as a marker before the name and explained in a legend.
func drawDAG(g *apiclient.Graph, states map[string]string) string {
	steps, kind := []string{}, map[string]string{}
	for _, n := range g.Nodes {
		if n.Kind == "start" || n.Kind == "done" {
			continue
		}
		steps = append(steps, n.ID)
		kind[n.ID] = n.Kind
	}
	isStep := func(id string) bool { _, ok := kind[id]; return ok }
	out := map[string][]apiclient.GraphEdge{}
	in := map[string]int{}
	for _, e := range g.Edges {
		if !isStep(e.From) {
			continue
		}
		out[e.From] = append(out[e.From], e)
		if isStep(e.To) && e.To != e.From {
			in[e.To]++
		}
	}
	// Longest-path layering (Kahn); a cycle, which a validated flow has
	// not, leaves its steps for a last layer rather than looping.
	layer := map[string]int{}
	var queue []string
	for _, s := range steps {
		if in[s] == 0 {
			queue = append(queue, s)
		}
	}
	left := maps.Clone(in)
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, e := range out[s] {
			if !isStep(e.To) || e.To == s {
				continue
			}
			layer[e.To] = max(layer[e.To], layer[s]+1)
			if left[e.To]--; left[e.To] == 0 {
				queue = append(queue, e.To)
			}
		}
	}
	depth := 0
	for _, l := range layer {
		depth = max(depth, l)
	}
	for _, s := range steps {
		if left[s] > 0 {
			layer[s] = depth + 1
		}
	}
	var rows [][]string
	for _, s := range steps {
		l := layer[s]
		for len(rows) <= l {
			rows = append(rows, nil)
		}
		rows[l] = append(rows[l], s)
	}

	used := map[string]bool{}
	var b strings.Builder
	for i, r := range rows {
		if len(r) == 0 {
			continue
		}
		cells := make([][]string, len(r))
		for j, s := range r {
			head := s
			if states != nil {
				st := states[s]
				if st == "" {
					st = "pending"
				}
				used[st] = true
				head = markOf(st) + " " + s
			}
			switch kind[s] {
			case "map":
				head += " (map)"
			case "wait":
				head += " (wait)"
			}
			cells[j] = append([]string{head}, edgeLines(out[s])...)
		}
		width := make([]int, len(cells))
		height := 0
		for j, c := range cells {
			for _, line := range c {
				width[j] = max(width[j], utf8.RuneCountInString(line))
			}
			height = max(height, len(c))
		}
		label := fmt.Sprintf("%d", i+1)
		for k := range height {
			var line strings.Builder
			if k == 0 {
				fmt.Fprintf(&line, "%3s  ", label)
			} else {
				line.WriteString("     ")
			}
			for j, c := range cells {
				text := ""
				if k < len(c) {
					text = c[k]
				}
				line.WriteString(text)
				if j < len(cells)-1 {
					line.WriteString(strings.Repeat(" ", width[j]-utf8.RuneCountInString(text)+3))
				}
			}
			b.WriteString(strings.TrimRight(line.String(), " "))
			b.WriteByte('\n')
		}
	}
	if len(used) > 0 {
		var parts []string
		seen := map[string]bool{}
		for _, m := range stateMarks {
			if used[m.status] && !seen[m.status] {
				seen[m.status] = true
				parts = append(parts, m.mark+" "+m.status)
			}
		}
		b.WriteString("     " + strings.Join(parts, "  ") + "\n")
	}
	return b.String()
}

// edgeLines lists a step's edges by event: "  ok → a, b".
func edgeLines(edges []apiclient.GraphEdge) []string {
	var events []string
	to := map[string][]string{}
	for _, e := range edges {
		ev := e.Event
		if ev == "" {
			ev = flow.EventOK
		}
		if _, ok := to[ev]; !ok {
			events = append(events, ev)
		}
		target := e.To
		if strings.HasPrefix(target, "_") || target == flow.Done {
			target = "(done)"
		}
		if !slices.Contains(to[ev], target) {
			to[ev] = append(to[ev], target)
		}
	}
	lines := make([]string, len(events))
	for i, ev := range events {
		lines[i] = "  " + ev + " → " + strings.Join(to[ev], ", ")
	}
	return lines
}

// flowGraph is a built flow's graph in the API's JSON shape: a start
// node, the steps in declaration order, a done node when an edge ends
// the flow, and the edges with their events.
func flowGraph(f *flow.Flow) *apiclient.Graph {
	g := &apiclient.Graph{Name: f.Name(), Version: f.Version()}
	g.Nodes = append(g.Nodes, apiclient.GraphNode{ID: "_start", Label: "start", Kind: "start"})
	hasIn := map[string]bool{}
	done := false
	for _, e := range f.Edges() {
		hasIn[e.To] = true
		done = done || e.To == flow.Done
	}
	for _, s := range f.Steps() {
		k := "step"
		switch {
		case s.Kind == flow.KindMap:
			k = "map"
		case s.Waits:
			k = "wait"
		}
		g.Nodes = append(g.Nodes, apiclient.GraphNode{ID: s.Name, Label: s.Name, Kind: k})
		if !hasIn[s.Name] {
			g.Edges = append(g.Edges, apiclient.GraphEdge{From: "_start", To: s.Name})
		}
	}
	if done {
		g.Nodes = append(g.Nodes, apiclient.GraphNode{ID: "_done", Label: "done", Kind: "done"})
	}
	for _, e := range f.Edges() {
		to := e.To
		if to == flow.Done {
			to = "_done"
		}
		g.Edges = append(g.Edges, apiclient.GraphEdge{From: e.From, To: to, Event: e.Event})
	}
	return g
}
