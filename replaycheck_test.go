package hephaestus_test

import (
	"encoding/json"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// ReadHistories reads one export, several one after the other, or an
// array of them, and names the first value that is not an export.
func TestReadHistories(t *testing.T) {
	t.Parallel()
	one := func(id string) string {
		return `{"run_id": "` + id + `", "workflow": "w", "events": [{"seq": 1, "kind": "run_started"}]}`
	}
	for _, tc := range []struct {
		name, in string
		ids      []string
		err      string
	}{
		{"one", one("a"), []string{"a"}, ""},
		{"concatenated", one("a") + "\n" + one("b"), []string{"a", "b"}, ""},
		{"array then one", "[" + one("a") + "," + one("b") + "]\n" + one("c"), []string{"a", "b", "c"}, ""},
		{"empty", " \n", nil, "no history export in it"},
		{"not JSON", one("a") + " nope", nil, "history 2: not JSON"},
		{"no workflow", `{"run_id": "a", "events": [{"seq": 1, "kind": "run_started"}]}`, nil, `history 1: not a history export: "workflow" is missing`},
		{"no run id", `{"workflow": "w", "events": [{"seq": 1, "kind": "run_started"}]}`, nil, `history 1: not a history export: "run_id" is missing`},
		{"no events", `{"run_id": "a", "workflow": "w"}`, nil, `history 1: not a history export: "events" is missing or empty`},
		{"bad item", "[" + one("a") + `, {"x": 1}]`, nil, `history 2: not a history export: "workflow" is missing`},
		{"null item", "[" + one("a") + `, null]`, nil, `history 2: not a history export: null`},
		{"wrong type", `{"run_id": 7}`, nil, "history 1: not a history export: json: cannot unmarshal number"},
	} {
		xs, err := heph.ReadHistories(strings.NewReader(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || len(xs) != len(tc.ids) {
			t.Fatalf("%s: %d exports, %v", tc.name, len(xs), err)
		}
		for i, x := range xs {
			if x.RunID != tc.ids[i] {
				t.Errorf("%s: export %d is of run %q, want %q", tc.name, i+1, x.RunID, tc.ids[i])
			}
		}
	}
}

// A run's kind, from the stored kind and the runtime's metadata.
func TestRunKindOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind heph.RunKind
		meta map[string]string
		want heph.RunKind
	}{
		{heph.KindFlow, nil, heph.KindFlow},
		{"", map[string]string{"tenant": `"acme"`}, heph.KindFlow},
		{heph.KindFlow, map[string]string{hephtype.MetaDocument: `{"name": "d", "version": 1, "hash": "h"}`}, heph.KindDocument},
		{heph.KindFlow, map[string]string{hephtype.MetaJob: "true"}, heph.KindJob},
		{heph.KindWorkflow, map[string]string{hephtype.MetaJob: "true"}, heph.KindWorkflow},
	} {
		r := &heph.Run{Kind: tc.kind, Metadata: map[string]json.RawMessage{}}
		for k, v := range tc.meta {
			r.Metadata[k] = json.RawMessage(v)
		}
		if got := r.KindName(); got != tc.want {
			t.Errorf("kind %q, metadata %v: %q, want %q", tc.kind, tc.meta, got, tc.want)
		}
	}
}
