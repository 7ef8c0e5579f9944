package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Versions = (*Store)(nil)

// The statements of store.Versions (migration 0017_versions); § stands
// for the store's schema. PutVersionRule and SetVersionState take a
// transaction-scoped advisory lock on the name, so a rule never lands
// beside a retire of a version it names.
const (
	qVersionLock     = "SELECT pg_advisory_xact_lock(hashtextextended('heph.versions:' || $1, 0))"
	qVersionRuleGet  = "SELECT rule, updated_at, updated_by FROM §version_rules WHERE name = $1"
	qVersionStates   = "SELECT version, state, changed_at, changed_by FROM §definition_versions WHERE name = $1 ORDER BY version"
	qVersionPolicy   = "SELECT 0, 0, rule::text, updated_at, updated_by FROM §version_rules WHERE name = $1 UNION ALL SELECT 1, version, state, changed_at, changed_by FROM §definition_versions WHERE name = $1 UNION ALL SELECT 2, n, '', now(), '' FROM §version_generation ORDER BY 1, 2"
	qVersionRetired  = "SELECT version FROM §definition_versions WHERE name = $1 AND version = ANY($2) AND state <> 'active' ORDER BY version LIMIT 1"
	qVersionRulePut  = "INSERT INTO §version_rules (name, rule, updated_at, updated_by) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO UPDATE SET rule = excluded.rule, updated_at = excluded.updated_at, updated_by = excluded.updated_by"
	qVersionRuleDel  = "DELETE FROM §version_rules WHERE name = $1"
	qVersionStatePut = "INSERT INTO §definition_versions (name, version, state, changed_at, changed_by) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name, version) DO UPDATE SET state = excluded.state, changed_at = excluded.changed_at, changed_by = excluded.changed_by"
	qVersionCounts   = "SELECT version, count(*) FILTER (WHERE status IN ('pending', 'running', 'waiting')), count(*) FILTER (WHERE status NOT IN ('pending', 'running', 'waiting')) FROM §runs WHERE workflow = $1 AND kind = 'flow' GROUP BY version ORDER BY version"
)

func (s *Store) versionQ(q string) string { return strings.ReplaceAll(q, "§", `"`+s.schema+`".`) }

// VersionPolicy reads a name's rule and version states.
func (s *Store) VersionPolicy(ctx context.Context, name string) (*store.VersionPolicy, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("version policy: %w", err)
	}
	var out *store.VersionPolicy
	// One statement, so one round trip and one snapshot: the rule (kind 0),
	// the version states (kind 1) and the generation (kind 2).
	err := s.idempotent(ctx, func(ctx context.Context) error {
		out = &store.VersionPolicy{States: []*store.VersionState{}}
		rows, err := s.pool.Query(ctx, s.versionQ(qVersionPolicy), name)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var kind, version int
			var text, by string
			var at time.Time
			if err := rows.Scan(&kind, &version, &text, &at, &by); err != nil {
				return err
			}
			switch kind {
			case 0:
				out.Rule = &store.VersionRule{Name: name, Rule: []byte(text), UpdatedAt: at.UTC(), UpdatedBy: by}
				continue
			case 2:
				out.Gen = int64(version)
				continue
			}
			out.States = append(out.States, &store.VersionState{Name: name, Version: version, State: text, ChangedAt: at.UTC(), ChangedBy: by})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail("version policy", err)
	}
	return out, nil
}

// PutVersionRule creates or replaces a rule unless it names a retired
// version.
func (s *Store) PutVersionRule(ctx context.Context, p *store.PutVersionRuleParams) (*store.VersionRule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("put version rule: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("put version rule: %w", err)
	}
	targets := make([]int32, len(p.Targets))
	for i, v := range p.Targets {
		targets[i] = int32(v) //nolint:gosec // versions are small positive numbers
	}
	out := &store.VersionRule{Name: p.Name, Rule: p.Rule, UpdatedAt: truncate(p.At), UpdatedBy: p.By}
	retired := 0
	err := s.once(ctx, func(ctx context.Context) error {
		retired = 0
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, qVersionLock, p.Name); err != nil {
				return err
			}
			err := tx.QueryRow(ctx, s.versionQ(qVersionRetired), p.Name, targets).Scan(&retired)
			if err == nil {
				return nil // retired > 0: refused, nothing written
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			_, err = tx.Exec(ctx, s.versionQ(qVersionRulePut), p.Name, string(p.Rule), out.UpdatedAt, p.By)
			return err
		})
	})
	if err != nil {
		return nil, s.fail("put version rule", err)
	}
	if retired > 0 {
		return nil, fmt.Errorf("put version rule of %q: %w: version %d is retired", p.Name, store.ErrVersionRetired, retired)
	}
	return out, nil
}

// DeleteVersionRule deletes a rule.
func (s *Store) DeleteVersionRule(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete version rule: %w", err)
	}
	var n int64
	err := s.once(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, s.versionQ(qVersionRuleDel), name)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return s.fail("delete version rule", err)
	}
	if n == 0 {
		return fmt.Errorf("delete version rule of %q: %w", name, store.ErrVersionRuleNotFound)
	}
	return nil
}

// SetVersionState records a version's state.
func (s *Store) SetVersionState(ctx context.Context, p *store.SetVersionStateParams) (*store.VersionState, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("set version state: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("set version state: %w", err)
	}
	out := &store.VersionState{Name: p.Name, Version: p.Version, State: p.State, ChangedAt: truncate(p.At), ChangedBy: p.By}
	err := s.once(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, qVersionLock, p.Name); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, s.versionQ(qVersionStatePut), p.Name, p.Version, p.State, out.ChangedAt, p.By)
			return err
		})
	})
	if err != nil {
		return nil, s.fail("set version state", err)
	}
	return out, nil
}

// CountRunsByVersion counts a name's flow runs per version.
func (s *Store) CountRunsByVersion(ctx context.Context, name string) ([]*store.VersionRunCount, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("count runs by version: %w", err)
	}
	var out []*store.VersionRunCount
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.versionQ(qVersionCounts), name)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.VersionRunCount, error) {
			var c store.VersionRunCount
			var active, finished int64
			err := row.Scan(&c.Version, &active, &finished)
			c.Active, c.Finished = int(active), int(finished)
			return &c, err
		})
		return err
	})
	if err != nil {
		return nil, s.fail("count runs by version", err)
	}
	if out == nil {
		out = []*store.VersionRunCount{}
	}
	return out, nil
}
