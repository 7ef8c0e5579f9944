package wfrt

import (
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/store"
)

// Waits returns what a workflow run waited for after its last decision,
// as its state records it (nil for a run decided before waits were
// recorded), and the id of the child run each child wait is for.
func Waits(run *store.Run) ([]replay.Wait, map[int]string, error) {
	st, err := loadWfState(run)
	if err != nil {
		return nil, nil, err
	}
	children := map[int]string{}
	for _, w := range st.Waits {
		if w.Kind == replay.WaitChild {
			children[w.Seq] = childID(run.ID, w.Seq)
		}
	}
	return st.Waits, children, nil
}
