package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store"
)

// errRunFinished stands for the runtimes' "run finished", which they add
// to the expected errors at init.
var errRunFinished = errors.New("run finished")

func init() { worker.ExpectErrors(errRunFinished) }

func TestExpected(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{worker.ErrLeaseLost, true},
		{worker.ErrLeaseExpiring, true},
		{worker.ErrRunCancelled, true},
		{worker.ErrShutdown, true},
		{store.ErrLeaseLost, true},
		{store.ErrRunNotFound, true},
		{fmt.Errorf("complete step: %w", store.ErrLeaseLost), true},
		{fmt.Errorf("%w (%w)", context.Canceled, worker.ErrShutdown), true},
		{errors.Join(errors.New("boom"), worker.ErrRunCancelled), true},
		{errRunFinished, true},
		{fmt.Errorf("decide: %w", errRunFinished), true},
		{errors.New("boom"), false},
		{errors.New(worker.ErrLeaseLost.Error()), false}, // same text, another error
		{context.Canceled, false},
		{store.ErrDuplicateRun, false},
		{nil, false},
	} {
		if got := worker.Expected(tc.err); got != tc.want {
			t.Errorf("Expected(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestJitterStaysWithinTwentyPercent(t *testing.T) {
	const d = time.Second
	lo, hi := d, d
	for range 10000 {
		j := worker.Jitter(d)
		if j < 800*time.Millisecond || j > 1200*time.Millisecond {
			t.Fatalf("Jitter(%v) = %v, outside ±20%%", d, j)
		}
		lo, hi = min(lo, j), max(hi, j)
	}
	if lo == hi {
		t.Fatalf("Jitter(%v) always returned %v", d, lo)
	}
	if j := worker.Jitter(0); j != 0 {
		t.Errorf("Jitter(0) = %v", j)
	}
}

func TestStarted(t *testing.T) {
	at := time.Date(2026, 3, 1, 13, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, claims := range []int{1, 2} {
		ev := worker.Started("w1", &store.Task{Attempt: 3, Claims: claims}, at, "charge", 4)
		if ev.Kind != hephtype.EventStepStarted || ev.Step != "charge" || ev.Index != 4 || ev.Attempt != 3 {
			t.Errorf("Started = %+v", ev)
		}
		var d worker.StartedData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		want := worker.StartedData{Worker: "w1", StartedAt: at.UTC(), Claim: claims, Reexecution: claims > 1}
		if d != want || d.StartedAt.Location() != time.UTC {
			t.Errorf("claim %d: data %+v, want %+v in UTC", claims, d, want)
		}
	}
}

func TestMustJSON(t *testing.T) {
	if got := string(worker.MustJSON(map[string]int{"a": 1})); got != `{"a":1}` {
		t.Errorf("MustJSON = %s", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("MustJSON of a channel did not panic")
		}
	}()
	worker.MustJSON(make(chan int))
}
