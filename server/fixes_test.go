package server

import (
	"net/http"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
)

// The problems that have a fix say what is wrong and what to do: an
// unknown definition with the nearest names, an unknown step or gate with
// the run's nearest steps, an invalid filter with what to pass; the fix
// is apart (fix) and ends the detail, so the detail reads as one line.
// On every backend.
func TestProblemFixes(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		ctx := t.Context()
		greet, err := e.client.StartRun(ctx, "greet", map[string]string{"name": "ann"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.waitStatus(greet.ID, heph.StatusCompleted)
		gate, err := e.client.StartRun(ctx, "gate", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.waitStatus(gate.ID, heph.StatusWaiting)
		doc, err := e.client.StartDocument(ctx, "approval", 0, map[string]string{"title": "t"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.waitStatus(doc.ID, heph.StatusWaiting)

		steps := func(id string) string {
			return "see the run's steps with heph show " + id + " (GET /api/v1/runs/" + id + ")"
		}
		for _, tc := range []struct {
			name         string
			method, path string
			body         any
			status       int
			detail, fix  string
		}{
			{"unknown flow", http.MethodPost, "/api/v1/runs", map[string]any{"name": "gret"}, 404,
				`no flow named "gret"; did you mean greet?`, fixDefinitions},
			{"unknown job kind", http.MethodPost, "/api/v1/runs", map[string]any{"kind": "job", "name": "emial"}, 404,
				`no job named "emial"; did you mean email?`, fixDefinitions},
			{"unknown workflow", http.MethodPost, "/api/v1/runs", map[string]any{"kind": "workflow", "name": "countr"}, 404,
				`no workflow named "countr"; did you mean counter?`, fixDefinitions},
			{"unknown document", http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "approvl"}, 404,
				`no document named "approvl"; did you mean approval?`, fixDefinitions},
			{"nothing near", http.MethodPost, "/api/v1/runs", map[string]any{"name": "zzzzzzzz"}, 404,
				`no flow named "zzzzzzzz"`, fixDefinitions},
			{"another kind", http.MethodPost, "/api/v1/runs", map[string]any{"kind": "flow", "name": "counter"}, 404,
				`no flow named "counter"`, `"counter" is a workflow, not a flow: pass kind "workflow" (heph start --kind workflow counter)`},
			{"unknown definition", http.MethodGet, "/api/v1/definitions/gret", nil, 404,
				`no definition named "gret"; did you mean greet?`, fixDefinitions},
			{"unknown graph", http.MethodGet, "/api/v1/definitions/gret/graph", nil, 404,
				`no definition named "gret"; did you mean greet?`, fixDefinitions},
			{"unknown step to resume", http.MethodPost, "/api/v1/runs/" + gate.ID + "/resume", map[string]any{"step": "wiat", "event": "go"}, 400,
				`did you mean "wait"?`, steps(gate.ID)},
			{"unknown gate", http.MethodPost, "/api/v1/runs/" + doc.ID + "/steps/reviw/approve", map[string]any{}, 400,
				`has no gate "reviw"; did you mean "review"?`, "see the gates waiting for a decision with heph approvals (GET /api/v1/approvals?run_id=" + doc.ID + ")"},
			{"unknown step's logs", http.MethodGet, "/api/v1/runs/" + greet.ID + "/logs?step=helo", nil, 400,
				`run ` + greet.ID + ` has no step "helo"; did you mean "hello"?`, steps(greet.ID)},
			{"a status mistyped", http.MethodGet, "/api/v1/runs?status=runnin", nil, 400,
				`query parameter status: "runnin" is not a run status; did you mean running?`,
				"pass one of pending, running, waiting, completed, failed, cancelled, continued, scheduled"},
			{"scheduled with another status", http.MethodGet, "/api/v1/runs?status=scheduled,failed", nil, 400,
				"scheduled is not combined with other statuses", "pass scheduled alone"},
			{"a kind of run", http.MethodGet, "/api/v1/runs?kind=job", nil, 400, `"job" is not a kind of run`, `pass "flow" (flows, documents and jobs) or "workflow"`},
			{"a limit", http.MethodGet, "/api/v1/runs?limit=0", nil, 400, "query parameter limit: 0 is out of range", "pass a whole number from 1 to 1000"},
			{"a time", http.MethodGet, "/api/v1/runs?created_after=yesterday", nil, 400, `expected an RFC 3339 time, got "yesterday"`,
				`pass an RFC 3339 time such as "2026-01-02T15:04:05Z"`},
			{"a cursor", http.MethodGet, "/api/v1/runs?cursor=garbage", nil, 400, `"garbage" is not a cursor of this list`,
				"pass the next of the page before, or no cursor for the first page"},
			{"a duration", http.MethodGet, "/api/v1/runs/" + greet.ID + "/history?wait=forever", nil, 400, `expected a duration, got "forever"`,
				`pass a duration such as "30s" or "5m"`},
		} {
			r := e.api.do(req{method: tc.method, path: tc.path, body: tc.body, unchecked: tc.status == 400 && tc.method == http.MethodGet})
			p := r.problem(t, tc.status)
			if !strings.Contains(p.Detail, tc.detail) || p.Fix != tc.fix || !strings.HasSuffix(p.Detail, "; "+tc.fix) || strings.Count(p.Detail, tc.fix) != 1 {
				t.Errorf("%s: detail %q, fix %q; want a detail with %q ending with the fix %q", tc.name, p.Detail, p.Fix, tc.detail, tc.fix)
			}
		}
		// The answer of an unknown step's logs is as the document says.
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/" + greet.ID + "/logs?step=helo"}).problem(t, http.StatusBadRequest)
		// A step the run has: its logs, none yet.
		e.api.call(http.MethodGet, "/api/v1/runs/"+greet.ID+"/logs?step=hello", nil, http.StatusOK, nil)
	})
}

// A start without the business value its flow's key needs names the
// field and what to pass.
func TestProblemFixBusinessValue(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newOrderEnv(t, b, nil)
		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: map[string]any{"name": "order"}}).problem(t, http.StatusBadRequest)
		fix := `pass business_value, the value of the flow's business key (such as "order-42"; heph start --business-value order-42)`
		if p.Fix != fix || !strings.HasPrefix(p.Detail, "business_value: is required: ") || !strings.HasSuffix(p.Detail, "; "+fix) ||
			len(p.Errors) != 1 || p.Errors[0].Path != "business_value" {
			t.Errorf("problem %+v", p)
		}
	})
}
