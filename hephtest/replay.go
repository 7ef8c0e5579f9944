package hephtest

import (
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
)

// ReplayHistories is the replay check before a deploy, as a test: it
// replays every history export at path (a file, or every *.json file of a
// directory: write them with heph history export --dir) against the
// workflows ws, and fails the test with every history that diverges (a
// *heph.NonDeterminismError naming the recorded entry's source line and
// the new code's) or that cannot be replayed (a file that is not a
// history export, a workflow not among ws). A path with no history fails
// it too, so that a CI job that exported nothing does not pass unseen. It
// returns the report.
func ReplayHistories(t testing.TB, path string, ws ...heph.Workflow) *heph.ReplayReport {
	t.Helper()
	check := heph.NewReplayCheck(ws...)
	check.Path(path)
	rep := check.Report()
	for _, r := range rep.Results {
		if r.Outcome != heph.ReplayOK {
			t.Errorf("replay %s: %s: %v", r.Source, r.Outcome, r.Err)
		}
	}
	if len(rep.Results) == 0 {
		t.Errorf("replay %s: no history to replay", path)
	}
	return rep
}
