// Package suggest finds the names a mistyped name was probably meant to
// be, for "did you mean" hints: commands, flags, definitions, steps.
package suggest

import (
	"slices"
	"strings"
)

// MaxDistance is the largest edit distance at which a name is suggested;
// a name of fewer than four runes gets one edit.
const MaxDistance = 2

// Closest returns the candidates within MaxDistance edits of name (case
// folded), or that name is a prefix of, nearest first (ties in the order
// given); at most three, none equal to name.
func Closest(name string, candidates []string) []string {
	type hit struct {
		name string
		dist int
	}
	var hits []hit
	lname := strings.ToLower(name)
	maxd := MaxDistance
	if len([]rune(name)) < 4 {
		maxd = 1
	}
	seen := map[string]bool{}
	for _, c := range candidates {
		if c == name || c == "" || seen[c] {
			continue
		}
		lc := strings.ToLower(c)
		d := Distance(lname, lc)
		if d > maxd && (len(lname) <= 1 || !strings.HasPrefix(lc, lname)) {
			continue
		}
		seen[c] = true
		hits = append(hits, hit{c, d})
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.dist - b.dist })
	out := make([]string, 0, min(len(hits), 3))
	for i := 0; i < len(hits) && i < 3; i++ {
		out = append(out, hits[i].name)
	}
	return out
}

// DidYouMean is "; did you mean X?" (or "X or Y") for name among
// candidates, quote wrapping each name ("%q" style when quote is true),
// or "" when none is close.
func DidYouMean(name string, candidates []string, quote bool) string {
	hits := Closest(name, candidates)
	if len(hits) == 0 {
		return ""
	}
	if quote {
		for i, h := range hits {
			hits[i] = `"` + h + `"`
		}
	}
	return "; did you mean " + strings.Join(hits, " or ") + "?"
}

// Distance is the Levenshtein distance of a and b, in runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
