package hephaestus

import (
	"context"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/internal/payloadstore"
	"github.com/hephaestus-go/hephaestus/store"
)

// BlobSweep is what SweepPayloadBlobs did.
type BlobSweep struct {
	// Blobs in the store, Old ones (older than Config.PayloadBlobGrace),
	// and Deleted ones (old and referred to by no row), of Bytes in all.
	Blobs   int   `json:"blobs"`
	Old     int   `json:"old"`
	Deleted int   `json:"deleted"`
	Bytes   int64 `json:"bytes"`
}

// SweepPayloadBlobs deletes the blobs of Config.PayloadBlobs that no
// stored payload refers to and that are older than
// Config.PayloadBlobGrace: those of runs that retention or DeleteRuns
// deleted, and those written by a commit that never happened (a process
// killed between a blob's write and its commit). A started client sweeps
// every Config.PayloadBlobSweepInterval; this runs one sweep now. It
// reads every payload of the store once (when some blob is old enough).
func (c *Client) SweepPayloadBlobs(ctx context.Context) (*BlobSweep, error) {
	if c.cfg.PayloadBlobs == nil {
		return nil, errors.New("sweep payload blobs: Config.PayloadBlobs is nil")
	}
	rw, ok := payloadstore.Unwrap(c.cfg.Store).(store.PayloadRewriter)
	if !ok {
		return nil, fmt.Errorf("sweep payload blobs: the store (%T) cannot list its payloads", payloadstore.Unwrap(c.cfg.Store))
	}
	st := c.cfg.Store
	off := payloadstore.OffloadOf(st)
	if off == nil {
		off = &payloadstore.Offload{Bucket: c.cfg.PayloadBlobs}
		st = payloadstore.WrapOffload(st, payloadstore.Chain(st), off)
	}
	res, err := off.Sweep(ctx, c.cfg.PayloadBlobGrace, payloadstore.Referenced(rw, st))
	if res == nil {
		return nil, err
	}
	return &BlobSweep{Blobs: res.Blobs, Old: res.Old, Deleted: res.Deleted, Bytes: res.Bytes}, err
}

// sweepBlobs is the maintenance service's sweep (nil without a blob
// store).
func (c *Client) sweepBlobs() func(ctx context.Context) error {
	if c.cfg.PayloadBlobs == nil {
		return nil
	}
	return func(ctx context.Context) error {
		_, err := c.SweepPayloadBlobs(ctx)
		return err
	}
}

// ReencodedTable is what ReencodePayloads did to one table of payloads.
type ReencodedTable struct {
	// Table is one of store.PayloadTables.
	Table string `json:"table"`
	// Rows read; payloads Changed (written as the codec writes them now);
	// payloads Skipped (written meanwhile by a commit, which wrote them
	// with the current codec: left as they are).
	Rows    int `json:"rows"`
	Changed int `json:"changed"`
	Skipped int `json:"skipped"`
}

// ReencodePayloads rewrites every payload stored (every table of
// store.PayloadTables) as Config.PayloadCodec writes payloads now: after
// a key rotation, payloads under an old key are decrypted with it and
// encrypted with the write key; plain payloads are encrypted; payloads
// already under the write key are left as they are (and not decrypted).
// A chain without a write key decrypts every payload it can (turning
// encryption off). Each payload is written back only if it is still what
// was read, so runs may go on meanwhile. It walks the tables in batches
// of 500 rows, one transaction each, and may be run again after an
// interruption: the payloads done are left as they are. Once it returns
// without error, the old keys may be dropped (docs/payloads.md).
func (c *Client) ReencodePayloads(ctx context.Context) ([]ReencodedTable, error) {
	if c.cfg.PayloadCodec == nil {
		return nil, errors.New("reencode payloads: Config.PayloadCodec is nil: there is no codec to write payloads with")
	}
	rw, ok := payloadstore.Unwrap(c.cfg.Store).(store.PayloadRewriter)
	if !ok {
		return nil, fmt.Errorf("reencode payloads: the store (%T) cannot rewrite payloads", payloadstore.Unwrap(c.cfg.Store))
	}
	var out []ReencodedTable
	for _, table := range store.PayloadTables {
		done := ReencodedTable{Table: table}
		after := ""
		for {
			res, err := rw.RewritePayloads(ctx, &store.RewritePayloadsParams{Table: table, After: after, Rewrite: payloadstore.Reencoder(c.cfg.Store)})
			if err != nil {
				return append(out, done), fmt.Errorf("reencode payloads: %w", err)
			}
			done.Rows, done.Changed, done.Skipped = done.Rows+res.Rows, done.Changed+res.Changed, done.Skipped+res.Skipped
			if after = res.Next; after == "" {
				break
			}
		}
		out = append(out, done)
	}
	return out, nil
}
