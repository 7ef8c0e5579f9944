package e2e_test

import (
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/blobstore/gocloudblob"
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
			bucket := memblob.OpenBucket(nil)
			defer bucket.Close()
			runRetriedCommits(t, b, retriedCommits{seed: 7, fault: "retried_commits_encoded", tag: "rce", encoded: true, mod: func(c *heph.Config) {
				c.PayloadCodec = e2e.PayloadChain(t, "k1", "k1")
				c.PayloadBlobs, c.PayloadOffloadAbove = gocloudblob.New(bucket), 64
			}})
			if n := len(memKeys(t, bucket)); n == 0 {
				t.Error("no payload was offloaded")
			}
		})
	}
}

// TestChaosKilledConnectionsEncoded is TestChaosKilledConnections with
// every payload encrypted and every one above 64 bytes offloaded, its
// values above 64 bytes each in a blob of its own: a session killed in a
// commit, or in a claim, loses no blob a committed row refers to, and
// the checker reads every run through the codec and the blobs.
func TestChaosKilledConnectionsEncoded(t *testing.T) {
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	runKilledConnections(t, killedConnections{fault: "pg_terminate_backend_encoded", tag: "kce", encoded: true, mod: func(c *heph.Config) {
		c.PayloadCodec = e2e.PayloadChain(t, "k1", "k1")
		c.PayloadBlobs, c.PayloadOffloadAbove = gocloudblob.New(bucket), 64
	}})
	if n := len(memKeys(t, bucket)); n == 0 {
		t.Error("no payload was offloaded")
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
