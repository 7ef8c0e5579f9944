package versionrule_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/hephaestus-go/hephaestus/internal/versionrule"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule versionrule.Rule
		want string // "" for valid
	}{
		{"pinned", versionrule.Rule{Type: "pinned", Version: 2}, ""},
		{"pinned zero", versionrule.Rule{Type: "pinned"}, "version: a pinned rule needs a version of 1 or more, not 0"},
		{"pinned with split", versionrule.Rule{Type: "pinned", Version: 1, Split: map[int]int{1: 100}}, "a pinned rule has only a version"},
		{"split", versionrule.Rule{Type: "percentage", Split: map[int]int{1: 90, 2: 10}}, ""},
		{"split sum", versionrule.Rule{Type: "percentage", Split: map[int]int{1: 90, 2: 5}}, "split: the weights sum to 95, not 100"},
		{"split zero weight", versionrule.Rule{Type: "percentage", Split: map[int]int{1: 100, 2: 0}}, "split: version 2: weight 0 is not between 1 and 100"},
		{"split bad version", versionrule.Rule{Type: "percentage", Split: map[int]int{0: 100}}, "split: version 0: versions count from 1"},
		{"split empty", versionrule.Rule{Type: "percentage"}, "split: a percentage rule needs at least one version"},
		{"field", versionrule.Rule{Type: "field", Field: "plan", Map: map[string]int{"enterprise": 3}, Default: 2}, ""},
		{"field no default", versionrule.Rule{Type: "field", Field: "plan", Map: map[string]int{"enterprise": 3}}, "default: a field rule needs a default version"},
		{"field empty", versionrule.Rule{Type: "field", Default: 1}, "field: empty"},
		{"field empty segment", versionrule.Rule{Type: "field", Field: "a..b", Default: 1}, `field: "a..b" has an empty segment`},
		{"field map version", versionrule.Rule{Type: "field", Field: "plan", Map: map[string]int{"x": 0}, Default: 1}, `map: value "x": version 0`},
		{"no type", versionrule.Rule{Version: 1}, "type: missing"},
		{"bad type", versionrule.Rule{Type: "random"}, `type: "random" is not`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rule.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, versionrule.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestChoose(t *testing.T) {
	field := &versionrule.Rule{Type: "field", Field: "customer.plan", Map: map[string]int{"enterprise": 3, "7": 4, "true": 5}, Default: 2}
	for _, tc := range []struct {
		input   string
		version int
		why     string
	}{
		{`{"customer":{"plan":"enterprise"}}`, 3, "field customer.plan=enterprise"},
		{`{"customer":{"plan":"free"}}`, 2, "field customer.plan default"},
		{`{"customer":{"plan":7}}`, 4, "field customer.plan=7"},
		{`{"customer":{"plan":true}}`, 5, "field customer.plan=true"},
		{`{"customer":{"plan":null}}`, 2, "field customer.plan default"},
		{`{"customer":{"plan":{"x":1}}}`, 2, "field customer.plan default"},
		{`{"customer":"enterprise"}`, 2, "field customer.plan default"},
		{`{}`, 2, "field customer.plan default"},
		{`null`, 2, "field customer.plan default"},
		{``, 2, "field customer.plan default"},
		{`[1,2]`, 2, "field customer.plan default"},
	} {
		v, why := versionrule.Choose(field, json.RawMessage(tc.input), "k")
		if v != tc.version || why != tc.why {
			t.Errorf("Choose(field, %s) = %d, %q; want %d, %q", tc.input, v, why, tc.version, tc.why)
		}
	}
	if v, why := versionrule.Choose(&versionrule.Rule{Type: "pinned", Version: 7}, nil, "k"); v != 7 || why != "pinned" {
		t.Errorf("Choose(pinned 7) = %d, %q", v, why)
	}
}

func TestTargetsAndString(t *testing.T) {
	r := &versionrule.Rule{Type: "field", Field: "plan", Map: map[string]int{"a": 3, "b": 3, "c": 1}, Default: 2}
	if got := fmt.Sprint(r.Targets()); got != "[1 2 3]" {
		t.Errorf("Targets = %s", got)
	}
	if got := r.String(); got != "field plan: a=3,b=3,c=1, default 2" {
		t.Errorf("String = %q", got)
	}
	s := &versionrule.Rule{Type: "percentage", Split: map[int]int{2: 10, 1: 90}}
	if got := s.String(); got != "percentage 1=90,2=10" {
		t.Errorf("String = %q", got)
	}
}

// TestBucketProperties: a valid split always gives one of its versions,
// the same for the same key; a version of weight 100 is always chosen.
func TestBucketProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(t, "versions")
		split := map[int]int{}
		left := 100
		for i := 1; i <= n; i++ {
			w := left
			if i < n {
				w = rapid.IntRange(1, left-(n-i)).Draw(t, "weight")
			}
			split[i*2] = w
			left -= w
		}
		r := &versionrule.Rule{Type: "percentage", Split: split}
		if err := r.Validate(); err != nil {
			t.Fatalf("generated split %v: %v", split, err)
		}
		key := rapid.String().Draw(t, "key")
		v, why := versionrule.Choose(r, nil, key)
		if _, ok := split[v]; !ok || why != "percentage" {
			t.Fatalf("Choose(%v, %q) = %d, %q: not a version of the split", split, key, v, why)
		}
		if again, _ := versionrule.Choose(r, nil, key); again != v {
			t.Fatalf("Choose(%v, %q) = %d then %d", split, key, v, again)
		}
		if n == 1 && v != 2 {
			t.Fatalf("single version split chose %d", v)
		}
	})
}

// TestBucketDistribution: over 10,000 keys, each version of a 90/10 split
// gets its share within 5 standard deviations of the binomial (the keys
// are fixed, so the outcome is too).
func TestBucketDistribution(t *testing.T) {
	const n = 10000
	split := map[int]int{1: 90, 2: 10}
	counts := map[int]int{}
	for i := range n {
		counts[versionrule.Bucket(split, fmt.Sprintf("run-%d", i))]++
	}
	for v, w := range split {
		p := float64(w) / 100
		mean, sigma := n*p, math.Sqrt(n*p*(1-p))
		if got := float64(counts[v]); math.Abs(got-mean) > 5*sigma {
			t.Errorf("version %d: %d of %d, want %.0f ± %.0f", v, counts[v], n, mean, 5*sigma)
		}
	}
}

// TestLookupProperty: a string value put at a generated path reads back.
func TestLookupProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		segs := rapid.SliceOfN(rapid.StringMatching(`[a-z]{1,5}`), 1, 4).Draw(t, "path")
		val := rapid.String().Draw(t, "value")
		var doc any = val
		for i := len(segs) - 1; i >= 0; i-- {
			doc = map[string]any{segs[i]: doc}
		}
		raw, _ := json.Marshal(doc)
		got, ok := versionrule.Lookup(raw, strings.Join(segs, "."))
		if !ok || got != val {
			t.Fatalf("Lookup(%s, %v) = %q, %v; want %q", raw, segs, got, ok, val)
		}
	})
}
