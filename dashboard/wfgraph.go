package dashboard

import (
	"strconv"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/graphtext"
	"github.com/hephaestus-go/hephaestus/server"
)

// The kinds of the nodes workflowGraph derives, besides graphtext's
// start and done.
const (
	kindActivity = "activity"
	kindTimer    = "timer"
	kindChild    = "child"
	kindSignal   = "signal"
	kindUpdate   = "update"
)

// workflowGraph derives the graph of a code-first workflow run from its
// history, which is all such a run has: a node per activity ("name#seq"),
// timer ("timer#seq"), child run ("name#seq"), signal received and update
// accepted ("signal:name@seq", "update:name@seq"), with their states.
//
// The edges follow causality. The commands one decision issued (the
// entries after a decision entry, up to the next one the runtime wrote)
// start in parallel from what had completed (or arrived) since the last
// decision that issued any, or else from where the previous commands
// started; a signal or update hangs from the commands running when it
// arrived. Phases write no entry of their own: they show as the signals
// and updates they handled, and as their timer when they have a timeout.
func workflowGraph(events []server.Event) *graphtext.Graph {
	w := &wfBuilder{index: map[string]int{}}
	w.g.Nodes = append(w.g.Nodes, graphtext.Node{ID: graphtext.StartID, Label: "start", Kind: graphtext.KindStart})
	w.frontier = []string{graphtext.StartID}
	var ended string
	for _, e := range events {
		kind := hephtype.EventKind(e.Kind)
		switch kind {
		case hephtype.EventRunStarted:
			if e.Name != "" {
				w.g.Flow = e.Name
			}
		case hephtype.EventDecision:
			w.inBlock = false
		case hephtype.EventStepScheduled:
			id := e.Name + "#" + strconv.Itoa(e.Index)
			w.command(graphtext.Node{ID: id, Label: e.Name, Kind: kindActivity, Detail: "activity #" + strconv.Itoa(e.Index), State: "running"})
			w.byIndex(e.Index, id)
		case hephtype.EventStepStarted:
			w.setState(w.seq[e.Index], "running")
		case hephtype.EventStepRetrying:
			w.setState(w.seq[e.Index], "running")
		case hephtype.EventStepCompleted:
			w.finish(w.seq[e.Index], "completed", "")
		case hephtype.EventStepFailed:
			w.finish(w.seq[e.Index], "failed", "failed")
		case hephtype.EventStepCancelled:
			w.finish(w.seq[e.Index], "cancelled", "cancelled")
		case hephtype.EventTimerStarted:
			id := "timer#" + strconv.Itoa(e.Index)
			label := "timer"
			if d, ok := timerDuration(e); ok {
				label = "sleep " + fmtDur(d)
			}
			w.command(graphtext.Node{ID: id, Label: label, Kind: kindTimer, Detail: "timer #" + strconv.Itoa(e.Index), State: "waiting"})
			w.byIndex(e.Index, id)
		case hephtype.EventTimerFired:
			w.finish(w.seq[e.Index], "completed", "")
		case hephtype.EventTimerCancelled: // the workflow cancelled it: nothing follows it
			w.setState(w.seq[e.Index], "cancelled")
		case hephtype.EventChildStarted:
			id := e.Name + "#" + strconv.Itoa(e.Index)
			w.command(graphtext.Node{ID: id, Label: e.Name, Kind: kindChild, Detail: "child workflow #" + strconv.Itoa(e.Index), State: "running"})
			w.byIndex(e.Index, id)
		case hephtype.EventChildCompleted:
			w.finish(w.seq[e.Index], "completed", "")
		case hephtype.EventChildFailed:
			w.finish(w.seq[e.Index], "failed", "failed")
		case hephtype.EventChildCancelled:
			w.setState(w.seq[e.Index], "cancelled")
		case hephtype.EventSignalReceived:
			id := "signal:" + e.Name + "@" + strconv.FormatInt(e.Seq, 10)
			w.message(graphtext.Node{ID: id, Label: e.Name, Kind: kindSignal, Detail: "signal", State: "completed"})
		case hephtype.EventUpdateAccepted:
			id := "update:" + e.Name + "@" + strconv.FormatInt(e.Seq, 10)
			w.command(graphtext.Node{ID: id, Label: e.Name, Kind: kindUpdate, Detail: "update", State: "running"})
			w.updates = append(w.updates, id)
		case hephtype.EventUpdateDone:
			// The oldest running update of that name is the one done.
			for i, id := range w.updates {
				if n := w.node(id); n != nil && n.Label == e.Name {
					n.State = "completed"
					if e.Error != "" {
						n.State = "failed"
					}
					w.updates = append(w.updates[:i:i], w.updates[i+1:]...)
					break
				}
			}
		case hephtype.EventRunCompleted, hephtype.EventRunContinued:
			ended = "completed"
		case hephtype.EventRunFailed, hephtype.EventRunTimedOut:
			ended = "failed"
		case hephtype.EventRunCancelled:
			ended = "cancelled"
		}
	}
	if ended != "" {
		w.command(graphtext.Node{ID: graphtext.DoneID, Label: "done", Kind: graphtext.KindDone, State: ended})
		if ended != "completed" {
			for i := range w.g.Nodes {
				if n := &w.g.Nodes[i]; n.State == "running" || n.State == "waiting" {
					n.State = "cancelled"
				}
			}
		}
	}
	return &w.g
}

// wfBuilder holds workflowGraph's walk.
type wfBuilder struct {
	g     graphtext.Graph
	index map[string]int // node id -> index in g.Nodes
	seq   map[int]string // command sequence number -> node id
	// frontier is what the last commands started from, then those commands.
	frontier []string
	// since lists what completed or arrived since commands were last issued,
	// with the event of the edge leaving it.
	since   []sinceNode
	inBlock bool // within the commands of one decision
	parents []sinceNode
	updates []string // accepted, not yet done
}

type sinceNode struct{ id, event string }

func (w *wfBuilder) node(id string) *graphtext.Node {
	if i, ok := w.index[id]; ok {
		return &w.g.Nodes[i]
	}
	return nil
}

func (w *wfBuilder) byIndex(seq int, id string) {
	if w.seq == nil {
		w.seq = map[int]string{}
	}
	w.seq[seq] = id
}

func (w *wfBuilder) setState(id, state string) {
	if n := w.node(id); n != nil {
		n.State = state
	}
}

// finish records that a command's node ended, so the next commands
// follow it.
func (w *wfBuilder) finish(id, state, event string) {
	if n := w.node(id); n != nil {
		n.State = state
		w.since = append(w.since, sinceNode{id, event})
	}
}

// add adds a node unless its id is taken (a history written twice).
func (w *wfBuilder) add(n graphtext.Node) bool {
	if _, dup := w.index[n.ID]; dup {
		return false
	}
	w.index[n.ID] = len(w.g.Nodes)
	w.g.Nodes = append(w.g.Nodes, n)
	return true
}

// command adds a node a decision issued: the first command of a decision
// takes as parents what ended since the last commands, or else their
// own parents; the later ones of the decision share them.
func (w *wfBuilder) command(n graphtext.Node) {
	if !w.inBlock {
		w.inBlock = true
		w.parents = w.since
		if len(w.parents) == 0 {
			w.parents = w.frontierParents()
		}
		w.since = nil
		w.frontier = nil
	}
	if !w.add(n) {
		return
	}
	w.frontier = append(w.frontier, n.ID)
	for _, p := range w.parents {
		w.edge(p.id, n.ID, p.event)
	}
}

// frontierParents is where commands that follow nothing new start: from
// the parents of the previous commands (they run beside them).
func (w *wfBuilder) frontierParents() []sinceNode {
	if len(w.frontier) == 0 {
		return []sinceNode{{id: graphtext.StartID}}
	}
	var out []sinceNode
	seen := map[string]bool{}
	for _, id := range w.frontier {
		for _, e := range w.g.Edges {
			if e.To == id && !seen[e.From] {
				seen[e.From] = true
				out = append(out, sinceNode{id: e.From, event: e.Event})
			}
		}
	}
	if len(out) == 0 {
		out = []sinceNode{{id: graphtext.StartID}}
	}
	return out
}

// message adds a signal or update that arrived from outside: it hangs
// from the commands running when it came, and what follows it follows
// it.
func (w *wfBuilder) message(n graphtext.Node) {
	if !w.add(n) {
		return
	}
	for _, id := range w.frontier {
		w.edge(id, n.ID, "")
	}
	w.since = append(w.since, sinceNode{id: n.ID})
}

func (w *wfBuilder) edge(from, to, event string) {
	for _, e := range w.g.Edges {
		if e.From == from && e.To == to {
			return
		}
	}
	w.g.Edges = append(w.g.Edges, graphtext.Edge{From: from, To: to, Event: event, Failure: event == "failed"})
}
