package hephaestus

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/hephaestus-go/hephaestus/store"
)

// A remote task's token names one claim of one task: the task's id and
// the claim token the store gave it (the fence), the run, when the claim
// was made, the attempt's deadline and the lease the worker asked for. It
// is opaque to workers: base64url (no padding) of a versioned binary
// record. Holding it grants nothing the fence does not check: a change
// made with it is applied only while the task still has that claim token,
// so a forged or stale token changes nothing.
type remoteToken struct {
	lease     store.Lease
	runID     string
	claimedAt time.Time
	deadline  time.Time
	leaseFor  time.Duration
}

const tokenVersion = 1

func (k *remoteToken) encode() string {
	b := make([]byte, 0, 48+len(k.runID))
	b = append(b, tokenVersion)
	b = binary.AppendVarint(b, k.lease.TaskID)
	b = binary.AppendVarint(b, k.lease.Token)
	b = binary.AppendVarint(b, k.claimedAt.UnixMicro())
	b = binary.AppendVarint(b, k.deadline.Sub(k.claimedAt).Microseconds())
	b = binary.AppendVarint(b, k.leaseFor.Microseconds())
	b = append(b, k.runID...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeToken reads a token; anything that is not one is ErrInvalidToken.
func decodeToken(s string) (*remoteToken, error) {
	bad := func(why string) error { return fmt.Errorf("%w: %s", ErrInvalidToken, why) }
	if s == "" {
		return nil, bad("the token is empty")
	}
	if len(s) > 1024 {
		return nil, bad("the token is too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad("not base64url")
	}
	if len(b) == 0 || b[0] != tokenVersion {
		return nil, bad("unknown token version")
	}
	b = b[1:]
	var vals [5]int64
	for i := range vals {
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, bad("truncated")
		}
		vals[i], b = v, b[n:]
	}
	if vals[0] <= 0 || vals[3] < 0 || vals[4] <= 0 || len(b) == 0 || !utf8.Valid(b) {
		return nil, bad("malformed")
	}
	claimed := time.UnixMicro(vals[2]).UTC()
	return &remoteToken{
		lease: store.Lease{TaskID: vals[0], Token: vals[1]}, runID: string(b), claimedAt: claimed,
		deadline: claimed.Add(time.Duration(vals[3]) * time.Microsecond), leaseFor: time.Duration(vals[4]) * time.Microsecond,
	}, nil
}

// errTokenLost is ErrTaskLost for a token's task.
func errTokenLost(k *remoteToken, why string) error {
	if why == "" {
		return fmt.Errorf("task %d of run %s: %w", k.lease.TaskID, k.runID, ErrTaskLost)
	}
	return fmt.Errorf("task %d of run %s: %w: %s", k.lease.TaskID, k.runID, ErrTaskLost, why)
}
