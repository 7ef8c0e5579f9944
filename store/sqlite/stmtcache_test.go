package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadStatementsKept: the reader prepares a query once and keeps it
// by its text, up to maxReadStmts; past them, and for a query that
// cannot be prepared, it answers as database/sql does, keeping nothing.
func TestReadStatementsKept(t *testing.T) {
	t.Parallel()
	for _, mem := range []bool{false, true} {
		cfg := &Config{Memory: mem}
		if !mem {
			cfg.Path = filepath.Join(t.TempDir(), "s.db")
		}
		s := open(t, cfg)
		ctx := t.Context()
		kept := func() int {
			s.reader.mu.RLock()
			defer s.reader.mu.RUnlock()
			return len(s.reader.stmts)
		}
		base := kept()
		for range 3 {
			var n int
			if err := s.reader.QueryRowContext(ctx, "SELECT count(*) FROM runs").Scan(&n); err != nil || n != 0 {
				t.Fatalf("count = %d, %v", n, err)
			}
		}
		if got := kept(); got != base+1 {
			t.Fatalf("memory %v: %d statements kept after one query run three times, want %d", mem, got, base+1)
		}
		if _, err := s.reader.QueryContext(ctx, "SELECT nope FROM runs"); err == nil || !strings.Contains(err.Error(), "nope") {
			t.Errorf("a bad query: %v, want its error", err)
		}
		for i := 0; kept() < maxReadStmts; i++ {
			var n int
			if err := s.reader.QueryRowContext(ctx, fmt.Sprintf("SELECT %d", i)).Scan(&n); err != nil || n != i {
				t.Fatalf("SELECT %d = %d, %v", i, n, err)
			}
		}
		rows, err := s.reader.QueryContext(ctx, "SELECT 'past the bound'")
		if err != nil {
			t.Fatal(err)
		}
		var v string
		if !rows.Next() || rows.Scan(&v) != nil || v != "past the bound" {
			t.Errorf("a query past the bound read %q, %v", v, rows.Err())
		}
		_ = rows.Close()
		if got := kept(); got != maxReadStmts {
			t.Errorf("%d statements kept, want the bound %d", got, maxReadStmts)
		}
	}
}

// TestWriterTextStatementsKept: the writer's statements by text are
// prepared once and kept up to maxTextStmts; one past them is closed
// after its use (for a query, when its rows close).
func TestWriterTextStatementsKept(t *testing.T) {
	t.Parallel()
	s := open(t, &Config{Path: filepath.Join(t.TempDir(), "s.db")})
	err := s.withWriter(context.Background(), func(w *wconn) error {
		first, _, err := w.textStmt("SELECT count(*) FROM runs")
		if err != nil {
			return err
		}
		again, _, err := w.textStmt("SELECT count(*) FROM runs")
		if err != nil || again != first {
			return fmt.Errorf("the same text prepared again (%v)", err)
		}
		if _, _, err := w.textStmt("SELECT nope"); err == nil {
			return fmt.Errorf("a bad statement prepared")
		}
		for i := 0; len(w.byText) < maxTextStmts; i++ {
			w.arg(int64(i))
			if _, err := w.execText(fmt.Sprintf("SELECT ?1 + %d", i)); err != nil {
				return err
			}
		}
		w.arg("past the bound")
		rows, err := w.queryText("SELECT ?1")
		if err != nil {
			return err
		}
		dest := make([]driver.Value, 1)
		if err := rows.Next(dest); err != nil || dest[0] != "past the bound" {
			return fmt.Errorf("a query past the bound read %v, %v", dest[0], err)
		}
		if err := rows.Next(dest); err != io.EOF {
			return fmt.Errorf("a second row: %v", err)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if len(w.byText) != maxTextStmts {
			return fmt.Errorf("%d statements kept, want the bound %d", len(w.byText), maxTextStmts)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
