package sqlite

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Versions = (*Store)(nil)

// The statements of store.Versions (migration 0015_versions).
const (
	qVersionRulePut = "INSERT INTO version_rules (name, rule, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4) " +
		"ON CONFLICT (name) DO UPDATE SET rule = excluded.rule, updated_at = excluded.updated_at, updated_by = excluded.updated_by"
	qVersionRuleDel  = "DELETE FROM version_rules WHERE name = ?"
	qVersionStatePut = "INSERT INTO definition_versions (name, version, state, changed_at, changed_by) VALUES (?1, ?2, ?3, ?4, ?5) " +
		"ON CONFLICT (name, version) DO UPDATE SET state = excluded.state, changed_at = excluded.changed_at, changed_by = excluded.changed_by"
	qVersionCounts = "SELECT version, sum(status IN ('pending', 'running', 'waiting')), sum(status NOT IN ('pending', 'running', 'waiting')) " +
		"FROM runs WHERE workflow = ? AND kind = 'flow' GROUP BY version ORDER BY version"
)

// VersionPolicy reads a name's rule, version states and the version
// generation (one statement, one snapshot).
func (s *Store) VersionPolicy(ctx context.Context, name string) (*store.VersionPolicy, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("version policy: %w", err)
	}
	rows, err := s.r.versionPolicy.QueryContext(ctx, name)
	if err != nil {
		return nil, s.fail("version policy", err)
	}
	defer func() { _ = rows.Close() }()
	out := &store.VersionPolicy{States: []*store.VersionState{}}
	for rows.Next() {
		var kind, version int
		var text, by string
		var at int64
		if err := rows.Scan(&kind, &version, &text, &at, &by); err != nil {
			return nil, s.fail("version policy", err)
		}
		switch kind {
		case 0:
			out.Rule = &store.VersionRule{Name: name, Rule: []byte(text), UpdatedAt: fromMicros(at), UpdatedBy: by}
			continue
		case 2:
			out.Gen = int64(version)
			continue
		}
		out.States = append(out.States, &store.VersionState{Name: name, Version: version, State: text, ChangedAt: fromMicros(at), ChangedBy: by})
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("version policy", err)
	}
	return out, nil
}

// PutVersionRule creates or replaces a rule unless it names a retired
// version, in one write transaction.
func (s *Store) PutVersionRule(ctx context.Context, p *store.PutVersionRuleParams) (*store.VersionRule, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("put version rule: %w", err)
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("put version rule: %w", err)
	}
	out := &store.VersionRule{Name: p.Name, Rule: p.Rule, UpdatedAt: truncate(p.At), UpdatedBy: p.By}
	retired := int64(0)
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			if len(p.Targets) > 0 {
				vs := make([]string, len(p.Targets))
				for i, v := range p.Targets {
					vs[i] = strconv.Itoa(v)
				}
				w.arg(p.Name)
				found, err := w.adhocRow("SELECT version FROM definition_versions WHERE name = ? AND state <> 'active' AND version IN ("+
					strings.Join(vs, ",")+") ORDER BY version LIMIT 1", 1)
				if err != nil {
					return err
				}
				if found {
					retired = vInt(w.dest[0])
					return nil
				}
			}
			for _, a := range []any{p.Name, string(p.Rule), micros(p.At), p.By} {
				w.arg(a)
			}
			return w.adhocExec(qVersionRulePut)
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
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(name)
			var err error
			n, err = w.adhocExecN(qVersionRuleDel)
			return err
		})
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
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			for _, a := range []any{p.Name, int64(p.Version), p.State, micros(p.At), p.By} {
				w.arg(a)
			}
			return w.adhocExec(qVersionStatePut)
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
	rows, err := s.reader.QueryContext(ctx, qVersionCounts, name)
	if err != nil {
		return nil, s.fail("count runs by version", err)
	}
	defer rows.Close()
	out := []*store.VersionRunCount{}
	for rows.Next() {
		var c store.VersionRunCount
		if err := rows.Scan(&c.Version, &c.Active, &c.Finished); err != nil {
			return nil, s.fail("count runs by version", err)
		}
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("count runs by version", err)
	}
	return out, nil
}
