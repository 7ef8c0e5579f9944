package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Builds = (*Store)(nil)

// The statements of store.Builds (migration 0018_builds); § stands for
// the store's schema.
const (
	qBuildRuns = "SELECT build_id, count(*) FROM §runs WHERE workflow = $1 AND status IN ('pending', 'running', 'waiting') " +
		"GROUP BY build_id ORDER BY build_id"
	// One statement: the count and the insert see one snapshot.
	qRetire = `WITH c AS (
		SELECT count(*) AS n FROM §runs WHERE workflow = $1 AND build_id = $2 AND status IN ('pending', 'running', 'waiting')
	), i AS (
		INSERT INTO §retired_builds (workflow, build_id, retired_at) SELECT $1, $2, $3 WHERE (SELECT n FROM c) = 0
		ON CONFLICT DO NOTHING
	)
	SELECT n FROM c`
	qRetired = "SELECT workflow, build_id, retired_at FROM §retired_builds WHERE $1 = '' OR workflow = $1 ORDER BY workflow, build_id"
)

// BuildRuns counts the open runs of a workflow per build.
func (s *Store) BuildRuns(ctx context.Context, p *store.BuildRunsParams) ([]store.BuildRuns, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("count runs per build: %w", err)
	}
	var out []store.BuildRuns
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.secretQ(qBuildRuns), p.Workflow)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.BuildRuns, error) {
			var b store.BuildRuns
			var n int64
			err := row.Scan(&b.BuildID, &n)
			b.OpenRuns = int(n)
			return b, err
		})
		return err
	})
	if err != nil {
		return nil, s.fail("count runs per build", err)
	}
	return nonNil(out), nil
}

// RetireBuild records a retired build, in one statement with the count
// of its open runs.
func (s *Store) RetireBuild(ctx context.Context, p *store.RetireBuildParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("retire build: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("retire build: %w", err)
	}
	var open int64
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.secretQ(qRetire), p.Workflow, p.BuildID, truncate(p.At)).Scan(&open)
	})
	if err != nil {
		return s.fail("retire build", err)
	}
	if open > 0 {
		return fmt.Errorf("retire build: %w", &store.BuildInUseError{Workflow: p.Workflow, BuildID: p.BuildID, OpenRuns: int(open)})
	}
	return nil
}

// RetiredBuilds returns the retired builds of a workflow, or of all.
func (s *Store) RetiredBuilds(ctx context.Context, p *store.RetiredBuildsParams) ([]store.RetiredBuild, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list retired builds: %w", err)
	}
	var out []store.RetiredBuild
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.secretQ(qRetired), p.Workflow)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.RetiredBuild, error) {
			var b store.RetiredBuild
			var at time.Time
			err := row.Scan(&b.Workflow, &b.BuildID, &at)
			b.RetiredAt = at.UTC()
			return b, err
		})
		return err
	})
	if err != nil {
		return nil, s.fail("list retired builds", err)
	}
	return nonNil(out), nil
}
