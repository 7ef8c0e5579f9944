package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// Putting documents while every session of the database is killed again
// and again (up to 200 rounds), each caller retrying its put until it
// succeeds (a retried submit): every content is stored once, under one
// version, and each name's versions run from 1 without a gap or a repeat.
// The content hash is what makes the retry safe.
func TestFaultsDocumentPuts(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := open(t, &postgres.Config{DSN: dsn})
	admin := connect(t, dsn)
	ctx := t.Context()
	const names, contents, putters = 3, 20, 4

	var killed atomic.Int64
	done := make(chan struct{})
	killer := make(chan struct{})
	go func() {
		defer close(killer)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for round := 0; round < 200; round++ {
			var n int64
			err := admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
			if err != nil {
				t.Errorf("kill sessions: %v", err)
				return
			}
			killed.Add(n)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()

	// Every putter puts every content of every name, in its own order, so
	// that the same content races itself and different contents race for
	// versions of one name.
	var wg sync.WaitGroup
	var failed atomic.Int64
	for p := range putters {
		wg.Go(func() {
			for k := range names * contents {
				i := (k*7 + p*13) % (names * contents)
				name, content := fmt.Sprintf("doc%d", i%names), fmt.Sprintf(`{"name":"x","n":%d}`, i)
				// Retried until it succeeds: the kills stop after their
				// rounds, so only the test's deadline ends this.
				for {
					_, err := s.PutDocument(ctx, &store.PutDocumentParams{Name: name, Format: store.DocumentJSON,
						Content: []byte(content), Now: now})
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						failed.Add(1)
						t.Errorf("put %s %s: %v", name, content, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(done)
	<-killer
	if failed.Load() > 0 {
		return
	}
	if killed.Load() == 0 {
		t.Fatal("no session was killed while the puts ran")
	}
	for n := range names {
		name := fmt.Sprintf("doc%d", n)
		page, err := s.ListDocuments(ctx, &store.ListDocumentsParams{Name: name, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Documents) != contents {
			t.Fatalf("%s has %d versions, want %d (one per content)", name, len(page.Documents), contents)
		}
		hashes := map[string]bool{}
		for k, d := range page.Documents {
			if want := contents - k; d.Version != want {
				t.Fatalf("%s: version %d where %d was expected (versions newest first, 1..%d)", name, d.Version, want, contents)
			}
			if hashes[d.Hash] {
				t.Fatalf("%s: content %s stored twice", name, d.Hash)
			}
			hashes[d.Hash] = true
		}
	}
	t.Logf("%d sessions killed", killed.Load())
}
