package hephaestus_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// lostCommit is a store whose first Apply commits and then reports an
// error, as when a connection dies after COMMIT was sent.
type lostCommit struct {
	store.Store
	calls atomic.Int32
}

func (s *lostCommit) Apply(ctx context.Context, p *store.ApplyParams) (*store.ApplyResult, error) {
	res, err := s.Store.Apply(ctx, p)
	if s.calls.Add(1) == 1 && err == nil {
		return nil, errors.New("connection lost after commit")
	}
	return res, err
}

// A start whose commit happened but whose outcome was lost is retried, and
// the retry finds the run it created: the caller sees one run, started.
func TestCommitRetryAfterLostOutcome(t *testing.T) {
	ctx := context.Background()
	inner, err := sqlite.Open(ctx, &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	st := &lostCommit{Store: inner}
	c, err := heph.New(&heph.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	b := flow.New("job")
	flow.Step(b, "s", func(ctx context.Context, in int) (int, error) { return in, nil })
	if err := c.Register(b.MustBuild()); err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRun(ctx, "job", 1, nil)
	if err != nil {
		t.Fatalf("StartRun after a lost commit outcome: %v", err)
	}
	if st.calls.Load() < 2 {
		t.Fatalf("Apply called %d times, want a retry", st.calls.Load())
	}
	l, err := c.ListRuns(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != 1 || l.Runs[0].ID != r.ID {
		t.Fatalf("runs stored: %+v, want exactly run %s", l.Runs, r.ID)
	}
}

// A change submitted after Stop is refused with ErrClosed; it used to
// wait forever when it won the race into the queue of stopped loops.
func TestSubmitAfterStop(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := flow.New("job")
	flow.Step(b, "s", func(ctx context.Context, in int) (int, error) { return in, nil })
	for range 50 {
		c, err := heph.New(&heph.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Register(b.MustBuild()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartRun(ctx, "job", 1, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartRun(ctx, "job", 2, nil); !errors.Is(err, heph.ErrClosed) {
			t.Fatalf("StartRun after Stop: %v, want ErrClosed", err)
		}
		if _, err := c.StartRuns(ctx, "job", []heph.StartRequest{{Input: 3}}); !errors.Is(err, heph.ErrClosed) {
			t.Fatalf("StartRuns after Stop: %v, want ErrClosed", err)
		}
	}
}
