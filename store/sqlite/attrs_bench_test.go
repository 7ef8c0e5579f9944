package sqlite

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hephaestus-go/hephaestus/store"
)

// benchAttrRuns is how many runs BenchmarkListAttrs loads: 1,000,000, or
// HEPH_BENCH_RUNS.
func benchAttrRuns(b *testing.B) int {
	if v := os.Getenv("HEPH_BENCH_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	return 1_000_000
}

// The attributes of the loaded run i: amount = i % 10000, region one of
// eu, us, apac, latam (i % 4).
const (
	qBenchRuns = `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1)
		INSERT INTO runs (id, workflow, version, kind, status, created_at, updated_at)
		SELECT printf('run-%09d', i), 'bench', 1, 'flow', 'completed', 1893456000000000 + i * 1000, 1893456000000000 + i * 1000 FROM s`
	qBenchAttrs = `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1)
		INSERT INTO run_attributes (run_id, name, type, s, n, f)
		SELECT printf('run-%09d', i), 'amount', 'int', NULL, i % 10000, NULL FROM s
		UNION ALL
		SELECT printf('run-%09d', i), 'region', 'keyword_list', CASE i % 4 WHEN 0 THEN 'eu' WHEN 1 THEN 'us' WHEN 2 THEN 'apac' ELSE 'latam' END, NULL, NULL FROM s`
)

// BenchmarkListAttrs lists the newest 100 of benchAttrRuns runs (loaded
// by a recursive CTE, two search attributes each), plain and filtered by
// search attributes (docs/benchmarks.md).
func BenchmarkListAttrs(b *testing.B) {
	s := open(b, &Config{Path: filepath.Join(b.TempDir(), "heph.db")})
	n := benchAttrRuns(b)
	ctx := b.Context()
	for _, q := range []string{qBenchRuns, qBenchAttrs, "ANALYZE"} {
		if _, err := s.DB().ExecContext(ctx, q, n); err != nil && q != "ANALYZE" {
			b.Fatal(err)
		} else if q == "ANALYZE" {
			if _, err := s.DB().ExecContext(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		f    store.AttrFilter
	}{
		{"unfiltered", nil},
		{"region=eu", store.AttrFilter{{Name: "region", Type: store.AttrKeywordList, Op: store.OpEq, Values: []any{"eu"}}}},
		{"amount>9990", store.AttrFilter{{Name: "amount", Type: store.AttrInt, Op: store.OpGt, Values: []any{int64(9990)}}}},
		{"amount>9990,region=eu", store.AttrFilter{{Name: "amount", Type: store.AttrInt, Op: store.OpGt, Values: []any{int64(9990)}},
			{Name: "region", Type: store.AttrKeywordList, Op: store.OpEq, Values: []any{"eu"}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				p := store.ListRunsParams{Attrs: tc.f, Limit: 100}
				if _, err := s.ListRuns(ctx, &p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
