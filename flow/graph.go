package flow

import (
	"fmt"
	"slices"
	"strings"
)

// Mermaid renders the flow as a Mermaid flowchart ("flowchart TD"), for
// documentation and dashboards: one node per step in declaration order, a
// start marker leading to the steps a run begins with, a Done node when
// an edge ends the flow there, and edges labeled with their event. Map
// steps are drawn as subroutines marked "map" (with their source), waiting
// steps as hexagons marked "wait" (with their timeout), and failure edges
// dotted. The output is deterministic.
func (f *Flow) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	id := map[string]string{Done: "done"}
	for i, s := range f.specs {
		id[s.Name] = fmt.Sprintf("s%d", i)
	}
	b.WriteString("    start((\"start\"))\n")
	for i, s := range f.specs {
		label := mermaidText(s.Name)
		if m := marker(s); m != "" {
			label += "<br/>" + mermaidText(m)
		}
		open, close := "[", "]"
		switch {
		case s.Kind == KindMap:
			open, close = "[[", "]]"
		case s.Waits:
			open, close = "{{", "}}"
		}
		fmt.Fprintf(&b, "    s%d%s\"%s\"%s\n", i, open, label, close)
	}
	if f.endsInDone() {
		b.WriteString("    done(((\"done\")))\n")
	}
	for _, r := range f.roots() {
		fmt.Fprintf(&b, "    start --> %s\n", id[r])
	}
	for _, e := range f.edges {
		arrow := "-->"
		if e.Event == EventFailed {
			arrow = "-.->"
		}
		fmt.Fprintf(&b, "    %s %s|\"%s\"| %s\n", id[e.From], arrow, mermaidText(e.Event), id[e.To])
	}
	return b.String()
}

// DOT renders the flow as a Graphviz digraph with the same information as
// Mermaid: map steps are box3d nodes, waiting steps hexagons, Done a double
// circle, edges labeled with their event. The output is deterministic.
func (f *Flow) DOT() string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotQuote(f.name))
	b.WriteString("    rankdir=TB;\n")
	b.WriteString("    node [shape=box, style=rounded];\n")
	b.WriteString("    \"_start\" [label=\"start\", shape=circle];\n")
	for _, s := range f.specs {
		label := s.Name
		attrs := ""
		switch {
		case s.Kind == KindMap:
			attrs = ", shape=box3d, style=solid"
		case s.Waits:
			attrs = ", shape=hexagon, style=solid"
		}
		if m := marker(s); m != "" {
			label += "\n" + m
		}
		fmt.Fprintf(&b, "    %s [label=%s%s];\n", dotQuote(s.Name), dotQuote(label), attrs)
	}
	if f.endsInDone() {
		b.WriteString("    \"_done\" [label=\"done\", shape=doublecircle];\n")
	}
	for _, r := range f.roots() {
		fmt.Fprintf(&b, "    \"_start\" -> %s;\n", dotQuote(r))
	}
	for _, e := range f.edges {
		to := dotQuote(e.To)
		if e.To == Done {
			to = "\"_done\""
		}
		style := ""
		if e.Event == EventFailed {
			style = ", style=dashed"
		}
		fmt.Fprintf(&b, "    %s -> %s [label=%s%s];\n", dotQuote(e.From), to, dotQuote(e.Event), style)
	}
	b.WriteString("}\n")
	return b.String()
}

// marker describes what sets a step apart: "map over <source>" or
// "wait" with its timeout; "" for a plain step.
func marker(s StepSpec) string {
	switch {
	case s.Kind == KindMap:
		src := "input"
		if s.MapSource != "" {
			src = s.MapSource
		}
		if s.MapField != "" {
			src += "." + s.MapField
		}
		return "map over " + src
	case s.Waits && s.WaitTimeout > 0:
		return "wait, timeout " + s.WaitTimeout.String()
	case s.Waits:
		return "wait"
	}
	return ""
}

func (f *Flow) endsInDone() bool {
	return slices.ContainsFunc(f.edges, func(e Edge) bool { return e.To == Done })
}

// roots returns the names of the steps a run begins with.
func (f *Flow) roots() []string {
	var out []string
	if f.graph == nil {
		return nil
	}
	for _, r := range f.graph.Roots {
		out = append(out, f.graph.Steps[r].Name)
	}
	return out
}

// mermaidText escapes s for a double-quoted Mermaid label, using Mermaid's
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
