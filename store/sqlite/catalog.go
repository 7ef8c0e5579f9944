package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Catalog = (*Store)(nil)

// The statements of store.Catalog (migration 0014_definitions).
const (
	definitionCols = "kind, name, version, build_id, hash, spec, input_schema, output_schema, queues, handlers, schedules, published_at, published_by"

	qDefinitionHash    = "SELECT hash FROM definitions WHERE kind = ? AND name = ? AND version = ? AND row_build = ?"
	qDefinitionInsert  = "INSERT INTO definitions (row_build, " + definitionCols + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	qDefinitionReplace = "DELETE FROM definitions WHERE kind = ? AND name = ? AND version = ? AND row_build = ?"
)

// PublishDefinitions stores definitions in one write transaction.
func (s *Store) PublishDefinitions(ctx context.Context, p *store.PublishDefinitionsParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("publish definitions: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("publish definitions: %w", err)
	}
	now := micros(truncate(p.Now))
	var conflicts []error
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			conflicts = nil
			for _, d := range p.Definitions {
				key := func() { w.arg(d.Kind); w.arg(d.Name); w.arg(int64(d.Version)); w.arg(d.RowBuild()) }
				key()
				found, err := w.adhocRow(qDefinitionHash, 1)
				if err != nil {
					return err
				}
				stored := vString(w.dest[0])
				switch {
				case found && stored == d.Hash:
					continue
				case found && d.Kind != store.DefinitionWorkflow:
					conflicts = append(conflicts, &store.DefinitionConflictError{Kind: d.Kind, Name: d.Name, Version: d.Version, Stored: stored, Published: d.Hash})
					continue
				case found:
					key()
					if err := w.adhocExec(qDefinitionReplace); err != nil {
						return err
					}
				}
				w.arg(d.RowBuild())
				for _, v := range []any{d.Kind, d.Name, int64(d.Version), d.BuildID, d.Hash, jsonText(d.Spec), jsonText(d.InputSchema), jsonText(d.OutputSchema),
					listText(d.Queues), listText(d.Handlers), listText(d.Schedules), now, p.By} {
					w.arg(v)
				}
				if err := w.adhocExec(qDefinitionInsert); err != nil {
					return fmt.Errorf("insert definition: %w", err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return s.fail("publish definitions", err)
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("publish definitions: %w", errors.Join(conflicts...))
	}
	return nil
}

func jsonText(b json.RawMessage) string { return string(b) }

func listText(l []string) string {
	if l == nil {
		l = []string{}
	}
	b, _ := json.Marshal(l)
	return string(b)
}

func scanDefinition(sc scanner) (*store.Definition, error) {
	var d store.Definition
	var spec, in, out, queues, handlers, schedules string
	var at int64
	if err := sc.Scan(&d.Kind, &d.Name, &d.Version, &d.BuildID, &d.Hash, &spec, &in, &out, &queues, &handlers, &schedules, &at, &d.PublishedBy); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		s   string
		dst *json.RawMessage
	}{{spec, &d.Spec}, {in, &d.InputSchema}, {out, &d.OutputSchema}} {
		if x.s != "" {
			*x.dst = json.RawMessage(x.s)
		}
	}
	for _, x := range []struct {
		s   string
		dst *[]string
	}{{queues, &d.Queues}, {handlers, &d.Handlers}, {schedules, &d.Schedules}} {
		if err := json.Unmarshal([]byte(x.s), x.dst); err != nil {
			return nil, fmt.Errorf("definition %s %q: decode list: %w", d.Kind, d.Name, err)
		}
	}
	d.PublishedAt = fromMicros(at)
	return &d, nil
}

// ListDefinitions returns the catalog's rows.
func (s *Store) ListDefinitions(ctx context.Context, p *store.ListDefinitionsParams) ([]*store.Definition, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list definitions: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, "SELECT "+definitionCols+" FROM definitions WHERE (?1 = '' OR kind = ?1) AND (?2 = '' OR name = ?2) "+
		"ORDER BY kind, name, version, published_at DESC, row_build", p.Kind, p.Name)
	if err != nil {
		return nil, s.fail("list definitions", err)
	}
	defer rows.Close()
	out := []*store.Definition{}
	for rows.Next() {
		d, err := scanDefinition(rows)
		if err != nil {
			return nil, s.fail("list definitions", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list definitions", err)
	}
	return out, nil
}

// GetDefinition returns one row of the catalog.
func (s *Store) GetDefinition(ctx context.Context, p *store.GetDefinitionParams) (*store.Definition, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get definition: %w", err)
	}
	d, err := scanDefinition(s.reader.QueryRowContext(ctx, "SELECT "+definitionCols+" FROM definitions WHERE kind = ?1 AND name = ?2 "+
		"AND (?3 = 0 OR version = ?3) AND (?4 = '' OR row_build = ?4) ORDER BY version DESC, published_at DESC, row_build LIMIT 1",
		p.Kind, p.Name, int64(p.Version), p.BuildID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get definition %s %q version %d: %w", p.Kind, p.Name, p.Version, store.ErrDefinitionNotFound)
	}
	if err != nil {
		return nil, s.fail("get definition", err)
	}
	return d, nil
}
