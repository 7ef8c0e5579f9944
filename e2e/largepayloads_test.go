//go:build !race

package e2e_test

// Large payloads offloaded to a blob store (Config.PayloadBlobs): on
// SQLite with a local directory, and on PostgreSQL with an S3-compatible
// store (gofakes3, in memory, over HTTP). These tests move gigabytes, far
// too slowly under the race detector: CI runs them without it, in a step
// of their own (.ci/run).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/blobstore/gocloudblob"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/payloadstore"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// largeRig is a kind of database and of blob store.
type largeRig struct {
	// backend names the database for the SIGKILL test's child.
	backend string
	// db makes a fresh database for the test: a SQLite file, a DSN.
	db func(t *testing.T) string
	// open opens a store on db (closed when the test ends).
	open func(t *testing.T, db string) store.Store
	// blobs makes a fresh, empty blob store and returns its URL.
	blobs func(t *testing.T) string
	// rows returns every row of every table of st's database as text.
	rows func(t *testing.T, st store.Store) []string
}

func TestLargePayloadsSQLite(t *testing.T) { runLarge(t, sqliteLargeRig()) }

func TestLargePayloadsPostgres(t *testing.T) { runLarge(t, postgresLargeRig(t)) }

func runLarge(t *testing.T, rig largeRig) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, rig largeRig)
	}{
		{"HundredMiBBetweenSteps", testLargeBetweenSteps},
		{"MapOverMiBItems", func(t *testing.T, rig largeRig) { testLargeMap(t, rig, largeMapItems) }},
		{"WorkflowSignal10MiB", testLargeSignal},
		{"ForgedReferenceInOutput", testForgedReference},
		{"SIGKILLBetweenBlobAndCommit", testLargeKill},
		{"RetentionDeletesBlobs", testLargeRetention},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			tc.fn(t, rig)
			t.Logf("%s took %s", tc.name, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

func sqliteLargeRig() largeRig {
	return largeRig{
		backend: "sqlite",
		db:      func(t *testing.T) string { return filepath.Join(t.TempDir(), "heph.db") },
		open: func(t *testing.T, db string) store.Store {
			st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: db})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
		blobs: func(t *testing.T) string {
			return "file://" + filepath.ToSlash(t.TempDir()) + "?create_dir=true"
		},
		rows: sqliteRows,
	}
}

// postgresLargeRig serves an S3-compatible blob store (gofakes3, in
// memory) for the test; each blob store is a bucket of it.
func postgresLargeRig(t *testing.T) largeRig {
	mem := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(mem).Server())
	t.Cleanup(srv.Close)
	// The s3 driver takes its credentials from the AWS environment.
	t.Setenv("AWS_ACCESS_KEY_ID", "heph-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "heph-test-secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	var buckets atomic.Int64
	return largeRig{
		backend: "postgres",
		db:      func(t *testing.T) string { return pgschema.DSN(t) },
		open: func(t *testing.T, db string) store.Store {
			st, err := postgres.Open(context.Background(), &postgres.Config{DSN: db})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
		blobs: func(t *testing.T) string {
			name := fmt.Sprintf("heph-%d", buckets.Add(1))
			if err := mem.CreateBucket(name); err != nil {
				t.Fatal(err)
			}
			q := url.Values{
				"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}, "disable_https": {"true"},
				// gofakes3 sends no checksums: without this the SDK warns of each response.
				"response_checksum_validation": {"when_required"},
			}
			return "s3://" + name + "?" + q.Encode()
		},
		rows: postgresRows,
	}
}

// largeEnv is a client on a fresh database and blob store.
type largeEnv struct {
	t       *testing.T
	rig     largeRig
	db      string
	st      store.Store // as opened: the client wraps it
	blobURL string
	bucket  *blob.Bucket
	c       *heph.Client
}

// newLargeEnv opens a database and a blob store and starts a client on
// them; mod, when set, changes its configuration.
func newLargeEnv(t *testing.T, rig largeRig, mod func(*heph.Config), flows []*flow.Flow, wfs ...heph.Workflow) *largeEnv {
	t.Helper()
	e := &largeEnv{t: t, rig: rig, db: rig.db(t), blobURL: rig.blobs(t)}
	e.st = rig.open(t, e.db)
	e.bucket = openBlobs(t, e.blobURL)
	e.c = e.client(mod, flows, wfs...)
	return e
}

func openBlobs(t *testing.T, u string) *blob.Bucket {
	t.Helper()
	b, err := gocloudblob.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b.Bucket()
}

// client starts a client (with workers) on e's store and blob store.
func (e *largeEnv) client(mod func(*heph.Config), flows []*flow.Flow, wfs ...heph.Workflow) *heph.Client {
	e.t.Helper()
	cfg := &heph.Config{
		Store: e.st, PayloadBlobs: gocloudblob.New(e.bucket), Queues: map[string]int{"default": 8},
		PollInterval: 50 * time.Millisecond, Logger: e2e.QuietLogger(),
	}
	if mod != nil {
		mod(cfg)
	}
	c, err := heph.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := c.Register(flows...); err != nil {
		e.t.Fatal(err)
	}
	if err := c.RegisterWorkflows(wfs...); err != nil {
		e.t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return c
}

// largeCtx bounds a large test: generous, as the machine may be loaded.
func largeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// blobs returns the blob store's blobs: their sizes by hash.
func (e *largeEnv) blobs() map[string]int64 {
	e.t.Helper()
	return listBlobs(e.t, e.bucket)
}

func listBlobs(t *testing.T, b *blob.Bucket) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	it := b.List(&blob.ListOptions{Prefix: payloadstore.BlobPrefix})
	for {
		obj, err := it.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(obj.Key, payloadstore.BlobPrefix)] = obj.Size
	}
}

// refPattern finds the hashes of blob references in a row's text: jsonb
// spaces them, and a PostgreSQL row's text doubles their quotes.
var refPattern = regexp.MustCompile(`"+sha256"+:\s*"+([0-9a-f]{64})"`)

// stored is what the database holds, as far as these tests care.
type stored struct {
	// largest is the length of the longest row, whose start is at.
	largest int
	at      string
	// marks counts the rows that hold largeMark: a large payload kept in
	// the database.
	marks int
	// refs are the hashes of the blobs the rows refer to.
	refs map[string]bool
}

func (e *largeEnv) stored() stored {
	e.t.Helper()
	s := stored{refs: map[string]bool{}}
	for _, row := range e.rig.rows(e.t, e.st) {
		if len(row) > s.largest {
			s.largest, s.at = len(row), row[:min(len(row), 200)]
		}
		if strings.Contains(row, largeMark) {
			s.marks++
		}
		for _, m := range refPattern.FindAllStringSubmatch(row, -1) {
			s.refs[m[1]] = true
		}
	}
	return s
}

// checkOffloaded checks that the database holds no large payload (no
// row longer than the offload threshold and a row's other columns, none
// with the mark), that it refers to at
// least minRefs blobs, and that each of them is in the blob store.
func (e *largeEnv) checkOffloaded(minRefs int) stored {
	e.t.Helper()
	s := e.stored()
	if s.largest > 256<<10+16<<10 || s.marks > 0 {
		e.t.Errorf("the database holds a large payload: %d rows with the mark; the longest row, of %d bytes, starts %q", s.marks, s.largest, s.at)
	}
	blobs := e.blobs()
	for h := range s.refs {
		if _, ok := blobs[h]; !ok {
			e.t.Errorf("the database refers to blob %s, which the blob store does not hold", h)
		}
	}
	if len(s.refs) < minRefs {
		e.t.Errorf("the database refers to %d blobs, want at least %d", len(s.refs), minRefs)
	}
	return s
}

// sameJSON reports whether got is want in JSON, whatever its spacing and
// key order (PostgreSQL's jsonb hands small payloads back spaced).
func sameJSON(got json.RawMessage, want any) bool {
	w, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal(w, &b) == nil && reflect.DeepEqual(a, b)
}

// largeBlobs returns how many blobs of at least size bytes there are.
func largeBlobs(blobs map[string]int64, size int64) int {
	n := 0
	for _, s := range blobs {
		if s >= size {
			n++
		}
	}
	return n
}

// testLargeBetweenSteps: a step returns 100 MiB, the next reads it whole;
// the database holds references only, the blob store the payloads.
func testLargeBetweenSteps(t *testing.T, rig largeRig) {
	const size = 100 << 20
	fb := flow.New("large_pass")
	produce := flow.Step(fb, "produce", func(ctx context.Context, _ any) (string, error) {
		return largeString(size, "produce"), nil
	})
	flow.Step(fb, "consume", func(ctx context.Context, _ any) (string, error) {
		s, err := produce.Output(ctx)
		if err != nil {
			return "", err
		}
		if len(s) != size || s != largeString(size, "produce") {
			return "", flow.NonRetryable(fmt.Errorf("consume read %d bytes starting %.40q, not what produce returned", len(s), s))
		}
		return sha256Hex(s), nil
	}, flow.DependsOn("produce"))
	e := newLargeEnv(t, rig, nil, []*flow.Flow{fb.MustBuild()})
	ctx := largeCtx(t)
	r, err := e.c.Run(ctx, "large_pass", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != heph.StatusCompleted {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	want := map[string]string{"consume": sha256Hex(largeString(size, "produce"))}
	if !sameJSON(r.Output, want) {
		t.Fatalf("output %.200s, want %v", r.Output, want)
	}
	// Read back from the store: the step's output comes from its blob.
	got, err := e.c.GetRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := got.Step("produce"); len(st.Output) != size+2 {
		t.Errorf("GetRun: produce's output is %d bytes, want %d", len(st.Output), size+2)
	}
	// One blob of 100 MiB: the step's output, offloaded before its
	// change; the snapshot, the history and the next step's input refer
	// to it.
	e.checkOffloaded(1)
	if n := largeBlobs(e.blobs(), size); n != 1 {
		t.Errorf("%d blobs of 100 MiB or more, want 1 (the step's output)", n)
	}
}

// largeMapItems is the number of elements of 1 MiB the map test maps
// over (LARGE_MAP_ITEMS overrides it, to try another).
var largeMapItems = envInt("LARGE_MAP_ITEMS", 1000)

// largeItem is the map test's element i.
func largeItem(i int) string { return largeString(1<<20, fmt.Sprintf("item-%04d:", i)) }

// testLargeMap: a map step over n elements of 1 MiB each, the output of
// the step before it; each element's result is small. The map step
// reads no step's output (flow.Reads()): else each element's task would
// carry the whole array in its input document, n times n MiB.
func testLargeMap(t *testing.T, rig largeRig, n int) {
	type result struct {
		Index int `json:"index"`
		Len   int `json:"len"`
	}
	fb := flow.New("large_map")
	flow.Step(fb, "items", func(ctx context.Context, n int) ([]string, error) {
		out := make([]string, n)
		for i := range out {
			out[i] = largeItem(i)
		}
		return out, nil
	})
	flow.Map(fb, "measure", func(ctx context.Context, item string) (result, error) {
		var i int
		if _, err := fmt.Sscanf(item, "item-%04d:", &i); err != nil || item != largeItem(i) {
			return result{}, flow.NonRetryable(fmt.Errorf("element of %d bytes starting %.40q is not one of the items", len(item), item))
		}
		return result{Index: i, Len: len(item)}, nil
	}, flow.DependsOn("items"), flow.Reads())
	e := newLargeEnv(t, rig, nil, []*flow.Flow{fb.MustBuild()})
	ctx := largeCtx(t)
	r, err := e.c.Run(ctx, "large_map", n, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != heph.StatusCompleted {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	var out struct{ Measure []result }
	if err := json.Unmarshal(r.Output, &out); err != nil {
		t.Fatalf("output %.200s: %v", r.Output, err)
	}
	if len(out.Measure) != n {
		t.Fatalf("%d results, want %d", len(out.Measure), n)
	}
	for i, res := range out.Measure {
		if res.Index != i || res.Len != 1<<20 {
			t.Fatalf("result %d is %+v, want index %d, len %d", i, res, i, 1<<20)
		}
	}
	// The rows refer to the output of items and to the snapshot (the
	// elements' tasks, which referred to theirs, are gone).
	e.checkOffloaded(2)
	if got := largeBlobs(e.blobs(), 1<<20); got < n {
		t.Errorf("%d blobs of 1 MiB or more, want at least %d (one per element)", got, n)
	}
}

// testForgedReference: a step whose output holds a reference to a blob
// (one of the run's own, named by its hash) fails, naming the step and
// where in the output; the blob is not read into the run.
func testForgedReference(t *testing.T, rig largeRig) {
	secret := largeString(1<<20, "secret")
	sum := sha256Hex(`"` + secret + `"`) // the blob of produce's output
	fb := flow.New("forged_ref")
	flow.Step(fb, "produce", func(ctx context.Context, _ int) (string, error) { return secret, nil })
	flow.Step(fb, "forge", func(ctx context.Context, _ int) (map[string]any, error) {
		return map[string]any{"x": []any{1, map[string]any{"$heph": "blob/1", "sha256": sum, "size": len(secret) + 2, "codec": "json"}}}, nil
	}, flow.DependsOn("produce"))
	e := newLargeEnv(t, rig, nil, []*flow.Flow{fb.MustBuild()})
	r, err := e.c.Run(largeCtx(t), "forged_ref", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != heph.StatusFailed || !strings.Contains(r.Error, `step "forge"`) || !strings.Contains(r.Error, "at $.x[1]") || !strings.Contains(r.Error, "did not issue") {
		t.Fatalf("run %s: %q: want it failed at the forged reference", r.Status, r.Error)
	}
}

// testLargeSignal: a code-first workflow receives a 10 MiB signal.
func testLargeSignal(t *testing.T, rig largeRig) {
	const size = 10 << 20
	wf := workflow.New("large_signal", func(ctx workflow.Context, _ struct{}) (string, error) {
		s, err := workflow.WaitSignal[string](ctx, "blob")
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%d:%s", len(s), sha256Hex(s)), nil
	})
	e := newLargeEnv(t, rig, nil, nil, wf)
	ctx := largeCtx(t)
	r, err := heph.StartWorkflow(ctx, e.c, wf, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sig := largeString(size, "signal")
	if err := r.Signal(ctx, "blob", sig); err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d:%s", size, sha256Hex(sig)); got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	// Read back from the store: the history's signal, from its blob.
	h, err := e.c.History(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(sig)
	found := false
	for _, ev := range h {
		if ev.Kind == hephtype.EventSignalReceived {
			found = string(ev.Data) == string(want)
			if !found {
				t.Errorf("the history's signal reads back as %d bytes starting %.100q", len(ev.Data), ev.Data)
			}
		}
	}
	if !found {
		t.Error("the history holds no signal of 10 MiB")
	}
	e.checkOffloaded(1)
	if n := largeBlobs(e.blobs(), size); n < 1 {
		t.Errorf("no blob of 10 MiB or more")
	}
}

// killAtCommit runs the child (largeKillChild) on e's database and blob
// store: it starts a run with an input of size bytes and holds the
// commit that creates it. Once the child says so, it is killed (SIGKILL);
// killAtCommit returns the hash of the blob of the input it held.
func killAtCommit(t *testing.T, e *largeEnv, size int) string {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	spec, err := json.Marshal(largeKillSpec{Backend: e.rig.backend, DB: e.db, Blobs: e.blobURL, Ready: ready, Size: size})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), largeKillEnv+"="+string(spec))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill() // on failure; dead already otherwise
		<-exited
	}()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("the child exited before its commit: %v", waitErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the child did not reach its commit in 2 minutes")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	held, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}
	m := refPattern.FindStringSubmatch(string(held))
	if m == nil {
		t.Fatalf("the held commit's input is %q, not a blob reference", held)
	}
	return m[1]
}

// testLargeKill: a process killed (SIGKILL) between a blob's write and
// the commit that would refer to it leaves the blob and no run; the
// sweep deletes that blob, and keeps those that rows refer to; the run
// started again completes.
func testLargeKill(t *testing.T, rig largeRig) {
	const size = 1 << 20
	ctx := largeCtx(t)
	e := &largeEnv{t: t, rig: rig, db: rig.db(t), blobURL: rig.blobs(t)}
	e.st = rig.open(t, e.db)
	e.bucket = openBlobs(t, e.blobURL)
	held := killAtCommit(t, e, size)
	orphans := e.blobs()
	if _, ok := orphans[held]; !ok {
		t.Fatalf("after the kill the blob store holds %d blobs, not the input's (%s): it was not written before the commit", len(orphans), held)
	}
	t.Logf("the killed process left %d blobs", len(orphans))
	if s := e.stored(); len(s.refs) > 0 || s.marks > 0 {
		t.Fatalf("the database refers to %d blobs and holds %d large payloads after a commit that did not happen", len(s.refs), s.marks)
	}
	c := e.client(func(cfg *heph.Config) { cfg.PayloadBlobGrace = time.Nanosecond }, []*flow.Flow{largeDigestFlow()})
	if runs, err := c.ListRuns(ctx, nil); err != nil || len(runs.Runs) != 0 {
		t.Fatalf("runs after the kill: %+v, %v; want none", runs, err)
	}

	// A run that completes before the sweep: its blobs are referred to,
	// and kept.
	kept := largeString(size, "kept")
	done, err := c.Run(ctx, "large_digest", kept, nil)
	if err != nil || done.Status != heph.StatusCompleted {
		t.Fatalf("run with a large input: %+v, %v", done, err)
	}
	sw, err := c.SweepPayloadBlobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := e.blobs()
	for h := range orphans {
		if _, ok := after[h]; ok {
			t.Errorf("the sweep kept blob %s, written by the killed process, that no row refers to", h)
		}
	}
	s := e.checkOffloaded(1)
	if len(after) != len(s.refs) || sw.Deleted < len(orphans) {
		t.Errorf("after the sweep (%+v): %d blobs for %d referred to; %d were orphans", sw, len(after), len(s.refs), len(orphans))
	}
	got, err := c.GetRun(ctx, done.ID)
	if err != nil || !sameJSON(got.Input, kept) {
		t.Fatalf("the completed run's input after the sweep: %d bytes, %v", len(got.Input), err)
	}

	// Nothing lost: the run started again completes.
	in := largeString(size, "kill")
	again, err := c.Run(ctx, "large_digest", in, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"digest": fmt.Sprintf("%d:%s", size, sha256Hex(in))}
	if again.Status != heph.StatusCompleted || !sameJSON(again.Output, want) {
		t.Fatalf("run started again: %s %s, output %s; want %v", again.Status, again.Error, again.Output, want)
	}
}

// shiftedClock is the real clock, later by shift.
type shiftedClock struct{ shift atomic.Int64 }

func (c *shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(c.shift.Load())) }

func (c *shiftedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// testLargeRetention: once retention deleted a run, the sweep deletes its
// blobs.
func testLargeRetention(t *testing.T, rig largeRig) {
	const size = 4 << 20
	fb := flow.New("large_out")
	flow.Step(fb, "make", func(ctx context.Context, tag string) (string, error) { return largeString(size, tag), nil })
	clk := &shiftedClock{}
	e := newLargeEnv(t, rig, func(cfg *heph.Config) {
		cfg.Retention = time.Hour
		cfg.Clock = clk
		cfg.PayloadBlobGrace = time.Nanosecond
	}, []*flow.Flow{fb.MustBuild()})
	ctx := largeCtx(t)
	r, err := e.c.Run(ctx, "large_out", "retained", nil)
	if err != nil || r.Status != heph.StatusCompleted {
		t.Fatalf("run: %+v, %v", r, err)
	}
	e.checkOffloaded(1)
	if n := largeBlobs(e.blobs(), size); n < 1 {
		t.Fatal("no blob of the run's output")
	}
	// Before the prune, the sweep keeps what the run refers to.
	if _, err := e.c.SweepPayloadBlobs(ctx); err != nil {
		t.Fatal(err)
	}
	e.checkOffloaded(1)
	got, err := e.c.GetRun(ctx, r.ID)
	if want := map[string]string{"make": largeString(size, "retained")}; err != nil || !sameJSON(got.Output, want) {
		t.Fatalf("the run's output after a sweep: %d bytes starting %.100q, %v", len(got.Output), got.Output, err)
	}
	clk.shift.Store(int64(2 * time.Hour))
	if n, err := e.c.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v; want 1", n, err)
	}
	before := e.blobs()
	sw, err := e.c.SweepPayloadBlobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if left := e.blobs(); len(left) != 0 || sw.Deleted != len(before) {
		t.Fatalf("after the sweep (%+v): %d blobs left of %d", sw, len(left), len(before))
	}
}

// envInt is the integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
