package e2e_test

// The process that the SIGKILL test of the large payloads
// (largepayloads_test.go) kills between a blob's write and the commit
// that refers to it. It lives in a file without the !race constraint of
// the tests because TestMain (main_test.go) calls it in every build.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/blobstore/gocloudblob"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// largeKillEnv makes this binary the process that the large payloads'
// SIGKILL test kills: its value is a largeKillSpec in JSON.
const largeKillEnv = "HEPH_LARGE_KILL_CHILD"

// largeKillSpec is what the killed process opens and starts.
type largeKillSpec struct {
	// Backend is "sqlite" or "postgres"; DB the SQLite file or the DSN.
	Backend, DB string
	// Blobs is the URL of the blob store (gocloudblob.Open).
	Blobs string
	// Ready is the file written once the blob is written and the commit
	// that would refer to it is held.
	Ready string
	// Size is the size of the run's input, in bytes.
	Size int
}

// largeMark is in every large payload of these tests, so that a dump of
// the database can tell whether it holds one.
const largeMark = "LaRgE-pAyLoAd"

// largeString returns a JSON-safe string of exactly size bytes that
// starts with tag and holds largeMark over and over.
func largeString(size int, tag string) string {
	unit := "|" + largeMark + "-0123456789abcdefghijklmnopqrstuvwxyz"
	var b strings.Builder
	b.Grow(size + len(unit))
	b.WriteString(tag)
	for b.Len() < size {
		b.WriteString(unit)
	}
	return b.String()[:size]
}

// sha256Hex is the hex SHA-256 of s.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// largeDigestFlow is the flow of the SIGKILL test: one step that returns
// the size and hash of its (large) input.
func largeDigestFlow() *flow.Flow {
	fb := flow.New("large_digest")
	flow.Step(fb, "digest", func(ctx context.Context, in string) (string, error) {
		return fmt.Sprintf("%d:%s", len(in), sha256Hex(in)), nil
	})
	return fb.MustBuild()
}

// blobRefPrefix starts the stored form of an offloaded payload as the
// runtime hands it to the store.
var blobRefPrefix = []byte(`{"$heph":"blob/1"`)

// commitHolder is a store whose Apply, given the creation of a run whose
// input was offloaded (the blob is written by then: the payload layer
// writes it before it calls the store), writes the input's reference to
// the ready file and never returns: the commit does not happen until the
// process is killed.
type commitHolder struct {
	store.Store
	ready string
}

func (s *commitHolder) Apply(ctx context.Context, p *store.ApplyParams) (*store.ApplyResult, error) {
	for _, c := range p.Changes {
		if c.Create == nil || !bytes.HasPrefix(c.Create.Input, blobRefPrefix) {
			continue
		}
		// The reference, whole: written aside, then renamed.
		if err := os.WriteFile(s.ready+".tmp", c.Create.Input, 0o644); err != nil {
			return nil, err
		}
		if err := os.Rename(s.ready+".tmp", s.ready); err != nil {
			return nil, err
		}
		for {
			time.Sleep(time.Hour) // until SIGKILL
		}
	}
	return s.Store.Apply(ctx, p)
}

// largeKillChild starts a run with a large input on the store and blob
// store of spec, through a commitHolder: it returns only on failure.
func largeKillChild(spec string) error {
	var sp largeKillSpec
	if err := json.Unmarshal([]byte(spec), &sp); err != nil {
		return err
	}
	ctx := context.Background()
	var st store.Store
	var err error
	switch sp.Backend {
	case "sqlite":
		st, err = sqlite.Open(ctx, &sqlite.Config{Path: sp.DB})
	case "postgres":
		st, err = postgres.Open(ctx, &postgres.Config{DSN: sp.DB})
	default:
		err = fmt.Errorf("unknown backend %q", sp.Backend)
	}
	if err != nil {
		return err
	}
	bucket, err := gocloudblob.Open(ctx, sp.Blobs)
	if err != nil {
		return err
	}
	c, err := heph.New(&heph.Config{Store: &commitHolder{Store: st, ready: sp.Ready}, PayloadBlobs: bucket, Logger: e2e.QuietLogger()})
	if err != nil {
		return err
	}
	if err := c.Register(largeDigestFlow()); err != nil {
		return err
	}
	r, err := c.StartRun(ctx, "large_digest", largeString(sp.Size, "kill"), nil)
	if err != nil {
		return err
	}
	return errors.New("run " + r.ID + " was created: the commit was not held")
}
