package dashboard

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/graphtext"
	"github.com/hephaestus-go/hephaestus/server"
)

// waitRow is a line of the run page's "Waiting for" panel.
type waitRow struct {
	Kind string
	Text string
	// Run is the child run a child wait links to.
	Run string
}

// waitRows describes what a run waits for (the API's waiting_for), one
// row per wait; now is when due times count from.
func waitRows(ws []server.Wait, now time.Time) []waitRow {
	out := make([]waitRow, 0, len(ws))
	for _, w := range ws {
		out = append(out, waitRow{Kind: w.Kind, Text: waitText(w, now), Run: w.RunID})
	}
	return out
}

func dueText(t time.Time, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := t.Sub(now)
	rel := "due now"
	if d > 0 {
		rel = "in " + fmtDur(d)
	}
	return stamp(t) + " (" + rel + ")"
}

func stepOf(w server.Wait) string {
	if w.Step == "" {
		return ""
	}
	return " (step " + w.Step + ")"
}

func waitText(w server.Wait, now time.Time) string {
	q := strconv.Quote(w.Queue)
	switch w.Kind {
	case "signal":
		return "signal " + w.Name
	case "update":
		return "update " + w.Name
	case "timer":
		return "timer until " + dueText(w.Due, now) + stepOf(w)
	case "gate":
		by := append([]string{}, w.Users...)
		for _, g := range w.Groups {
			by = append(by, "group "+g)
		}
		who := "anyone"
		if len(by) > 0 {
			who = strings.Join(by, ", ")
		}
		s := fmt.Sprintf("approval %q by %s", w.Step, who)
		if !w.Due.IsZero() {
			s += ", deadline " + dueText(w.Due, now)
		}
		return s
	case "step":
		s := fmt.Sprintf("step %q to be resumed", w.Step)
		if len(w.Events) > 0 {
			s += " with " + strings.Join(w.Events, " or ")
		}
		return s
	case "child":
		return "child run of workflow " + w.Name
	case "queue_paused":
		return "queue " + q + " is paused" + stepOf(w)
	case "queue_limit":
		return fmt.Sprintf("queue %s is full: at most %d running%s", q, w.Limit, stepOf(w))
	case "concurrency_key":
		return fmt.Sprintf("concurrency key %q on queue %s: at most %d running%s", w.Name, q, w.Limit, stepOf(w))
	case "rate_limit":
		return fmt.Sprintf("queue %s rate limit of %d reached, next window %s%s", q, w.Limit, dueText(w.Due, now), stepOf(w))
	case "no_worker":
		return "no live worker for " + w.Name + " on queue " + w.Queue + stepOf(w)
	case "scheduled":
		what := "a task"
		if w.Step != "" {
			what = "step " + w.Step
		}
		return what + " due " + dueText(w.Due, now) + " on queue " + w.Queue
	}
	return w.Kind + " " + w.Name
}

// withWaits adds to a workflow run's graph a pending node for each
// signal and update the workflow waits for, hung from the nodes nothing
// follows yet (timers and children it waits on are in the graph
// already, from their history entries).
func withWaits(g *graphtext.Graph, ws []server.Wait) *graphtext.Graph {
	var leaves []string
	for _, n := range g.Nodes {
		if n.Kind == graphtext.KindDone {
			return g // ended: it waits for nothing
		}
		follows := false
		for _, e := range g.Edges {
			if e.From == n.ID {
				follows = true
				break
			}
		}
		if !follows {
			leaves = append(leaves, n.ID)
		}
	}
	for _, w := range ws {
		kind := kindSignal
		switch w.Kind {
		case "signal":
		case "update":
			kind = kindUpdate
		default:
			continue
		}
		id := "waiting:" + w.Kind + ":" + w.Name
		g.Nodes = append(g.Nodes, graphtext.Node{ID: id, Label: w.Name, Kind: kind, Detail: "waiting for " + w.Kind, State: "waiting"})
		for _, from := range leaves {
			g.Edges = append(g.Edges, graphtext.Edge{From: from, To: id})
		}
	}
	return g
}
