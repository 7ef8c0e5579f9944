package replay_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
)

// activityWith is a workflow that executes activity "a" with a fixed raw
// input and waits for a signal.
func activityWith(input string) replay.Func {
	return func(u *replay.Unit, _ json.RawMessage) (json.RawMessage, error) {
		if _, err := u.ExecuteActivity("a", json.RawMessage(input), replay.ActivityOptions{}); err != nil {
			return nil, err
		}
		return u.WaitSignal("go")
	}
}

// The input is compared by the hash of its canonical JSON: the order of
// object keys and insignificant space do not matter, values do.
func TestInputHashIsCanonical(t *testing.T) {
	d := decide(t, newInstance(t, activityWith(`{"b": [1, 2.50], "a": "x"}`)), t0, started())
	h := append([]replay.Event{started()}, d.History...)
	var ref string
	for _, e := range h {
		if e.Kind == hephtype.EventStepScheduled {
			ref = e.Ref
		}
	}
	var rec struct{ Input, At string }
	if err := json.Unmarshal([]byte(ref), &rec); err != nil || len(rec.Input) != 16 || !strings.HasPrefix(rec.At, "replay/nondeterminism_test.go:") {
		t.Fatalf("step_scheduled records %q (%v), want a 16-digit hash and this file", ref, err)
	}
	for input, same := range map[string]bool{
		`{"a":"x","b":[1,2.50]}`:                    true,
		"{\n  \"a\": \"x\",\n  \"b\": [1, 2.50]\n}": true,
		`{"a":"x","b":[1,2.5]}`:                     false, // another number as written
		`{"a":"y","b":[1,2.50]}`:                    false,
		`{"a":"x","b":[2.50,1]}`:                    false,
	} {
		in := newInstance(t, activityWith(input))
		err := in.Replay(h)
		var nde *replay.NonDeterminismError
		switch {
		case same && err != nil:
			t.Errorf("input %s: %v", input, err)
		case !same && (!errors.As(err, &nde) || nde.Changed != "input"):
			t.Errorf("input %s replayed with %v, want a changed input", input, err)
		}
	}
}
