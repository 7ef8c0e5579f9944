package workflow_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// tagged upserts its stage before and after a timer, and its amount with
// the second; with bad true it upserts what it does not declare.
var tagged = workflow.New("tagged", func(ctx workflow.Context, in struct {
	Amount int    `json:"amount"`
	Bad    string `json:"bad"`
}) (int, error) {
	switch in.Bad {
	case "name":
		return 0, workflow.UpsertSearchAttributes(ctx, map[string]any{"stgae": "x"})
	case "type":
		return 0, workflow.UpsertSearchAttributes(ctx, map[string]any{"amount": "many"})
	}
	if err := workflow.UpsertSearchAttributes(ctx, map[string]any{"stage": "waiting", "since": workflow.Now(ctx)}); err != nil {
		return 0, err
	}
	if err := workflow.Sleep(ctx, time.Minute); err != nil {
		return 0, err
	}
	return in.Amount, workflow.UpsertSearchAttributes(ctx, map[string]any{"stage": "done", "amount": in.Amount})
}).SearchAttribute("stage", flow.AttrKeyword).SearchAttribute("amount", flow.AttrInt).SearchAttribute("since", flow.AttrTime)

// Each upsert is one command, recorded once whether the workflow replays
// every activation or keeps its instance; the entry records the typed
// attributes as the runs table stores them.
func TestUpsertSearchAttributes(t *testing.T) {
	eachMode(t, func(t *testing.T, m mode) {
		e := newEnv(t, m, wfs(tagged))
		r := e.start(tagged, map[string]any{"amount": 42})
		e.advance(time.Minute)
		wantStatus(t, r, hephtype.StatusCompleted)
		ups := find(r.History(), hephtype.EventAttributesUpserted)
		if len(ups) != 2 {
			t.Fatalf("%d search_attributes_upserted, want 2: %v", len(ups), kinds(r.History()))
		}
		var first, second map[string]struct {
			T string          `json:"t"`
			V json.RawMessage `json:"v"`
		}
		if err := json.Unmarshal(ups[0].Data, &first); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ups[1].Data, &second); err != nil {
			t.Fatal(err)
		}
		if first["stage"].T != "keyword" || string(first["stage"].V) != `"waiting"` || first["since"].T != "time" || len(second) != 2 || string(second["amount"].V) != "42" {
			t.Fatalf("the entries record %s and %s", ups[0].Data, ups[1].Data)
		}
	})
}

// A name the workflow does not declare, or a value not of its type, is an
// error from the call that names it, and records nothing.
func TestUpsertSearchAttributesRefused(t *testing.T) {
	e := newEnv(t, modes[0], wfs(tagged))
	for bad, want := range map[string]string{
		"name": `search attribute "stgae" is not declared by workflow tagged; did you mean "stage"?`,
		"type": "search attribute amount (int): many (string) is not an integer",
	} {
		r := e.start(tagged, map[string]any{"bad": bad})
		e.settle()
		wantStatus(t, r, hephtype.StatusFailed)
		if msg := r.Err(); !strings.Contains(msg, want) {
			t.Errorf("bad %s: %q, want %q", bad, msg, want)
		}
		if n := countKind(r.History(), hephtype.EventAttributesUpserted); n != 0 {
			t.Errorf("bad %s: %d upserts recorded", bad, n)
		}
	}
}
