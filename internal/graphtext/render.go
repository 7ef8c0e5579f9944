package graphtext

import (
	"fmt"
	"slices"
	"strings"
)

// Mermaid renders g as a Mermaid flowchart: map steps as subroutines,
// waiting steps as hexagons, failure edges dotted; steps with a state
// get a class per state (completed, failed …) styled by classDef lines.
func Mermaid(g *Graph) string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	ids := make(map[string]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[n.ID] = fmt.Sprintf("n%d", i)
	}
	var states []string
	for _, n := range g.Nodes {
		label := mermaidText(n.Label)
		if n.Detail != "" {
			label += "<br/>" + mermaidText(n.Detail)
		}
		if n.State != "" {
			label += "<br/>" + mermaidText("("+n.State+")")
		}
		open, close := "[", "]"
		switch n.Kind {
		case KindStart:
			open, close = "((", "))"
		case KindDone:
			open, close = "(((", ")))"
		case KindMap:
			open, close = "[[", "]]"
		case KindWait:
			open, close = "{{", "}}"
		}
		fmt.Fprintf(&b, "    %s%s\"%s\"%s\n", ids[n.ID], open, label, close)
		if n.State != "" && !slices.Contains(states, n.State) {
			states = append(states, n.State)
		}
	}
	for _, e := range g.Edges {
		arrow := "-->"
		if e.Failure {
			arrow = "-.->"
		}
		if e.Event == "" {
			fmt.Fprintf(&b, "    %s %s %s\n", ids[e.From], arrow, ids[e.To])
			continue
		}
		fmt.Fprintf(&b, "    %s %s|\"%s\"| %s\n", ids[e.From], arrow, mermaidText(e.Event), ids[e.To])
	}
	for _, st := range states {
		fmt.Fprintf(&b, "    classDef %s %s\n", className(st), stateStyle(st))
		for _, n := range g.Nodes {
			if n.State == st {
				fmt.Fprintf(&b, "    class %s %s\n", ids[n.ID], className(st))
			}
		}
	}
	return b.String()
}

// DOT renders g as a Graphviz digraph with the same information as
// Mermaid; a step with a state is filled with its state's colour.
func DOT(g *Graph) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotQuote(g.Flow))
	b.WriteString("    rankdir=TB;\n")
	b.WriteString("    node [shape=box, style=rounded];\n")
	for _, n := range g.Nodes {
		label := n.Label
		if n.Detail != "" {
			label += "\n" + n.Detail
		}
		if n.State != "" {
			label += "\n(" + n.State + ")"
		}
		var shape, style string
		switch n.Kind {
		case KindStart:
			shape = "circle"
		case KindDone:
			shape = "doublecircle"
		case KindMap:
			shape, style = "box3d", "solid"
		case KindWait:
			shape, style = "hexagon", "solid"
		}
		var attrs string
		if shape != "" {
			attrs += ", shape=" + shape
		}
		if n.State != "" {
			if style == "" {
				style = "rounded"
			}
			style = "filled," + style
			attrs += fmt.Sprintf(", fillcolor=%s", dotQuote(stateColour(n.State)))
		}
		if style != "" {
			attrs += ", style=" + dotQuote(style)
		}
		fmt.Fprintf(&b, "    %s [label=%s%s];\n", dotQuote(n.ID), dotQuote(label), attrs)
	}
	for _, e := range g.Edges {
		var attrs []string
		if e.Event != "" {
			attrs = append(attrs, "label="+dotQuote(e.Event))
		}
		if e.Failure {
			attrs = append(attrs, "style=dashed")
		}
		if len(attrs) == 0 {
			fmt.Fprintf(&b, "    %s -> %s;\n", dotQuote(e.From), dotQuote(e.To))
			continue
		}
		fmt.Fprintf(&b, "    %s -> %s [%s];\n", dotQuote(e.From), dotQuote(e.To), strings.Join(attrs, ", "))
	}
	b.WriteString("}\n")
	return b.String()
}

// Text renders g as a plain-text picture for a terminal: each step on a
// line, indented by its depth (the longest path to it from the start),
// with a mark of its state and its state, followed by its outgoing edges.
//
//	checkout v1
//	[x] validate  completed
//	      ok -> charge
//	  [>] charge  running
//	        ok -> (done)
//
// Marks: [x] completed, [>] scheduled or running, [~] waiting, [!] failed,
// [-] skipped, [c] cancelled, [ ] pending or no state.
func Text(g *Graph) string {
	depth := depths(g)
	var b strings.Builder
	fmt.Fprintf(&b, "%s v%d\n", g.Flow, g.Version)
	var steps []Node
	for _, n := range g.Nodes {
		if isStep(n) {
			steps = append(steps, n)
		}
	}
	slices.SortStableFunc(steps, func(a, c Node) int { return depth[a.ID] - depth[c.ID] })
	for _, n := range steps {
		pad := strings.Repeat("  ", depth[n.ID])
		line := pad + mark(n.State) + " " + n.Label
		if n.Detail != "" {
			line += " <" + n.Detail + ">"
		}
		if n.State != "" {
			line += "  " + n.State
		}
		b.WriteString(line + "\n")
		for _, e := range g.Edges {
			if e.From != n.ID {
				continue
			}
			to := e.To
			if to == DoneID {
				to = "(done)"
			}
			fmt.Fprintf(&b, "%s      %s -> %s\n", pad, e.Event, to)
		}
	}
	return b.String()
}

// depths returns each node's longest distance from the start node; the
// graph is acyclic (flows are validated when built).
func depths(g *Graph) map[string]int {
	d := map[string]int{StartID: -1}
	// Relax the edges as often as there are nodes: enough for any DAG.
	for range g.Nodes {
		changed := false
		for _, e := range g.Edges {
			from, ok := d[e.From]
			if !ok {
				continue
			}
			if cur, ok := d[e.To]; !ok || from+1 > cur {
				d[e.To] = from + 1
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	for k, v := range d {
		d[k] = max(v, 0)
	}
	return d
}

func mark(state string) string {
	switch state {
	case "completed":
		return "[x]"
	case "scheduled", "running":
		return "[>]"
	case "waiting":
		return "[~]"
	case "failed":
		return "[!]"
	case "skipped":
		return "[-]"
	case "cancelled":
		return "[c]"
	}
	return "[ ]"
}

func stateColour(state string) string {
	switch state {
	case "completed":
		return "#d4edda"
	case "scheduled", "running":
		return "#cce5ff"
	case "waiting":
		return "#fff3cd"
	case "failed":
		return "#f8d7da"
	case "cancelled":
		return "#e2e3e5"
	}
	return "#ffffff"
}

func stateStyle(state string) string { return "fill:" + stateColour(state) }

// className makes a state usable as a Mermaid class name.
func className(state string) string {
	var b strings.Builder
	b.WriteString("st_")
	for _, r := range state {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// mermaidText escapes s for a double-quoted Mermaid label with Mermaid's
// entity codes.
func mermaidText(s string) string {
	return strings.NewReplacer(
		"#", "#35;",
		"\"", "#quot;",
		"<", "#lt;",
		">", "#gt;",
		"|", "#124;",
		"\n", " ",
		"\r", " ",
	).Replace(s)
}

// dotQuote returns s as a double-quoted DOT identifier; newlines become
// DOT's "\n" line breaks.
func dotQuote(s string) string {
	return "\"" + strings.NewReplacer(
		"\\", "\\\\",
		"\"", "\\\"",
		"\r", "",
		"\n", "\\n",
	).Replace(s) + "\""
}
