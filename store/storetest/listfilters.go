package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// testListRunsMore: the filters by kind, queue, metadata and text.
func testListRunsMore(t *testing.T, h *harness) {
	meta := func(kv ...string) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = raw(kv[i+1])
		}
		return m
	}
	f1 := withTasks(newRun("run-f1"), task("q1", "s", at(0)), task("q3", "t", at(0)))
	f1.Workflow, f1.Tags = "orders", []string{"Blue", "x"}
	f1.BusinessID, f1.KeyScope = "order::ABC-1", businesskey.ScopeNone
	f1.Metadata = meta("tenant", `"acme"`, "n", `42`, "ok", `true`, "nil", `null`, "obj", `{"a":1}`, "list", `[1]`, "odd key.$[0]", `"v"`)
	f2 := withTasks(newRun("run-f2"), task("q2", "s", at(0)))
	f2.Workflow, f2.Status, f2.Error = "billing", hephtype.StatusFailed, "Card DECLINED by bank"
	f2.Metadata = meta("tenant", `"globex"`, "n", `1.5`)
	w1 := withTasks(newRun("run-w1"), store.NewTask{Queue: "q1", Kind: store.TaskDecision, Index: -1})
	w1.Workflow, w1.Kind = "checkout", hephtype.KindWorkflow
	w1.Metadata = meta("tenant", `"acme"`, "n", `"42"`)
	f3 := newRun("run-f3")
	f3.Workflow, f3.Status = "orders", hephtype.StatusCompleted
	h.create(at(0), f1)
	h.create(at(time.Minute), f2)
	h.create(at(2*time.Minute), w1)
	h.create(at(3*time.Minute), f3)

	for _, tc := range []struct {
		name string
		p    store.ListRunsParams
		want []string
	}{
		{"kind flow", store.ListRunsParams{Kind: hephtype.KindFlow}, []string{"run-f3", "run-f2", "run-f1"}},
		{"kind workflow", store.ListRunsParams{Kind: hephtype.KindWorkflow}, []string{"run-w1"}},
		{"queue", store.ListRunsParams{Queue: "q1"}, []string{"run-w1", "run-f1"}},
		{"another queue of the run", store.ListRunsParams{Queue: "q3"}, []string{"run-f1"}},
		{"queue without runs", store.ListRunsParams{Queue: "q9"}, nil},
		{"queue and its workflows", store.ListRunsParams{Queue: "q2", QueueWorkflows: []string{"orders"}}, []string{"run-f3", "run-f2", "run-f1"}},
		{"queue workflows without a queue", store.ListRunsParams{QueueWorkflows: []string{"orders"}}, []string{"run-f3", "run-w1", "run-f2", "run-f1"}},
		{"metadata string", store.ListRunsParams{Metadata: map[string]string{"tenant": "acme"}}, []string{"run-w1", "run-f1"}},
		{"metadata number or its text", store.ListRunsParams{Metadata: map[string]string{"n": "42"}}, []string{"run-w1", "run-f1"}},
		{"metadata decimal", store.ListRunsParams{Metadata: map[string]string{"n": "1.5"}}, []string{"run-f2"}},
		{"metadata boolean", store.ListRunsParams{Metadata: map[string]string{"ok": "true"}}, []string{"run-f1"}},
		{"metadata null", store.ListRunsParams{Metadata: map[string]string{"nil": "null"}}, []string{"run-f1"}},
		{"metadata object", store.ListRunsParams{Metadata: map[string]string{"obj": `{"a":1}`}}, nil},
		{"metadata array", store.ListRunsParams{Metadata: map[string]string{"list": `[1]`}}, nil},
		{"metadata odd key", store.ListRunsParams{Metadata: map[string]string{"odd key.$[0]": "v"}}, []string{"run-f1"}},
		{"metadata every key", store.ListRunsParams{Metadata: map[string]string{"tenant": "acme", "n": "42", "ok": "true"}}, []string{"run-f1"}},
		{"metadata missing key", store.ListRunsParams{Metadata: map[string]string{"tenant": "acme", "nope": "x"}}, nil},
		{"metadata case", store.ListRunsParams{Metadata: map[string]string{"tenant": "ACME"}}, nil},
		{"text in the business id", store.ListRunsParams{Text: "abc-1"}, []string{"run-f1"}},
		{"text in a tag", store.ListRunsParams{Text: "BLUE"}, []string{"run-f1"}},
		{"text in the error", store.ListRunsParams{Text: "declined"}, []string{"run-f2"}},
		{"text in the workflow", store.ListRunsParams{Text: "Check"}, []string{"run-w1"}},
		{"text in the id", store.ListRunsParams{Text: "f3"}, []string{"run-f3"}},
		{"text everywhere", store.ListRunsParams{Text: "run-"}, []string{"run-f3", "run-w1", "run-f2", "run-f1"}},
		{"text is literal", store.ListRunsParams{Text: "%"}, nil},
		{"text is literal too", store.ListRunsParams{Text: "run_"}, nil},
		{"combined", store.ListRunsParams{Kind: hephtype.KindFlow, Queue: "q1", Metadata: map[string]string{"tenant": "acme"}, Text: "order"}, []string{"run-f1"}},
	} {
		page := h.list(tc.p)
		diff(t, tc.name, tc.want, ids(page.Runs))
	}
	// The filters page like the others.
	var got []string
	p := store.ListRunsParams{Text: "run-", Kind: hephtype.KindFlow, Limit: 1}
	for range 10 {
		page := h.list(p)
		got = append(got, ids(page.Runs)...)
		if page.Next == "" {
			break
		}
		p.Cursor = page.Next
	}
	diff(t, "pages", []string{"run-f3", "run-f2", "run-f1"}, got)
}
