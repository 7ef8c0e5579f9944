package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// RunOf returns the run that a create of n makes at now, with its
// defaults (status pending; with a business id, key scope active), or
// why a store refuses it: the errors name the run and what is wrong.
// Both stores create runs with it.
func RunOf(n *NewRun, now time.Time) (*Run, error) {
	if n.ID == "" {
		return nil, errors.New("create run: id is empty")
	}
	r := &Run{
		ID: n.ID, Workflow: n.Workflow, Version: n.Version, Kind: n.Kind, Status: n.Status,
		Input: orNil(n.Input), Output: orNil(n.Output), Error: n.Error, BusinessID: n.BusinessID,
		KeyScope: n.KeyScope, ParentID: n.ParentID, State: orNil(n.State), ConcurrencyKey: n.ConcurrencyKey,
		TraceContext: n.TraceContext, BuildID: n.BuildID, Deadline: n.Deadline, Seq: int64(len(n.History)), CreatedAt: now, UpdatedAt: now,
	}
	if len(n.Tags) > 0 {
		r.Tags = n.Tags
	}
	if len(n.Metadata) > 0 {
		r.Metadata = n.Metadata
	}
	if err := CheckAttrs(n.SearchAttributes); err != nil {
		return nil, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	r.SearchAttributes = NormAttrs(n.SearchAttributes)
	if r.Status == "" {
		r.Status = hephtype.StatusPending
	}
	if !r.Status.Valid() {
		return nil, fmt.Errorf("create run %s: unknown status %q", r.ID, r.Status)
	}
	if err := CheckConcurrencyKey(r.ConcurrencyKey); err != nil {
		return nil, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if err := CheckTraceContext(r.TraceContext); err != nil {
		return nil, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if err := CheckLabels(r.Tags, r.Metadata); err != nil {
		return nil, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if r.BusinessID != "" && r.KeyScope == "" {
		r.KeyScope = businesskey.ScopeActive
	}
	if r.KeyScope != "" && !r.KeyScope.Valid() {
		return nil, fmt.Errorf("create run %s: unknown key scope %q", r.ID, r.KeyScope)
	}
	if r.Status.Terminal() {
		r.FinishedAt = now
	}
	if !r.Deadline.IsZero() {
		r.Deadline = time.UnixMicro(r.Deadline.UnixMicro()).UTC() // as stored
	}
	if err := CheckBuildID(r.BuildID); err != nil {
		return nil, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if err := CheckTasks(n.Tasks); err != nil {
		return nil, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return r, nil
}
