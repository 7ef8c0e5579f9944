package sqlite

import (
	"maps"
	"slices"

	"github.com/hephaestus-go/hephaestus/store"
)

// The writer keeps the runs it read or wrote last, as they are stored, so
// that the next change of a run (a runtime changes a run many times in a
// row) is decided without reading it. The cache holds only what a commit
// of this connection wrote or a read of this connection found, and it is
// dropped when anything else may have changed the runs:
//
//   - another connection (another process) committed: SQLite's
//     PRAGMA data_version, read under the write lock at the start of every
//     Apply, changes exactly then;
//   - an Apply failed (its transaction may or may not have committed);
//   - PruneRuns deleted runs, or DeleteRun a run.

// runState is a run as stored, with what the writer needs to change it.
// Its slices and maps are its own: nothing handed out shares them.
type runState struct {
	run   store.Run
	key   any // the unique_key column: nil or a string
	cond  any // the condition column: nil or a string (run.Condition as stored)
	attrs attrCols
	rowid int64
}

// attrCols are a run's tags and metadata as the columns of runs store
// them, which every task of the run copies when it is inserted.
type attrCols struct {
	tags string // a JSON array, "[]" for none
	meta any    // a JSON object, or nil (NULL) for none
}

// storedForm sets the tags and metadata of st.run as a read of its row
// returns them, from their columns (JSON may come back compacted).
func (st *runState) storedForm() error {
	m, _ := st.attrs.meta.(string)
	var err error
	st.run.Tags, st.run.Metadata, err = decodeAttrs([]byte(st.attrs.tags), []byte(m))
	return err
}

// runCacheSize bounds a generation of the cache: it holds between
// runCacheSize and twice as many runs.
const runCacheSize = 1024

// runCache is a map in two generations: a run found in the old one moves
// to the new one, and when the new one is full the old one is dropped.
type runCache struct {
	cur, old map[string]*runState
	version  int64 // PRAGMA data_version at the last check
	checked  bool
}

func (c *runCache) get(id string) *runState {
	if st := c.cur[id]; st != nil {
		return st
	}
	if st := c.old[id]; st != nil {
		c.put(id, st)
		return st
	}
	return nil
}

func (c *runCache) put(id string, st *runState) {
	if c.cur == nil {
		c.cur = make(map[string]*runState)
	}
	if len(c.cur) >= runCacheSize {
		c.old, c.cur = c.cur, make(map[string]*runState, runCacheSize)
	}
	c.cur[id] = st
}

func (c *runCache) clear() {
	c.cur, c.old = nil, nil
	c.checked = false
}

// checkRuns drops the cache when another connection committed since the
// last check. It runs inside a write transaction, so nobody else commits
// before the transaction ends.
func (w *wconn) checkRuns() error {
	rows, err := w.query(qDataVersion)
	if err != nil {
		return err
	}
	ok, err := w.row(rows, 1)
	if err != nil {
		return err
	}
	v := vInt(w.dest[0])
	if !ok || !w.runs.checked || v != w.runs.version {
		w.runs.clear()
		w.runs.version, w.runs.checked = v, true
	}
	return nil
}

// cloneRun returns a copy of r that shares no slices or maps with it.
func cloneRun(r *store.Run) *store.Run {
	c := *r
	c.Input = slices.Clone(r.Input)
	c.Output = slices.Clone(r.Output)
	c.State = slices.Clone(r.State)
	c.Published = slices.Clone(r.Published)
	c.Tags = slices.Clone(r.Tags)
	c.SearchAttributes = store.CloneAttrs(r.SearchAttributes)
	if r.Metadata != nil {
		c.Metadata = maps.Clone(r.Metadata)
		for k, v := range c.Metadata {
			c.Metadata[k] = slices.Clone(v)
		}
	}
	return &c
}
