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
