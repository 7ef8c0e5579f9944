package postgres_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
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
	qBenchRuns = `INSERT INTO heph.runs (id, workflow, version, kind, status, created_at, updated_at)
		SELECT 'run-' || lpad(i::text, 9, '0'), 'bench', 1, 'flow', 'completed',
			'2030-01-01'::timestamptz + i * interval '1 millisecond', '2030-01-01'::timestamptz + i * interval '1 millisecond'
		FROM generate_series(1, $1) AS i`
	qBenchAttrs = `INSERT INTO heph.run_attributes (run_id, name, type, s, n, f)
		SELECT 'run-' || lpad(i::text, 9, '0'), 'amount', 'int', NULL::text, (i % 10000)::bigint, NULL::double precision FROM generate_series(1, $1) AS i
		UNION ALL
		SELECT 'run-' || lpad(i::text, 9, '0'), 'region', 'keyword_list', (ARRAY['eu', 'us', 'apac', 'latam'])[i % 4 + 1], NULL, NULL
		FROM generate_series(1, $1) AS i`
)

// BenchmarkListAttrs lists the newest 100 of benchAttrRuns runs (loaded
// by INSERT … SELECT generate_series, two search attributes each), plain
// and filtered by search attributes (docs/benchmarks.md).
func BenchmarkListAttrs(b *testing.B) {
	s := open(b, &postgres.Config{DSN: pgtest.DSN(b)})
	n := benchAttrRuns(b)
	ctx := b.Context()
	for _, q := range []string{qBenchRuns, qBenchAttrs, "ANALYZE heph.runs", "ANALYZE heph.run_attributes"} {
		var err error
		if q[0] == 'A' {
			_, err = s.Pool().Exec(ctx, q)
		} else {
			_, err = s.Pool().Exec(ctx, q, n)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range benchAttrFilters {
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

var benchAttrFilters = []struct {
	name string
	f    store.AttrFilter
}{
	{"unfiltered", nil},
	{"region=eu", store.AttrFilter{{Name: "region", Type: store.AttrKeywordList, Op: store.OpEq, Values: []any{"eu"}}}},
	{"amount>9990", store.AttrFilter{{Name: "amount", Type: store.AttrInt, Op: store.OpGt, Values: []any{int64(9990)}}}},
	{"amount>9990,region=eu", store.AttrFilter{{Name: "amount", Type: store.AttrInt, Op: store.OpGt, Values: []any{int64(9990)}},
		{Name: "region", Type: store.AttrKeywordList, Op: store.OpEq, Values: []any{"eu"}}}},
}
