package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// Pause records who paused a run and when (Run.Paused). It is stored as
// JSON in the runs table's paused column, NULL while the run is not
// paused; claims skip the tasks of the runs whose column is set.
type Pause struct {
	// By is the principal that paused the run ("" when unknown: a
	// library call that named nobody).
	By string `json:"by,omitempty"`
	// At is when the run was paused.
	At time.Time `json:"at"`
	// CancelRunning records that the tasks leased when the run was paused
	// were released (their holders lose their leases), to run again after
	// unpause.
	CancelRunning bool `json:"cancel_running,omitempty"`
}

// EncodePause is the paused column for p: nil (NULL) when p is nil.
func EncodePause(p *Pause) (*string, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("paused: %w", err)
	}
	s := string(b)
	return &s, nil
}

// DecodePause reads the paused column (nil or empty: not paused).
func DecodePause(b []byte) (*Pause, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var p Pause
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("paused: %w", err)
	}
	p.At = p.At.UTC()
	return &p, nil
}
