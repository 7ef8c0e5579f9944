package payloadstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The cache gives back what was put, as a copy, keeps small envelopes
// only, and stays within its bound.
func TestPlainCache(t *testing.T) {
	var c plainCache
	env, plain := json.RawMessage(`{"$heph":"enc/1","data":"x"}`), json.RawMessage(`"v"`)
	c.put(env, plain)
	plain[1] = 'w' // the caller's own value changes: the cache's does not
	got, ok := c.get(env)
	if !ok || string(got) != `"v"` {
		t.Fatalf("get: %s, %v", got, ok)
	}
	got[1] = 'z'
	if again, _ := c.get(env); string(again) != `"v"` {
		t.Fatalf("a change of what get returned reached the cache: %s", again)
	}
	big := json.RawMessage(`"` + strings.Repeat("b", plainCacheMax) + `"`)
	c.put(big, plain)
	if _, ok := c.get(big); ok {
		t.Fatal("an envelope above plainCacheMax was kept")
	}
	value := json.RawMessage(`"` + strings.Repeat("v", plainCacheMax/2) + `"`)
	for i := range 2 * plainCacheBytes / plainCacheMax {
		c.put(json.RawMessage(fmt.Sprintf(`{"$heph":"enc/1","n":%d,"pad":"%s"}`, i, strings.Repeat("p", plainCacheMax/4))), value)
	}
	if c.bytes > plainCacheBytes || c.bytes <= 0 {
		t.Fatalf("the cache holds %d bytes, bound %d", c.bytes, plainCacheBytes)
	}
	sum := 0
	for k, v := range c.m {
		sum += len(k) + len(v)
	}
	if sum != c.bytes {
		t.Fatalf("the cache counts %d bytes, holds %d", c.bytes, sum)
	}
}
