package postgres

import (
	"maps"
	"slices"
	"sync"

	"github.com/hephaestus-go/hephaestus/store"
)

// known is what this store last saw of runs and leases, so that an Apply
// can decide its changes without reading them first and send the whole
// transaction in one round trip (see applier.guess). Nothing in it is
// trusted: the transaction checks every assumption under its locks (the
// run's row version, the task's token) and, when one fails, is rolled
// back and run again the careful way, reading the rows. So a stale entry
// costs a round trip, never a wrong write.
//
// A run is remembered with the id of the transaction that wrote its row
// (xmin): any later write of the row, by any process, changes it. A lease
// is remembered as this store handed it out (claimed).
type known struct {
	mu     sync.Mutex
	runs   map[string]knownRun
	leases map[int64]fencedTask
	max    int
}

type knownRun struct {
	run  *store.Run
	key  *string // its unique_key
	xmin int64   // the low 32 bits of the txid that wrote it
}

// knownMax bounds the entries of each kind: enough for every run and
// lease in flight in one process; beyond, an entry is dropped at random.
const knownMax = 16384

func newKnown() *known {
	return &known{runs: map[string]knownRun{}, leases: map[int64]fencedTask{}, max: knownMax}
}

// xmin is the value of the xmin column of rows written by transaction
// txid (txid_current: the epoch in the high 32 bits).
func xmin(txid int64) int64 { return txid % (1 << 32) }

// covers returns what the changes of p need to be decided without reading,
// or false if any of it is not known: the runs that updates name and the
// tasks that fence changes.
//
// It also returns false when a change could not safely be applied again:
// an update that neither a lease fences nor a key makes idempotent. A
// guessed transaction sends COMMIT before it learns its own id, so when
// every answer is lost with the connection its outcome cannot be asked
// for: Apply then fails, and only a change that is refused when applied
// twice (a create by its id, a fenced change by its lease, a keyed one by
// its key) may be left to the caller to apply again.
func (k *known) covers(p *store.ApplyParams) (map[string]knownRun, map[int64]fencedTask, bool) {
	for _, c := range p.Changes {
		if c.Create == nil && c.Fence == nil && c.Key == "" {
			return nil, nil, false
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	runs := map[string]knownRun{}
	var leases map[int64]fencedTask
	for _, c := range p.Changes {
		if c.Fence != nil {
			ft, ok := k.leases[c.Fence.TaskID]
			if !ok || ft.token != c.Fence.Token {
				return nil, nil, false
			}
			if leases == nil {
				leases = map[int64]fencedTask{}
			}
			leases[c.Fence.TaskID] = ft
		}
		if c.Create != nil {
			continue
		}
		kr, ok := k.runs[c.RunID]
		if !ok {
			return nil, nil, false
		}
		runs[c.RunID] = kr
	}
	return runs, leases, true
}

// putRun remembers run as written (or read) by transaction txid; a copy,
// since the caller gets the original.
func (k *known) putRun(run *store.Run, key *string, txid int64) {
	c := *run
	c.Tags = slices.Clone(run.Tags)
	c.Metadata = maps.Clone(run.Metadata)
	kr := knownRun{run: &c, key: key, xmin: xmin(txid)}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.runs[run.ID]; !ok && len(k.runs) >= k.max {
		for id := range k.runs {
			delete(k.runs, id)
			break
		}
	}
	k.runs[run.ID] = kr
}

// putLeases remembers the leases of tasks this store claimed.
func (k *known) putLeases(ts []*store.Task) {
	if len(ts) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, t := range ts {
		if _, ok := k.leases[t.ID]; !ok && len(k.leases) >= k.max {
			for id := range k.leases {
				delete(k.leases, id)
				break
			}
		}
		k.leases[t.ID] = fencedTask{runID: t.RunID, token: t.Token, owned: true, kind: t.Kind, step: t.Step, index: t.Index}
	}
}

// forget drops what is known of runs and tasks.
func (k *known) forget(runs []string, tasks []int64) {
	if len(runs) == 0 && len(tasks) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range runs {
		delete(k.runs, id)
	}
	for _, id := range tasks {
		delete(k.leases, id)
	}
}

// forgetGuess drops what a wrong guess took from known.
func (k *known) forgetGuess(g *guessed) {
	runs := make([]string, 0, len(g.runs))
	for id := range g.runs {
		runs = append(runs, id)
	}
	tasks := make([]int64, 0, len(g.leases))
	for id := range g.leases {
		tasks = append(tasks, id)
	}
	k.forget(runs, tasks)
}
