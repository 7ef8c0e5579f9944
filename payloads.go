package hephaestus

import (
	"context"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/internal/payloadstore"
	"github.com/hephaestus-go/hephaestus/store"
)

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
	chain := c.cfg.PayloadCodec
	if chain == nil {
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
			res, err := rw.RewritePayloads(ctx, &store.RewritePayloadsParams{Table: table, After: after, Rewrite: chain.Reencode})
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
