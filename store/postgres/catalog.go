package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Catalog = (*Store)(nil)

// The statements of store.Catalog (migration 0016_definitions); § stands
// for the store's schema.
const (
	definitionCols = "kind, name, version, build_id, hash, spec, input_schema, output_schema, queues, handlers, schedules, published_at, published_by"

	// qDefinitionPublish inserts a batch in one statement: rows stored
	// with the same hash are left alone, a workflow build's row with
	// another hash is replaced, and it returns the flow and job kind
	// versions stored with another hash (read from the snapshot before
	// the insert), which it did not change.
	qDefinitionPublish = `WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::bytea[], $9::bytea[], $10::text[], $11::text[], $12::text[])
        AS t(kind, name, version, row_build, build_id, hash, spec, input_schema, output_schema, queues, handlers, schedules)
), written AS (
    INSERT INTO §definitions (row_build, ` + definitionCols + `)
    SELECT row_build, kind, name, version, build_id, hash, spec, input_schema, output_schema,
        ARRAY(SELECT jsonb_array_elements_text(queues::jsonb)), ARRAY(SELECT jsonb_array_elements_text(handlers::jsonb)),
        ARRAY(SELECT jsonb_array_elements_text(schedules::jsonb)), $13, $14
    FROM input
    ON CONFLICT (kind, name, version, row_build) DO UPDATE SET build_id = excluded.build_id, hash = excluded.hash, spec = excluded.spec,
        input_schema = excluded.input_schema, output_schema = excluded.output_schema, queues = excluded.queues, handlers = excluded.handlers,
        schedules = excluded.schedules, published_at = excluded.published_at, published_by = excluded.published_by
    WHERE §definitions.kind = 'workflow' AND §definitions.hash <> excluded.hash
    RETURNING 1
)
SELECT i.kind, i.name, i.version, d.hash, i.hash FROM input i JOIN §definitions d USING (kind, name, version, row_build)
WHERE d.hash <> i.hash AND i.kind <> 'workflow'`
	qDefinitionList = "SELECT " + definitionCols + " FROM §definitions WHERE ($1 = '' OR kind = $1) AND ($2 = '' OR name = $2) " +
		"ORDER BY kind, name, version, published_at DESC, row_build"
	qDefinitionGet = "SELECT " + definitionCols + " FROM §definitions WHERE kind = $1 AND name = $2 AND ($3 = 0 OR version = $3) " +
		"AND ($4 = '' OR row_build = $4) ORDER BY version DESC, published_at DESC, row_build LIMIT 1"
)

func (s *Store) catalogQ(q string) string { return strings.ReplaceAll(q, "§", `"`+s.schema+`".`) }

// PublishDefinitions stores definitions in one statement.
func (s *Store) PublishDefinitions(ctx context.Context, p *store.PublishDefinitionsParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("publish definitions: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("publish definitions: %w", err)
	}
	ds, conflicts := p.Distinct()
	cols := make([][]string, 8) // kind name row_build build hash queues handlers schedules
	var versions []int64
	blobs := make([][][]byte, 3)
	for _, d := range ds {
		for i, v := range []string{d.Kind, d.Name, d.RowBuild(), d.BuildID, d.Hash, listJSON(d.Queues), listJSON(d.Handlers), listJSON(d.Schedules)} {
			cols[i] = append(cols[i], v)
		}
		versions = append(versions, int64(d.Version))
		for i, b := range []json.RawMessage{d.Spec, d.InputSchema, d.OutputSchema} {
			blobs[i] = append(blobs[i], append([]byte{}, b...))
		}
	}
	var found []error
	err := s.idempotent(ctx, func(ctx context.Context) error {
		found = nil
		rows, err := s.pool.Query(ctx, s.catalogQ(qDefinitionPublish), cols[0], cols[1], versions, cols[2], cols[3], cols[4],
			blobs[0], blobs[1], blobs[2], cols[5], cols[6], cols[7], truncate(p.Now), p.By)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e store.DefinitionConflictError
			var v int64
			if err := rows.Scan(&e.Kind, &e.Name, &v, &e.Stored, &e.Published); err != nil {
				return err
			}
			e.Version = int(v)
			found = append(found, &e)
		}
		return rows.Err()
	})
	if err != nil {
		return s.fail("publish definitions", err)
	}
	if conflicts = append(conflicts, found...); len(conflicts) > 0 {
		return fmt.Errorf("publish definitions: %w", errors.Join(conflicts...))
	}
	return nil
}

func listJSON(l []string) string {
	if l == nil {
		l = []string{}
	}
	b, _ := json.Marshal(l)
	return string(b)
}

func scanDefinition(row pgx.Row) (*store.Definition, error) {
	var d store.Definition
	var v int64
	var spec, in, out []byte
	if err := row.Scan(&d.Kind, &d.Name, &v, &d.BuildID, &d.Hash, &spec, &in, &out, &d.Queues, &d.Handlers, &d.Schedules, &d.PublishedAt, &d.PublishedBy); err != nil {
		return nil, err
	}
	d.Version, d.PublishedAt = int(v), d.PublishedAt.UTC()
	for _, x := range []struct {
		b   []byte
		dst *json.RawMessage
	}{{spec, &d.Spec}, {in, &d.InputSchema}, {out, &d.OutputSchema}} {
		if len(x.b) > 0 {
			*x.dst = json.RawMessage(x.b)
		}
	}
	return &d, nil
}

// ListDefinitions returns the catalog's rows.
func (s *Store) ListDefinitions(ctx context.Context, p *store.ListDefinitionsParams) ([]*store.Definition, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("list definitions: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.catalogQ(qDefinitionList), p.Kind, p.Name)
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
	d, err := scanDefinition(s.pool.QueryRow(ctx, s.catalogQ(qDefinitionGet), p.Kind, p.Name, int64(p.Version), p.BuildID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get definition %s %q version %d: %w", p.Kind, p.Name, p.Version, store.ErrDefinitionNotFound)
	}
	if err != nil {
		return nil, s.fail("get definition", err)
	}
	return d, nil
}
