package e2e_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/blobstore/gocloudblob"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// BenchmarkPayloadOffload is what offloading large payloads costs
// (docs/payloads.md#large-payloads, docs/benchmarks.md): b.N one-step
// runs whose input and output are 1 MiB each (every run its own, base64
// of random bytes: PostgreSQL's TOAST would compress a repeated pattern
// to a few KiB and flatter the inline case), from
// 8 concurrent callers, on each backend, with the payloads kept in the
// database (inline: Config.MaxPayloadSize raised to 8 MiB) and offloaded
// to a blob store in a local directory (Config.PayloadBlobs). It reports
// runs/s and how much the database grew per run.
func BenchmarkPayloadOffload(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"sqlite", sqliteOpener("NORMAL")},
		{"postgres", postgresOpener},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			for _, mode := range []string{"inline", "offload"} {
				b.Run(mode, func(b *testing.B) { benchOffload(b, be.open, mode == "offload") })
			}
		})
	}
}

// offloadSize is the size of the benchmark's inputs and outputs.
const offloadSize = 1 << 20

func offloadFlow() *flow.Flow {
	fb := flow.New("offload_one")
	flow.Step(fb, "step", func(ctx context.Context, in string) (string, error) {
		if len(in) != offloadSize {
			return "", flow.NonRetryable(fmt.Errorf("input of %d bytes, want %d", len(in), offloadSize))
		}
		return "out:" + in[4:], nil // as large, and another blob
	})
	return fb.MustBuild()
}

// offloadInput is the input of run i: offloadSize bytes of base64.
func offloadInput(i int64) string {
	raw := make([]byte, offloadSize/4*3)
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(i))
	_, _ = rand.NewChaCha8(seed).Read(raw)
	return base64.StdEncoding.EncodeToString(raw)
}

func benchOffload(b *testing.B, open func(b *testing.B) store.Store, offload bool) {
	const callers = 8
	st := open(b)
	cfg := &heph.Config{Store: st, Queues: map[string]int{"default": 16}, Logger: e2e.QuietLogger(), MaxPayloadSize: 8 << 20}
	if offload {
		cfg.PayloadBlobs = openBenchBlobs(b, "file://"+filepath.ToSlash(b.TempDir())+"?create_dir=true")
	}
	c, err := heph.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(offloadFlow()); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	var seq atomic.Int64
	run := func() error {
		in := offloadInput(seq.Add(1))
		r, err := c.Run(ctx, "offload_one", in, nil)
		if err == nil && r.Status != heph.StatusCompleted {
			err = fmt.Errorf("run %s is %s: %s", r.ID, r.Status, r.Error)
		}
		return err
	}
	for range 2 { // connections, statement caches
		if err := run(); err != nil {
			b.Fatal(err)
		}
	}
	size0 := dbBytes(b, st)
	next := make(chan struct{}, b.N)
	for range b.N {
		next <- struct{}{}
	}
	close(next)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range next {
				if err := run(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(dbBytes(b, st)-size0)/1024/float64(b.N), "db-KiB/run")
}

func openBenchBlobs(b *testing.B, u string) *gocloudblob.Store {
	bk, err := gocloudblob.Open(context.Background(), u)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bk.Close() })
	return bk
}

// dbBytes is the size of st's database.
func dbBytes(b *testing.B, st store.Store) int64 {
	var n int64
	var err error
	switch s := st.(type) {
	case *sqlite.Store:
		err = s.DB().QueryRow(`SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&n)
	case *postgres.Store:
		err = s.Pool().QueryRow(context.Background(), `SELECT pg_database_size(current_database())`).Scan(&n)
	default:
		b.Fatalf("no size for a %T", st)
	}
	if err != nil {
		b.Fatal(err)
	}
	return n
}
