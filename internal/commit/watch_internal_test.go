package commit

import (
	"errors"
	"testing"

	"github.com/hephaestus-go/hephaestus/store"
)

// WatchAll receives on a commit that changed any run, not on a refused
// change, and not after its stop; Watch receives only for its run.
func TestWatchAll(t *testing.T) {
	var w Watches
	all, stopAll := w.WatchAll()
	one, stopOne := w.Watch("r1")
	defer stopOne()
	got := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	changed := func(id string) *Request { return &Request{Res: store.ChangeResult{Run: &store.Run{ID: id}}} }

	w.Committed([]*Request{{Err: errors.New("refused")}})
	if got(all) || got(one) {
		t.Fatal("a refused change woke a watch")
	}
	w.Committed([]*Request{changed("r2")})
	if !got(all) || got(one) {
		t.Fatal("a change of r2: want the watch of every run woken, not r1's")
	}
	w.Committed([]*Request{changed("r1"), changed("r3")})
	if !got(all) || !got(one) {
		t.Fatal("a change of r1: want both watches woken")
	}
	stopAll()
	w.Committed([]*Request{changed("r2")})
	if got(all) {
		t.Fatal("a stopped watch was woken")
	}
}
