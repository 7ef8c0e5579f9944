package payloadstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/blobstore/gocloudblob"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/internal/payloadstore"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/store/storetest"
)

// testChain compresses every payload it can (from 1 byte) and encrypts
// every one.
func testChain(t testing.TB) *codec.Chain {
	t.Helper()
	z, err := codec.NewZstd(&codec.ZstdConfig{MinSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return keyChain(t, z, "k1", "k1")
}

func closeOnCleanup(t *testing.T, s store.Store) {
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
}

func openSQLite(t *testing.T) *sqlite.Store {
	s, err := sqlite.Open(context.Background(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, s)
	return s
}

func openPostgres(t *testing.T) *postgres.Store {
	s, err := postgres.Open(context.Background(), &postgres.Config{DSN: pgschema.DSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	closeOnCleanup(t, s)
	return s
}

// sqliteTx opens a transaction of the application's on the wrapped
// SQLite store's database (storetest.WithTx).
func sqliteTx(t *testing.T, s store.Store) *storetest.Tx {
	tx, err := payloadstore.Unwrap(s).(*sqlite.Store).DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &storetest.Tx{Tx: tx, Exec: func(q string) error { _, err := tx.ExecContext(t.Context(), q); return err }, Commit: tx.Commit, Rollback: tx.Rollback,
		Rows: func(table string) (n int, err error) {
			return n, tx.QueryRowContext(t.Context(), `SELECT count(*) FROM "`+table+`"`).Scan(&n)
		}}
}

// postgresTx opens a transaction of the application's on the wrapped
// PostgreSQL store's pool (storetest.WithTx).
func postgresTx(t *testing.T, s store.Store) *storetest.Tx {
	ctx := context.WithoutCancel(t.Context())
	pg := payloadstore.Unwrap(s).(*postgres.Store)
	tx, err := pg.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &storetest.Tx{Tx: tx, Exec: func(q string) error { _, err := tx.Exec(ctx, q); return err },
		Commit: func() error { return tx.Commit(ctx) }, Rollback: func() error { return tx.Rollback(ctx) },
		Rows: func(table string) (n int, err error) {
			return n, tx.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{pg.Schema(), table}.Sanitize()).Scan(&n)
		}}
}

// The wrapped store passes the conformance suite: every payload it is
// given reads back as it was, through encoding.
func TestConformanceSQLite(t *testing.T) {
	t.Parallel()
	chain := testChain(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return payloadstore.Wrap(openSQLite(t), chain)
	}, storetest.WithTx(sqliteTx), storetest.EncodedPayloads())
}

// On PostgreSQL, every payload is encoded and then offloaded (its
// envelope is more than 8 bytes): jsonb stores the references reordered
// and spaced, and they read back as references.
func TestConformancePostgres(t *testing.T) {
	t.Parallel()
	chain := testChain(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return payloadstore.WrapOffload(openPostgres(t), chain, &payloadstore.Offload{Bucket: gocloudblob.New(memBucket(t)), Above: 8})
	}, storetest.WithTx(postgresTx), storetest.EncodedPayloads())
}

func TestWebhooksSQLite(t *testing.T) {
	t.Parallel()
	chain := testChain(t)
	storetest.RunWebhooks(t, func(t *testing.T) store.Admin {
		return payloadstore.Wrap(openSQLite(t), chain).(store.Admin)
	})
}

func TestWebhooksPostgres(t *testing.T) {
	t.Parallel()
	chain := testChain(t)
	storetest.RunWebhooks(t, func(t *testing.T) store.Admin {
		return payloadstore.WrapOffload(openPostgres(t), chain, &payloadstore.Offload{Bucket: gocloudblob.New(memBucket(t)), Above: 8}).(store.Admin)
	})
}

// keyChain is a chain of the codecs first (if any), then AES-GCM with
// the key of id write, holding the keys of ids (each id's secret derives
// from it).
func keyChain(t testing.TB, first codec.Codec, write string, ids ...string) *codec.Chain {
	t.Helper()
	var ks []codec.Key
	for _, id := range ids {
		sum := sha256.Sum256([]byte(id))
		ks = append(ks, codec.Key{ID: id, Secret: sum[:]})
	}
	ring, err := codec.NewKeyring(&codec.KeyringConfig{Keys: ks, WriteKey: write})
	if err != nil {
		t.Fatal(err)
	}
	a, err := codec.NewAESGCM(ring)
	if err != nil {
		t.Fatal(err)
	}
	cs := []codec.Codec{a}
	if first != nil {
		cs = []codec.Codec{first, a}
	}
	c, err := codec.NewChain(&codec.ChainConfig{Codecs: cs})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func create(id, input string) store.Change {
	return store.Change{Create: &store.NewRun{ID: id, Workflow: "wf", Version: 1, Kind: "flow", Status: "pending", Input: json.RawMessage(input),
		Tasks: []store.NewTask{{Queue: "q", Kind: store.TaskStep, Step: "a", Index: -1, Payload: json.RawMessage(input), ReadyAt: t0}}}}
}

// What a process without the key meets: reads fail naming the key, a
// claim gives the tasks back (another process claims them at once), a
// change of the run is refused; and an Apply refuses only the change
// whose payload does not encode.
func TestWithoutTheKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	raw := openSQLite(t)
	w1 := payloadstore.Wrap(raw, keyChain(t, nil, "k1", "k1"))
	res, err := w1.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{create("r1", `{"n":1}`), create("bad", `{"n":`), create("r2", `{"n":2}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changes[0].Err != nil || res.Changes[2].Err != nil || res.Changes[1].Err == nil || !strings.Contains(res.Changes[1].Err.Error(), "not valid JSON") {
		t.Fatalf("results %v, %v, %v: want the bad input alone refused", res.Changes[0].Err, res.Changes[1].Err, res.Changes[2].Err)
	}
	if string(res.Changes[2].Run.Input) != `{"n":2}` || string(res.Changes[2].Tasks[0].Payload) != `{"n":2}` {
		t.Fatalf("result of r2 not decoded: %s, %s", res.Changes[2].Run.Input, res.Changes[2].Tasks[0].Payload)
	}
	if _, err := raw.GetRun(ctx, "bad"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("the refused run: %v", err)
	}
	stored, err := raw.GetRun(ctx, "r1")
	if err != nil || !codec.IsEncoded(stored.Input) {
		t.Fatalf("stored input %s, %v: want an envelope", stored.Input, err)
	}

	w2 := payloadstore.Wrap(raw, keyChain(t, nil, "k2", "k2"))
	if _, err := w2.GetRun(ctx, "r1"); !errors.Is(err, codec.ErrKeyNotFound) || !strings.Contains(err.Error(), "run r1") {
		t.Fatalf("GetRun without k1: %v", err)
	}
	claim := &store.ClaimParams{Queues: []string{"q"}, Owner: "w2", Limit: 10, LeaseFor: time.Minute, Now: t0}
	if _, err := w2.ClaimTasks(ctx, claim); !errors.Is(err, codec.ErrKeyNotFound) {
		t.Fatalf("claim without k1: %v", err)
	}
	claim.Owner = "w1"
	ts, err := w1.ClaimTasks(ctx, claim)
	if err != nil || len(ts) != 2 || string(ts[0].Payload) != `{"n":1}` {
		t.Fatalf("claim with k1 after the claim without it: %d tasks, %v", len(ts), err)
	}
	decided := false
	res, err = w2.Apply(ctx, &store.ApplyParams{Now: t0, Changes: []store.Change{{RunID: "r1", Decide: func(r *store.Run) (*store.Update, error) {
		decided = true
		return &store.Update{Status: "completed", Output: json.RawMessage(`1`)}, nil
	}}}})
	if err != nil || !errors.Is(res.Changes[0].Err, codec.ErrKeyNotFound) || decided {
		t.Fatalf("a change without k1: %v, %v, decided %v", err, res.Changes[0].Err, decided)
	}
}
