package store_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// OnlyActive holds for a non-empty list of active statuses only: a
// listing of them reads the index of the active runs.
func TestOnlyActive(t *testing.T) {
	for _, tc := range []struct {
		statuses []hephtype.RunStatus
		want     bool
	}{
		{nil, false},
		{[]hephtype.RunStatus{hephtype.StatusWaiting}, true},
		{store.ActiveStatuses(), true},
		{[]hephtype.RunStatus{hephtype.StatusPending, hephtype.StatusPending}, true},
		{[]hephtype.RunStatus{hephtype.StatusRunning, hephtype.StatusCompleted}, false},
		{[]hephtype.RunStatus{hephtype.StatusContinued}, false},
		{[]hephtype.RunStatus{"bogus"}, false},
	} {
		if got := store.OnlyActive(tc.statuses); got != tc.want {
			t.Errorf("OnlyActive(%v) = %v, want %v", tc.statuses, got, tc.want)
		}
	}
}
