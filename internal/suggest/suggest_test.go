package suggest

import (
	"slices"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"start", "strt", 1}, {"kitten", "sitting", 3}, {"show", "show", 0}, {"hist", "history", 3},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"start", "status", "stats", "show", "history", "schedules"}
	for _, c := range []struct {
		name string
		want []string
	}{
		{"strt", []string{"start", "stats"}},
		{"hist", []string{"history"}}, // a prefix
		{"shwo", []string{"show"}},    // a transposition is two edits
		{"xyzzy", []string{}},         // nothing close
		{"start", []string{"stats"}},  // never the name itself
		{"SHOW", []string{"show"}},    // case folded
		{"s", []string{}},             // one letter is no prefix hint
	} {
		got := Closest(c.name, names)
		if !slices.Equal(got, c.want) {
			t.Errorf("Closest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	if got := DidYouMean("ordr", []string{"order", "orders"}, true); got != `; did you mean "order" or "orders"?` {
		t.Errorf("DidYouMean = %q", got)
	}
	if got := DidYouMean("zzz", []string{"order"}, false); got != "" {
		t.Errorf("DidYouMean of nothing close = %q", got)
	}
}
