package cli_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/demo"
)

// A business id key::value names a run in the commands that take one,
// as a run id does; one that names no run is one line that says what to
// do.
func TestBusinessIDAddressing(t *testing.T) {
	t.Parallel()
	c, env := demoServer(t)
	r, err := c.StartRun(t.Context(), demo.OrderFlow, demo.Order{ID: "42", Items: []demo.Line{{SKU: "a", Qty: 1, Price: 100}}}, &hephaestus.StartOptions{BusinessValue: "42"})
	if err != nil {
		t.Fatal(err)
	}
	if r.BusinessID != "order::42" {
		t.Fatalf("business id %q", r.BusinessID)
	}
	id := regexp.QuoteMeta(r.ID)
	wantLines(t, "show", ok(t, env, "show", "order::42"), `^id:\s+`+id+`$`, `^business id:\s+order::42$`)
	var shown struct{ ID string }
	if err := json.Unmarshal([]byte(ok(t, env, "show", "order::42", "-o", "json")), &shown); err != nil || shown.ID != r.ID {
		t.Fatalf("show -o json: %+v, %v; want run %s", shown, err, r.ID)
	}
	// result waits for the run by its business id; its history is then
	// final, the same by either name.
	wantLines(t, "result", ok(t, env, "result", "order::42", "--forever"), `TRK-42`)
	byID, byKey := ok(t, env, "history", r.ID), ok(t, env, "history", "order::42")
	if byKey != byID || !strings.Contains(byKey, "run_started") {
		t.Fatalf("history order::42:\n%s\nwant (by id):\n%s", byKey, byID)
	}
	for _, args := range [][]string{{"show", "order::404"}, {"history", "order::404"}, {"cancel", "order::404"}} {
		code, _, errOut := heph(t, env, args...)
		if code == 0 || !strings.Contains(errOut, "no run has the id or business id order::404: find runs with heph ls --search order::404") ||
			strings.Count(errOut, "order::404:") != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("heph %s: exit %d, stderr %q; want one line naming order::404 and what to do", strings.Join(args, " "), code, errOut)
		}
	}
}
