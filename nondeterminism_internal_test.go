package hephaestus

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/apitest"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
)

// NonDeterminismError is a type of the public API (hephtype's), which
// the replay core reports as it is: no internal type in it.
func TestNonDeterminismErrorIsPublic(t *testing.T) {
	leaks, err := apitest.Leaks(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leaks {
		if strings.HasPrefix(l, "hephaestus.NonDeterminismError") {
			t.Errorf("exported API mentions an internal type: %s", l)
		}
	}
	var core error = &replay.NonDeterminismError{Workflow: "orders"}
	if _, ok := core.(*NonDeterminismError); !ok {
		t.Fatalf("the replay core's error is a %T, not a *NonDeterminismError", core)
	}
}

// The error that leaves the runtime (telemetry) is the public type, found
// by errors.As whether it comes alone or wrapped, with its message and
// fields; the rest of a wrapped chain is kept.
func TestPublicNonDeterminismError(t *testing.T) {
	in := &replay.NonDeterminismError{
		Workflow: "orders", RunID: "run-1", Decision: 2, Entry: 6, RecordedKind: "timer_started", Recorded: "timer_started #2 (1h0m0s)",
		RecordedAt: "orders/orders.go:40", Command: `Execute activity "refund" (step_scheduled #2)`, CommandAt: "/src/orders/orders.go:41",
		Hint: "use workflow.Patched",
	}
	publicError := func(err error) error { return publicEvent(telemetry.Event{Err: err}).Err }
	if err := publicError(nil); err != nil {
		t.Fatalf("publicError(nil) = %v", err)
	}
	if err := publicError(io.EOF); err != io.EOF {
		t.Fatalf("publicError(io.EOF) = %v", err)
	}
	for _, err := range []error{in, fmt.Errorf("decide run-1: %w", in), fmt.Errorf("decide: %w", errors.Join(io.ErrUnexpectedEOF, in))} {
		got := publicError(err)
		var nde *NonDeterminismError
		if !errors.As(got, &nde) {
			t.Fatalf("publicError(%T) = %T, not a *NonDeterminismError", err, got)
		}
		if got.Error() != err.Error() || nde.Error() != in.Error() {
			t.Errorf("message %q, want %q", got.Error(), err.Error())
		}
		if nde.Workflow != "orders" || nde.RunID != "run-1" || nde.Decision != 2 || nde.Entry != 6 || nde.RecordedAt != in.RecordedAt ||
			nde.CommandAt != in.CommandAt || nde.Command != in.Command || nde.Hint != in.Hint {
			t.Errorf("fields %+v", nde)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) != errors.Is(got, io.ErrUnexpectedEOF) {
			t.Errorf("the conversion of %v lost the rest of the chain", err)
		}
	}
	for _, want := range []string{"decision 2", "the history's entry 6 is timer_started #2 (1h0m0s) (issued at orders/orders.go:40)",
		`the code issued Execute activity "refund" (step_scheduled #2) at /src/orders/orders.go:41`, "use workflow.Patched"} {
		if !strings.Contains(in.Error(), want) {
			t.Errorf("%q does not say %q", in.Error(), want)
		}
	}
}
