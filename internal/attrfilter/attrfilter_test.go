package attrfilter_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/internal/attrfilter"
	"github.com/hephaestus-go/hephaestus/internal/puritytest"
	"github.com/hephaestus-go/hephaestus/store"
)

func TestPurity(t *testing.T) { puritytest.Check(t, "internal/attrfilter") }

var types = map[string]store.AttrType{
	"amount": store.AttrInt, "region": store.AttrKeywordList, "updated": store.AttrTime, "score": store.AttrFloat,
	"vip": store.AttrBool, "customer": store.AttrKeyword, "note": store.AttrString,
}

func c(name string, t store.AttrType, op store.AttrOp, vals ...any) store.AttrCond {
	return store.AttrCond{Name: name, Type: t, Op: op, Values: vals}
}

func TestParse(t *testing.T) {
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want store.AttrFilter
	}{
		{"", nil},
		{"  ", nil},
		{"amount > 100", store.AttrFilter{c("amount", store.AttrInt, store.OpGt, int64(100))}},
		{"amount>=-3 AND amount<7", store.AttrFilter{c("amount", store.AttrInt, store.OpGe, int64(-3)), c("amount", store.AttrInt, store.OpLt, int64(7))}},
		{"region in [eu, us]", store.AttrFilter{c("region", store.AttrKeywordList, store.OpIn, "eu", "us")}},
		{"region IN [\"a b\",\"\\u00fc\"]", store.AttrFilter{c("region", store.AttrKeywordList, store.OpIn, "a b", "ü")}},
		{"updated < 2026-11-01", store.AttrFilter{c("updated", store.AttrTime, store.OpLt, day)}},
		{"updated != 2026-11-01T01:00:00.0000019+01:00", store.AttrFilter{c("updated", store.AttrTime, store.OpNe, day.Add(time.Microsecond))}},
		{"score between 1.5 and 2e1", store.AttrFilter{c("score", store.AttrFloat, store.OpGe, 1.5), c("score", store.AttrFloat, store.OpLe, 20.0)}},
		{"vip = TRUE and customer = acme", store.AttrFilter{c("vip", store.AttrBool, store.OpEq, true), c("customer", store.AttrKeyword, store.OpEq, "acme")}},
		{"note <= \"x=y\"", store.AttrFilter{c("note", store.AttrString, store.OpLe, "x=y")}},
	} {
		got, err := attrfilter.Parse(tc.in, types)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, d)
		}
		if err := got.Check(); err != nil {
			t.Errorf("Parse(%q): Check: %v", tc.in, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"amout > 1", `at 1: unknown search attribute "amout"; did you mean "amount"?`},
		{"amount > x", `at 10: amount is of type int: "x" is not an integer`},
		{"amount >", `at 9: expected a value of amount (int), found the end of the filter`},
		{"amount 5", `at 8: expected an operator (= != < <= > >=), in or between after amount, found "5"`},
		{"amount = 1 amount = 2", `at 12: expected and or the end of the filter, found "amount"`},
		{"amount = 1 and", `at 15: expected an attribute name, found the end of the filter`},
		{"region < eu", `at 8: < does not apply to region, of type keyword_list`},
		{"vip between true and false", `at 5: between does not apply to vip, of type bool`},
		{"region in eu", `at 11: expected [, found "eu"`},
		{"region in [eu us]", `at 15: expected , or ], found "us"`},
		{"region in [eu,", `at 15: expected a value of region (keyword_list), found the end of the filter`},
		{"updated < 2026-13-01", `at 11: updated is of type time: "2026-13-01" is not a time in RFC 3339 (2026-11-01T10:00:00Z) or a date (2026-11-01)`},
		{"note = \"abc", `at 8: the string is not closed (")`},
		{"amount = \"1\"", `at 10: amount is of type int: "1" is a quoted string`},
		{"amount ! 1", `at 8: expected an operator (= != < <= > >=), in or between after amount, found the character "!"`},
		{"score between 1 or 2", `at 17: expected and in between, found "or"`},
	} {
		_, err := attrfilter.Parse(tc.in, types)
		var fe *attrfilter.Error
		if !errors.As(err, &fe) {
			t.Errorf("Parse(%q) = %v, want an *Error", tc.in, err)
			continue
		}
		if got := strings.TrimPrefix(err.Error(), "filter: "); got != tc.want {
			t.Errorf("Parse(%q):\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
	if _, err := attrfilter.Parse("x = 1", nil); err == nil || !strings.Contains(err.Error(), "no search attribute is declared") {
		t.Errorf("no declarations: %v", err)
	}
}

// FuzzParse: no input panics, and a filter read passes store's Check.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"amount > 100", "region in [eu, \"us\"]", "updated < 2026-11-01 and vip = true",
		"score between -1 and 1e3", "note = \"\\\"\"", "amount in [1,2,3]", "!= <", "\"\xff\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := attrfilter.Parse(s, types)
		if err != nil {
			var fe *attrfilter.Error
			if !errors.As(err, &fe) || fe.Pos < 1 || fe.Pos > len(s)+1 && fe.Pos != attrfilter.MaxLen+1 {
				t.Fatalf("Parse(%q): %v (%#v)", s, err, err)
			}
			return
		}
		if err := got.Check(); err != nil {
			t.Fatalf("Parse(%q) = %+v: Check: %v", s, got, err)
		}
	})
}
