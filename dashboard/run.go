package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/graphtext"
	"github.com/hephaestus-go/hephaestus/server"
)

// The run page shows one run: its header, the picture of its DAG (a
// flow's graph with each step's state, or the graph derived from a
// workflow's history), its steps, the timeline of its attempts, its
// history (readable, raw and downloadable), its input, output and
// published state, and the actions that apply to it. Everything is read
// through the API; every action is one API call the browser makes.

// runData is the run page's.
type runData struct {
	Run *server.Run
	// Model is what the run runs: flow, document, job or workflow.
	Model string
	// Terminal: the run has ended (completed, failed, cancelled or
	// continued as new); nothing on the page changes any more.
	Terminal bool
	// DAG is the picture of the run's graph; NoDAG says why there is
	// none (the definition is not known to this server).
	DAG   template.HTML
	NoDAG string
	// Timeline is the gantt picture of the run's attempts.
	Timeline template.HTML
	// Events is the history, oldest first.
	Events []eventRow
	// HistoryJSON is the history as the API answers it, indented.
	HistoryJSON string
	// HistoryURL is the API's history of the run (the download link).
	HistoryURL string
	// StreamURL is the API's stream of the run's events after those the
	// page shows (app.js refreshes the page on each); empty once the run
	// has ended.
	StreamURL string
	// Logs are the run's step logs, per attempt (logs.go); LogCount
	// counts their records, LogsMore says that more than the page shown
	// exist, LogsURL is the API's (the download link).
	Logs     []*logGroup
	LogCount int
	LogsMore bool
	LogsURL  string
	// State is the state a workflow published last ("" without one);
	// StateNote says why there is none when it could not be read.
	State     string
	StateNote string
	// Parent is the run that started this one as a child workflow (nil
	// for none, or when it cannot be read); Children are the child
	// workflows this one started, oldest first.
	Parent   *server.Run
	Children []*server.Run
	// MoreChildren is set when the run has more children than listed.
	MoreChildren bool
	// StartedBy is the event whose trigger started the run (nil for a
	// run no trigger started).
	StartedBy *startedBy
	// EventWaits are the run's waits for events (eventwaits.go).
	EventWaits []eventWaitRow
	// Waiting are the steps that wait to be resumed from outside, with
	// the events that resume them; gates among them are approval gates.
	Waiting []waitingStep
	// Signals and Updates are the names the run has received (offered in
	// the signal and update dialogs).
	Signals, Updates []string
	// WaitingFor is what the run waits for (waits.go).
	WaitingFor []waitRow
	// now is when the page was made (steps.go).
	now time.Time
}

// eventRow is a history entry as the page lists it.
type eventRow struct {
	Seq  int64
	At   string
	Kind string
	Step string
	Text string
	Bad  bool
}

// waitingStep is a step that waits for a resume or a decision.
type waitingStep struct {
	Step   string
	Events []string
	// Gate is set when the step is an approval gate waiting for a
	// decision.
	Gate *server.PendingApproval
}

func (d *runData) PageTitle() string { return "Run " + shortID(d.Run.ID) }
func (d *runData) Live() bool        { return !d.Terminal }

// CanCancel reports whether the run can be cancelled: it has not ended.
func (d *runData) CanCancel() bool { return !d.Terminal }

// CanRetry reports whether the run can be retried from its failed steps:
// a failed run of a flow, a document or a job.
func (d *runData) CanRetry() bool {
	return d.Run.Status == string(hephtype.StatusFailed) && d.Run.Kind == string(hephtype.KindFlow)
}

// IsWorkflow reports whether the run is a code-first workflow's.
func (d *runData) IsWorkflow() bool { return d.Run.Kind == string(hephtype.KindWorkflow) }

// CreatedBy is the run's created_by metadata ("" without it).
func (d *runData) CreatedBy() string {
	if raw, ok := d.Run.Metadata["created_by"]; ok {
		return metaText(raw)
	}
	return ""
}

// OtherMetadata is the run's own metadata, by key.
func (d *runData) OtherMetadata() []metaPair {
	var out []metaPair
	for k, v := range d.Run.Metadata {
		// created_by has its own line; document is the document
		// reference; flowdoc.* is what a document's compiler records.
		if k == "created_by" || k == "document" || strings.HasPrefix(k, "flowdoc.") {
			continue
		}
		// event and trigger make the Started by line.
		if d.StartedBy != nil && (k == "event" || k == "trigger") {
			continue
		}
		out = append(out, metaPair{Key: k, Value: metaText(v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Attributes are the run's search attributes, by name, as JSON text.
func (d *runData) Attributes() []metaPair {
	var out []metaPair
	for k, v := range d.Run.SearchAttributes {
		b, _ := json.Marshal(v)
		out = append(out, metaPair{Key: k, Value: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// metaPair is a metadata entry as the header shows it.
type metaPair struct{ Key, Value string }

// Took is how long the run took, or has run so far ("" when it ended
// without an end time).
func (d *runData) Took() string { return took(d.Run) }

// runPage shows a run.
func (d *Dashboard) runPage(r *http.Request) (string, any, error) {
	id := r.PathValue("id")
	if id == "" {
		return "", nil, badRequest("the run's id is missing from the path")
	}
	base := "/api/v1/runs/" + url.PathEscape(id)
	run := &server.Run{}
	if err := d.get(r, base, nil, run); err != nil {
		return "", nil, err
	}
	// The path may name the run by its business id (key::value), which
	// the API resolves; the rest of the page reads the run it named.
	base = "/api/v1/runs/" + url.PathEscape(run.ID)
	var hist server.History
	if err := d.get(r, base+"/history", nil, &hist); err != nil {
		return "", nil, err
	}
	data := &runData{Run: run, Model: run.Kind, Terminal: hephtype.RunStatus(run.Status).Terminal(), HistoryURL: base + "/history", now: d.cfg.Now()}
	raw, err := json.MarshalIndent(&hist, "", "  ")
	if err != nil {
		return "", nil, err
	}
	data.HistoryJSON = string(raw)
	if !data.Terminal {
		// The page shows the run as it was read, before its history:
		// follow after the entries of that state.
		var seen int64
		for _, e := range hist.Events {
			if !e.At.After(run.UpdatedAt) {
				seen = e.Seq
			}
		}
		data.StreamURL = fmt.Sprintf("%s/events?after=%d", base, seen)
	}
	for _, e := range hist.Events {
		data.Events = append(data.Events, eventRow{Seq: e.Seq, At: stamp(e.At), Kind: e.Kind, Step: e.Step, Text: describeEvent(e), Bad: e.Error != ""})
	}
	data.WaitingFor = waitRows(run.WaitingFor, d.cfg.Now())
	data.Timeline = timelineSVG(timelineOf(run, hist.Events, d.cfg.Now()))
	data.Signals, data.Updates = messageNames(hist.Events)
	if err := d.runLogs(r, base, data); err != nil {
		return "", nil, err
	}
	if err := d.family(r, run, data); err != nil {
		return "", nil, err
	}
	if data.StartedBy, err = d.runStartedBy(r, run); err != nil {
		return "", nil, err
	}
	if data.EventWaits, err = d.runEventWaits(r, run.ID); err != nil {
		return "", nil, err
	}

	var graph *graphtext.Graph
	if data.IsWorkflow() {
		data.DAG = dagSVG(withWaits(workflowGraph(hist.Events), run.WaitingFor))
		if err := d.workflowState(r, base, data); err != nil {
			return "", nil, err
		}
	} else {
		graph, err = d.flowGraph(r, run)
		switch {
		case err == nil:
			data.DAG = dagSVG(withStates(graph, run.Steps))
		case isNotFound(err):
			data.NoDAG = "The definition " + run.Workflow + " version " + strconv.Itoa(run.Version) +
				" is not known to this server (no process serving it registered it here), so its graph cannot be drawn; its steps are listed below."
		default:
			return "", nil, err
		}
	}
	if !data.Terminal {
		if err := d.waitingSteps(r, run, graph, data); err != nil {
			return "", nil, err
		}
	}
	return "run", data, nil
}

// flowGraph reads the graph of a flow run's definition version.
func (d *Dashboard) flowGraph(r *http.Request, run *server.Run) (*graphtext.Graph, error) {
	name, version := run.Workflow, run.Version
	if run.Document != nil {
		name, version = run.Document.Name, run.Document.Version
	}
	q := url.Values{}
	if version > 0 {
		q.Set("version", strconv.Itoa(version))
	}
	g := &graphtext.Graph{}
	if err := d.get(r, "/api/v1/definitions/"+url.PathEscape(name)+"/graph", q, g); err != nil {
		return nil, err
	}
	return g, nil
}

// workflowState reads the state a workflow run published; a run with
// none, or one the server cannot query, gets a note instead.
func (d *Dashboard) workflowState(r *http.Request, base string, data *runData) error {
	var st server.State
	err := d.get(r, base+"/state", nil, &st)
	var ae *apiError
	switch {
	case err == nil:
		if len(st.State) > 0 && string(st.State) != "null" {
			data.State = prettyJSON(st.State)
		} else {
			data.StateNote = "The workflow has published no state."
		}
		return nil
	case errors.As(err, &ae) && ae.Status != http.StatusUnauthorized:
		data.StateNote = "No published state: " + nameOr(ae.Problem.Detail, ae.Problem.Title)
		return nil
	}
	return err
}

// waitingSteps lists a flow run's waiting steps, with the events their
// outgoing edges take, and which of them are approval gates.
func (d *Dashboard) waitingSteps(r *http.Request, run *server.Run, g *graphtext.Graph, data *runData) error {
	var waiting []string
	for _, s := range run.Steps {
		// A flow's step only: a workflow's timer waits too, for its time.
		if s.Status == string(hephtype.StepWaiting) && (s.Kind == "" || s.Kind == "step") {
			waiting = append(waiting, s.Name)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	var gates []server.PendingApproval
	if err := d.get(r, "/api/v1/approvals", url.Values{"run_id": {run.ID}}, &gates); err != nil {
		return err
	}
	for _, name := range waiting {
		w := waitingStep{Step: name}
		for i := range gates {
			if gates[i].Step == name {
				w.Gate = &gates[i]
			}
		}
		if g != nil {
			for _, e := range g.Edges {
				if e.From == name && e.Event != "" && !slices.Contains(w.Events, e.Event) {
					w.Events = append(w.Events, e.Event)
				}
			}
		}
		data.Waiting = append(data.Waiting, w)
	}
	return nil
}

// maxChildren is how many child runs the page lists.
const maxChildren = 100

// family reads a workflow run's parent and children: the parent by its
// id (a parent that cannot be read, removed by retention, is left out),
// the children through GET /runs?parent=.
func (d *Dashboard) family(r *http.Request, run *server.Run, data *runData) error {
	if run.ParentID != "" {
		p := &server.Run{}
		err := d.get(r, "/api/v1/runs/"+url.PathEscape(run.ParentID), nil, p)
		switch {
		case err == nil:
			data.Parent = p
		case isNotFound(err):
			data.Parent = &server.Run{ID: run.ParentID}
		default:
			return err
		}
	}
	if run.Kind != string(hephtype.KindWorkflow) {
		return nil
	}
	var list server.RunList
	if err := d.get(r, "/api/v1/runs", url.Values{"parent": {run.ID}, "limit": {strconv.Itoa(maxChildren)}}, &list); err != nil {
		return err
	}
	data.Children = list.Runs
	slices.SortStableFunc(data.Children, func(a, b *server.Run) int { return a.CreatedAt.Compare(b.CreatedAt) })
	data.MoreChildren = list.Next != ""
	return nil
}

// messageNames reads from a workflow's history the names of the signals
// and updates it received.
func messageNames(events []server.Event) (signals, updates []string) {
	for _, e := range events {
		switch hephtype.EventKind(e.Kind) {
		case hephtype.EventSignalReceived:
			if e.Name != "" && !slices.Contains(signals, e.Name) {
				signals = append(signals, e.Name)
			}
		case hephtype.EventUpdateAccepted, hephtype.EventUpdateRejected, hephtype.EventUpdateDone:
			if e.Name != "" && !slices.Contains(updates, e.Name) {
				updates = append(updates, e.Name)
			}
		}
	}
	return signals, updates
}

// isNotFound reports whether err is the API's 404.
func isNotFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// runAction is a button of the run page: one API call behind the
// confirmation dialog (assets/app.js reads its data-* attributes).
type runAction struct {
	ID, Label, API, Title, Confirm, Then, Class string
	// Method is the API's method ("" for POST).
	Method string
	// Body and Fields are JSON: the body's fixed part, and the fields
	// the dialog asks for.
	Body, Fields string
}

// field is a field of an action's dialog (assets/app.js): Path fields
// fill the {name} of the API's path instead of the body; Options are
// offered as suggestions.
type field struct {
	Name        string   `json:"name"`
	Label       string   `json:"label"`
	Type        string   `json:"type"`
	Required    bool     `json:"required,omitempty"`
	Path        bool     `json:"path,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// jsonAttr encodes v for a data-* attribute ("" for nil).
func jsonAttr(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// AdminActions are the actions an admin may take on the run, those that
// apply to it as it is: cancel, retry, resume, approve and reject, signal
// and update, pause or unpause, reset to a step, delete.
func (d *runData) AdminActions() []runAction {
	base := "/api/v1/runs/" + url.PathEscape(d.Run.ID)
	var out []runAction
	if d.CanCancel() {
		out = append(out, runAction{ID: "action-cancel", Label: "Cancel", API: base + "/cancel", Title: "Cancel the run", Class: "danger",
			Confirm: "Cancel run " + d.Run.ID + "? Its running steps are cancelled and it ends as cancelled.",
			Fields:  jsonAttr([]field{{Name: "reason", Label: "Reason", Type: "text"}})})
	}
	if d.CanRetry() {
		out = append(out, runAction{ID: "action-retry", Label: "Retry", API: base + "/retry", Title: "Retry the run",
			Confirm: "Run " + d.Run.ID + " again from its failed steps? The steps that completed keep their outputs."})
	}
	for _, w := range d.Waiting {
		step := url.PathEscape(w.Step)
		if w.Gate != nil {
			prompt := w.Gate.Prompt
			if prompt == "" {
				prompt = "Decide the approval gate " + w.Step + "."
			}
			comment := jsonAttr([]field{{Name: "comment", Label: "Comment", Type: "textarea"}})
			out = append(out,
				runAction{ID: "action-approve-" + token(w.Step), Label: "Approve " + w.Step, API: base + "/steps/" + step + "/approve",
					Title: "Approve " + w.Step, Confirm: prompt, Fields: comment, Class: "primary"},
				runAction{ID: "action-reject-" + token(w.Step), Label: "Reject " + w.Step, API: base + "/steps/" + step + "/reject",
					Title: "Reject " + w.Step, Confirm: prompt, Fields: comment, Class: "danger"})
			continue
		}
		ev := field{Name: "event", Label: "Event", Type: "text", Required: true, Options: w.Events}
		if len(w.Events) > 0 {
			ev.Placeholder = w.Events[0]
		}
		out = append(out, runAction{ID: "action-resume-" + token(w.Step), Label: "Resume " + w.Step, API: base + "/resume",
			Title: "Resume " + w.Step, Confirm: "Resume the waiting step " + w.Step + " with an event and an optional JSON payload.",
			Body:   jsonAttr(map[string]string{"step": w.Step}),
			Fields: jsonAttr([]field{ev, {Name: "payload", Label: "Payload (JSON)", Type: "json"}})})
	}
	if d.IsWorkflow() && !d.Terminal {
		out = append(out,
			runAction{ID: "action-signal", Label: "Signal…", API: base + "/signals/{name}", Title: "Signal the workflow",
				Confirm: "Send a signal with an optional JSON payload.",
				Fields: jsonAttr([]field{{Name: "name", Label: "Signal", Type: "text", Required: true, Path: true, Options: d.Signals},
					{Name: "payload", Label: "Payload (JSON)", Type: "json"}})},
			runAction{ID: "action-update", Label: "Update…", API: base + "/updates/{name}", Title: "Update the workflow",
				Confirm: "Send an update with optional JSON arguments and wait for its result.", Then: "show:#action-answer",
				Fields: jsonAttr([]field{{Name: "name", Label: "Update", Type: "text", Required: true, Path: true, Options: d.Updates},
					{Name: "args", Label: "Arguments (JSON)", Type: "json"}})})
	}
	if !d.Terminal {
		out = append(out, d.pauseActions(base)...)
	}
	if a, ok := d.resetAction(base); ok {
		out = append(out, a)
	}
	out = append(out, d.resetActions(base)...)
	return append(out, d.deleteAction(base))
}

// deleteAction deletes the run, by force while it is active, and goes to
// the runs.
func (d *runData) deleteAction(base string) runAction {
	a := runAction{ID: "action-delete", Label: "Delete", API: base, Method: http.MethodDelete, Title: "Delete the run", Class: "danger",
		Confirm: "Delete run " + d.Run.ID + " with its history, for good? Its child runs are kept.", Then: "goto:/"}
	if !d.Terminal {
		a.API += "?force=true"
		a.Confirm = "Run " + d.Run.ID + " is active. Delete it with its history and its work, for good? " +
			"Its running steps are stopped and cannot commit; nothing is cancelled or reported to a parent."
	}
	return a
}

// QueryAction is the query of a workflow run, which a reader may ask too
// (the API admits the read role); nil for other runs.
func (d *runData) QueryAction() *runAction {
	if !d.IsWorkflow() {
		return nil
	}
	return &runAction{ID: "action-query", Label: "Query…", API: "/api/v1/runs/" + url.PathEscape(d.Run.ID) + "/queries/{name}", Title: "Query the workflow",
		Confirm: "Ask the workflow a query with optional JSON arguments.", Then: "show:#action-answer",
		Fields: jsonAttr([]field{{Name: "name", Label: "Query", Type: "text", Required: true, Path: true},
			{Name: "args", Label: "Arguments (JSON)", Type: "json"}})}
}
