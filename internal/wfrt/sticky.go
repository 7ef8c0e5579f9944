package wfrt

import (
	"container/list"
	"sync"

	"github.com/hephaestus-go/hephaestus/internal/replay"
)

// stickyCache keeps the replay instances of recently active workflow runs
// in memory (sticky execution), so that a decision feeds an instance only
// the events appended since the last one instead of replaying the whole
// history. It is an LRU bounded by Config.StickyCacheSize.
//
// Eviction is always safe: an instance is a cache of the history, and a
// decision that finds none replays the history into a new one. Every
// decision of a run in this process holds the run's entry from reading
// the history until its commit's outcome is known, and drops the instance
// if the commit is refused: so an instance in the cache is never ahead of
// the stored history. (It may be behind, when another process decided:
// then its next commit is refused, and the decision is made again from
// the stored history.)
//
// Locking: an entry's lock may be held while taking the cache's, never
// the other way round, and nobody holds two entries.
type stickyCache struct {
	mu     sync.Mutex
	max    int
	m      map[string]*stickyEntry
	lru    list.List // of *stickyEntry, most recent first
	closed bool      // the client stopped: keep nothing
}

// stickyEntry is the slot of one run. Its lock serializes the decisions of
// the run in this process.
type stickyEntry struct {
	runID string
	elem  *list.Element // nil once out of the cache

	mu   sync.Mutex
	inst *replay.Instance // nil: replay the history into a new one
}

func newStickyCache(max int) *stickyCache {
	return &stickyCache{max: max, m: map[string]*stickyEntry{}}
}

// lock returns the run's entry, locked, creating it if needed, and evicts
// the least recently used entries beyond the bound. Entries leave the
// cache only while locked by whoever removes them, so a run has at most
// one entry in use at a time: its decisions in this process never
// overlap. (An entry in use is not evicted; the bound may be exceeded by
// as many entries as are in use at once.)
func (s *stickyCache) lock(runID string) *stickyEntry {
	for {
		s.mu.Lock()
		e := s.m[runID]
		if e == nil {
			e = &stickyEntry{runID: runID}
			e.elem = s.lru.PushFront(e)
			s.m[runID] = e
		} else {
			s.lru.MoveToFront(e.elem)
		}
		var victims []*stickyEntry
		for el := s.lru.Back(); el != nil && s.lru.Len()-len(victims) > s.max; {
			v := el.Value.(*stickyEntry)
			el = el.Prev()
			if v != e && v.mu.TryLock() {
				victims = append(victims, v)
			}
		}
		for _, v := range victims {
			s.removeLocked(v)
		}
		s.mu.Unlock()
		for _, v := range victims {
			v.drop()
			v.mu.Unlock()
		}
		e.mu.Lock()
		s.mu.Lock()
		current := e.elem != nil
		s.mu.Unlock()
		if current {
			return e
		}
		// Removed while we waited for it: take the run's current entry.
		e.mu.Unlock()
	}
}

func (s *stickyCache) removeLocked(e *stickyEntry) {
	if e.elem != nil {
		s.lru.Remove(e.elem)
		e.elem = nil
		delete(s.m, e.runID)
	}
}

// unlock releases an entry. An entry without an instance leaves the cache
// (it holds no slot), and so does every entry once the cache is closed.
func (s *stickyCache) unlock(e *stickyEntry) {
	s.mu.Lock()
	if e.inst == nil || s.closed {
		s.removeLocked(e)
	}
	orphan := e.elem == nil
	s.mu.Unlock()
	if orphan {
		e.drop()
	}
	e.mu.Unlock()
}

// has reports whether the run has an entry (an instance, or a decision
// under way). It takes no slot.
func (s *stickyCache) has(runID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[runID] != nil
}

// evict drops a run's instance, if any.
func (s *stickyCache) evict(runID string) {
	s.mu.Lock()
	e := s.m[runID]
	s.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		s.mu.Lock()
		s.removeLocked(e)
		s.mu.Unlock()
		e.drop()
		e.mu.Unlock()
	}
}

// len returns the number of runs in the cache.
func (s *stickyCache) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

// closeAll drops every instance (a workflow was registered again: cached
// instances run the code they were made with).
func (s *stickyCache) closeAll() {
	s.mu.Lock()
	all := make([]*stickyEntry, 0, len(s.m))
	for _, e := range s.m {
		all = append(all, e)
	}
	s.mu.Unlock()
	for _, e := range all {
		e.mu.Lock()
		s.mu.Lock()
		s.removeLocked(e)
		s.mu.Unlock()
		e.drop()
		e.mu.Unlock()
	}
}

// close drops every instance and keeps none from now on (Client.Stop).
func (s *stickyCache) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.closeAll()
}

// drop closes the entry's instance; the caller holds e.mu.
func (e *stickyEntry) drop() {
	if e.inst != nil {
		e.inst.Close()
		e.inst = nil
	}
}
