package flowdoc

import (
	"encoding/json"
	"slices"
	"testing"
)

// The schema lists exactly the keys the parser accepts.
func TestSchemaMatchesParser(t *testing.T) {
	var s struct {
		ID         string                     `json:"$id"`
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(Schema, &s); err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	if s.ID != SchemaID {
		t.Errorf("$id %q, want %q", s.ID, SchemaID)
	}
	same := func(what string, props map[string]json.RawMessage, keys []string) {
		t.Helper()
		var got []string
		for k := range props {
			got = append(got, k)
		}
		slices.Sort(got)
		want := slices.Clone(keys)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the schema has %v, the parser %v", what, got, want)
		}
	}
	same("document", s.Properties, docKeys)
	same("step", s.Defs["step"].Properties, stepKeys)
	same("options", s.Defs["options"].Properties, optKeys)
	same("retry", s.Defs["retry"].Properties, retryKeys)
}
