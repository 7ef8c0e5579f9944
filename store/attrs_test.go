package store_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

var decl = map[string]store.AttrType{"n": store.AttrInt, "f": store.AttrFloat, "s": store.AttrString, "k": store.AttrKeyword,
	"l": store.AttrKeywordList, "b": store.AttrBool, "t": store.AttrTime}

// AttrsOf converts Go and JSON values to the declared types, as stored,
// and refuses the rest naming the attribute.
func TestAttrsOf(t *testing.T) {
	at := time.Date(2026, 11, 1, 10, 0, 0, 1500, time.FixedZone("x", 3600))
	got, err := store.AttrsOf(decl, map[string]any{"n": json.Number("42"), "f": 3, "s": "a", "k": "b",
		"l": []any{"eu", "us"}, "b": true, "t": at})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.Attr{"n": {Type: store.AttrInt, Value: int64(42)}, "f": {Type: store.AttrFloat, Value: 3.0},
		"s": {Type: store.AttrString, Value: "a"}, "k": {Type: store.AttrKeyword, Value: "b"},
		"l": {Type: store.AttrKeywordList, Value: []string{"eu", "us"}}, "b": {Type: store.AttrBool, Value: true},
		"t": {Type: store.AttrTime, Value: time.Date(2026, 11, 1, 9, 0, 0, 1000, time.UTC)}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("AttrsOf (-want +got):\n%s", d)
	}
	col, err := store.EncodeAttrs(got)
	if err != nil {
		t.Fatal(err)
	}
	back, err := store.DecodeAttrs([]byte(*col))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, back); d != "" {
		t.Fatalf("decoded (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{"nn": 1}, `"nn" is not declared; did you mean "n"?`},
		{map[string]any{"n": 1.5}, "search attribute n (int)"},
		{map[string]any{"n": "1"}, "search attribute n (int)"},
		{map[string]any{"f": math.Inf(1)}, "search attribute f"},
		{map[string]any{"l": []any{"a", 1}}, "element 1"},
		{map[string]any{"t": "yesterday"}, "search attribute t (time)"},
		{map[string]any{"s": strings.Repeat("x", store.MaxAttrText+1)}, "search attribute s"},
	} {
		_, err := store.AttrsOf(decl, tc.in)
		if !errors.Is(err, hephtype.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AttrsOf(%v) = %v, want ErrInvalidInput with %q", tc.in, err, tc.want)
		}
	}
}

// Check refuses filters a store cannot run.
func TestAttrFilterCheck(t *testing.T) {
	for _, f := range []store.AttrFilter{
		{{Name: "b", Type: store.AttrBool, Op: store.OpLt, Values: []any{true}}},
		{{Name: "l", Type: store.AttrKeywordList, Op: store.OpGt, Values: []any{"a"}}},
		{{Name: "n", Type: store.AttrInt, Op: store.OpEq, Values: []any{"1"}}},
		{{Name: "n", Type: store.AttrInt, Op: store.OpIn}},
		{{Name: "n", Type: store.AttrInt, Op: "~", Values: []any{int64(1)}}},
		{{Name: "1n", Type: store.AttrInt, Op: store.OpEq, Values: []any{int64(1)}}},
		{{Name: "n", Type: "number", Op: store.OpEq, Values: []any{int64(1)}}},
	} {
		if err := f.Check(); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("Check(%+v) = %v, want ErrInvalidInput", f, err)
		}
	}
}
