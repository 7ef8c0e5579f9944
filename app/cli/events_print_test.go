package cli

import (
	"strings"
	"testing"
	"time"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// heph events show prints a line per wait the event matched.
func TestPrintEventWaits(t *testing.T) {
	at := time.Date(2032, 1, 2, 3, 4, 5, 0, time.UTC)
	var b strings.Builder
	err := printEvent(&b, &apiclient.Event{ID: "pay-1", Name: "invoice.paid", At: at, Waits: []apiclient.EventWait{
		{ID: "r1:abc", RunID: "r1", Kind: "workflow", DeliveredAt: at},
		{ID: "r2:wait#0", RunID: "r2", Step: "wait", Kind: "step"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"wait r1:abc", "delivered to run r1", "wait r2:wait#0", "matched to run r2 step wait"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
