package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/e2e"
)

// TestChaosRetriedCommitsEncoded is TestChaosRetriedCommits with every
// payload encrypted (Config.PayloadCodec) and every one above 64 bytes
// offloaded to a blob store (Config.PayloadBlobs): the codec and the
// offload sit above the commits that fail or lose their outcome and are
// tried again, so a retried commit writes the same envelope and the same
// blob; the checker reads every run through the codec. Both backends.
func TestChaosRetriedCommitsEncoded(t *testing.T) {
	for _, b := range chaosBackends() {
		t.Run(b.name, func(t *testing.T) {
			chaosInProcess.Lock()
			defer chaosInProcess.Unlock()
			db := b.db(t)
			ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
			defer cancel()
			seed := chaosSeed(t, 7)
			fs := &chaosFaultyStore{Store: db.open(t, "hephaestus-chaos"), rate: 0.10, rng: rand.New(rand.NewPCG(seed, 0xc0de))}
			bucket := memblob.OpenBucket(nil)
			defer bucket.Close()
			c := startChaosClient(t, fs, func(c *heph.Config) {
				c.LeaseDuration, c.HeartbeatInterval = time.Second, 250*time.Millisecond
				c.MaxCommitBatch = 8
				c.PayloadCodec = e2e.PayloadChain(t, "k1", "k1")
				c.PayloadBlobs, c.PayloadOffloadAbove = bucket, 64
			})
			tel := watchChaosTelemetry(t, c)
			fs.on.Store(true)
			start, execs0 := time.Now(), e2e.ChaosExecutions()
			l := newChaosLoad(t, ctx, c, c.Store(), "rce")
			l.wave(40, 16)
			l.waitFinished()
			fs.on.Store(false)
			if err := c.Stop(context.Background()); err != nil {
				t.Errorf("stop: %v", err)
			}
			l.check(db.name, "retried_commits_encoded", start, e2e.ChaosExecutions()-execs0,
				fmt.Sprintf("seed=%d applies=%d injected=%d", seed, fs.calls.Load(), fs.before.Load()+fs.after.Load()), tel.String())
			if fs.after.Load() == 0 || fs.before.Load() == 0 {
				t.Errorf("no fault of one kind was injected: %d before, %d after the commit", fs.before.Load(), fs.after.Load())
			}
			if n := len(memKeys(t, bucket)); n == 0 {
				t.Error("no payload was offloaded")
			}
		})
	}
}

// memKeys lists the objects of a bucket.
func memKeys(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var out []string
	it := b.List(nil)
	for {
		obj, err := it.Next(t.Context())
		if err != nil {
			return out
		}
		out = append(out, obj.Key)
	}
}
