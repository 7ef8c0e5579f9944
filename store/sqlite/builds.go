package sqlite

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Builds = (*Store)(nil)

// The statements of store.Builds (migration 0016_builds).
const (
	qBuildRuns = "SELECT build_id, count(*) FROM runs WHERE workflow = ? AND status IN ('pending', 'running', 'waiting') " +
		"GROUP BY build_id ORDER BY build_id"
	qBuildOpen = "SELECT count(*) FROM runs WHERE workflow = ? AND build_id = ? AND status IN ('pending', 'running', 'waiting')"
	qRetire    = "INSERT INTO retired_builds (workflow, build_id, retired_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
	qRetired   = "SELECT workflow, build_id, retired_at FROM retired_builds WHERE ?1 = '' OR workflow = ?1 ORDER BY workflow, build_id"
)

// BuildRuns counts the open runs of a workflow per build.
func (s *Store) BuildRuns(ctx context.Context, p *store.BuildRunsParams) ([]store.BuildRuns, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("count runs per build: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, qBuildRuns, p.Workflow)
	if err != nil {
		return nil, s.fail("count runs per build", err)
	}
	defer rows.Close()
	out := []store.BuildRuns{}
	for rows.Next() {
		var b store.BuildRuns
		if err := rows.Scan(&b.BuildID, &b.OpenRuns); err != nil {
			return nil, s.fail("count runs per build", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("count runs per build", err)
	}
	return out, nil
}

// RetireBuild records a retired build, in one write transaction with the
// count of its open runs.
func (s *Store) RetireBuild(ctx context.Context, p *store.RetireBuildParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("retire build: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("retire build: %w", err)
	}
	var open int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(p.Workflow)
			w.arg(p.BuildID)
			if _, err := w.adhocRow(qBuildOpen, 1); err != nil {
				return err
			}
			if open = vInt(w.dest[0]); open > 0 {
				return nil
			}
			w.arg(p.Workflow)
			w.arg(p.BuildID)
			w.arg(micros(p.At))
			return w.adhocExec(qRetire)
		})
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
	rows, err := s.reader.QueryContext(ctx, qRetired, p.Workflow)
	if err != nil {
		return nil, s.fail("list retired builds", err)
	}
	defer rows.Close()
	out := []store.RetiredBuild{}
	for rows.Next() {
		var b store.RetiredBuild
		var at int64
		if err := rows.Scan(&b.Workflow, &b.BuildID, &at); err != nil {
			return nil, s.fail("list retired builds", err)
		}
		b.RetiredAt = fromMicros(at)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list retired builds", err)
	}
	return out, nil
}
