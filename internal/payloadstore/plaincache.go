package payloadstore

import (
	"bytes"
	"encoding/json"
	"sync"
)

// plainCache keeps the plain values of envelopes this process encoded or
// decoded lately, keyed by the envelope's bytes: an envelope is
// immutable (its bytes determine its plain value), so a hit is exact.
// The Decide of every change reads the run's input and snapshot again,
// and the snapshot is the envelope the commit before wrote: both hit.
// Bounded in bytes; small envelopes only.
type plainCache struct {
	mu    sync.Mutex
	m     map[string]json.RawMessage
	bytes int
}

const (
	// plainCacheBytes bounds the envelopes and values kept, in all.
	plainCacheBytes = 32 << 20
	// plainCacheMax is the largest envelope kept.
	plainCacheMax = 64 << 10
)

func (c *plainCache) get(env json.RawMessage) (json.RawMessage, bool) {
	if len(env) > plainCacheMax {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[string(env)]
	if !ok {
		return nil, false
	}
	return bytes.Clone(p), true
}

// put keeps a copy of plain as the value of env (values are copied in
// and out: a caller may change its own).
func (c *plainCache) put(env, plain json.RawMessage) {
	if len(env) > plainCacheMax || len(plain) > plainCacheMax {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]json.RawMessage{}
	}
	k := string(env)
	if _, ok := c.m[k]; ok {
		return
	}
	size := len(env) + len(plain)
	for old, v := range c.m { // evict any, until it fits
		if c.bytes+size <= plainCacheBytes {
			break
		}
		delete(c.m, old)
		c.bytes -= len(old) + len(v)
	}
	c.m[k] = bytes.Clone(plain)
	c.bytes += size
}

// snapCache keeps the snapshots read lately, as read (references with
// their tokens), keyed by their stored form (a reference to a blob, an
// envelope, or the plain value): a run's snapshot is read several times
// a change (the change's Decide, the change's result, the next Decide,
// whoever waits on the run), and each read walks it for references.
type snapCache struct {
	mu      sync.Mutex
	entries []snapEntry // the newest last
}

type snapEntry struct {
	stored string
	kept   json.RawMessage
}

const (
	snapCacheEntries = 16
	snapCacheMax     = 4 << 20 // the largest snapshot kept
)

func (c *snapCache) get(stored json.RawMessage) (json.RawMessage, bool) {
	if len(stored) > snapCacheMax {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.entries) - 1; i >= 0; i-- {
		if e := c.entries[i]; e.stored == string(stored) {
			return bytes.Clone(e.kept), true
		}
	}
	return nil, false
}

func (c *snapCache) put(stored, kept json.RawMessage) {
	if len(stored) > snapCacheMax || len(kept) > snapCacheMax {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == snapCacheEntries {
		c.entries = append(c.entries[:0], c.entries[1:]...)
	}
	c.entries = append(c.entries, snapEntry{stored: string(stored), kept: bytes.Clone(kept)})
}
