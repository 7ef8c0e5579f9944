package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/internal/suggest"
)

// The fixes of the problems that have one: what to do, in a few words
// that name the command line and the API alike.
const (
	fixDefinitions = "list the definitions with heph definitions (GET /api/v1/definitions)"
	fixSteps       = "see the run's steps with heph show %s (GET /api/v1/runs/%s)"
	fixGates       = "see the gates waiting for a decision with heph approvals (GET /api/v1/approvals?run_id=%s)"
)

// withFix is the problem of err with a fix: the fix is set apart (Fix)
// and ends the detail too, so that a client that prints the detail alone
// (heph prints one line) says what to do. An error the server does not
// explain (a 500) gets no fix.
func withFix(err error, fix string) error {
	p := problemOf(err)
	if p.Status >= http.StatusInternalServerError {
		return err
	}
	q := *p
	q.Fix = fix
	if !strings.Contains(q.Detail, fix) {
		q.Detail += "; " + fix
	}
	return &q
}

// definitionNotFound reports whether err says that no definition has a
// name: an unknown flow, workflow, job kind or document.
func definitionNotFound(err error) bool {
	return errors.Is(err, hephaestus.ErrFlowNotFound) || errors.Is(err, hephaestus.ErrWorkflowNotFound) ||
		errors.Is(err, hephaestus.ErrDocumentNotFound)
}

// unknownDefinition explains a name of a kind ("" for any) that names no
// definition: the nearest names of the kind ("did you mean"), another
// kind that has the name, and where to list them. err is returned as it
// is when it is not about an unknown name, or when the name is known
// (then its version is not, and err says so). start tells a start (whose
// fix names heph start) from a lookup.
func (s *Server) unknownDefinition(c *call, kind, name string, start bool, err error) error {
	if !definitionNotFound(err) {
		return err
	}
	defs, dErr := s.cfg.Client.Definitions(c.ctx())
	if dErr != nil {
		return withFix(err, fixDefinitions)
	}
	var names, otherKinds []string
	for _, d := range defs {
		switch {
		case kind != "" && d.Kind != kind && d.Name == name:
			otherKinds = append(otherKinds, d.Kind)
		case kind != "" && d.Kind != kind:
		case d.Name == name:
			return err // the name is known: its version is not
		default:
			names = append(names, d.Name)
		}
	}
	what := kind
	if what == "" {
		what = "definition"
	}
	p := problemOf(err)
	out := &Problem{Status: p.Status, Kind: p.Kind, Detail: fmt.Sprintf("no %s named %q%s", what, name, suggest.DidYouMean(name, names, false))}
	if len(otherKinds) > 0 {
		slices.Sort(otherKinds)
		fix := fmt.Sprintf("%q is a %s, not a %s: pass kind %q", name, strings.Join(otherKinds, " and a "), kind, otherKinds[0])
		if start {
			fix += fmt.Sprintf(" (heph start --kind %s %s)", otherKinds[0], name)
		}
		return withFix(out, fix)
	}
	return withFix(out, fixDefinitions)
}

// unknownStep explains a step name that a run does not have: the run's
// steps nearest to it, and where to see them all; err when the step is
// known (or the run's steps are not).
func unknownStep(run *hephaestus.Run, step string, err error) error {
	var names []string
	for _, st := range run.Steps {
		if st.Name == "" { // a run of a flow this process lacks: its steps are unknown
			return err
		}
		if st.Name == step {
			return err
		}
		names = append(names, st.Name)
	}
	if len(names) == 0 {
		return err
	}
	p := badRequest(fmt.Sprintf("run %s has no step %q%s", run.ID, step, suggest.DidYouMean(step, names, true)))
	return withFix(p, fmt.Sprintf(fixSteps, run.ID, run.ID))
}
