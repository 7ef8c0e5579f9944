package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Errors of version rules and version states.
var (
	// ErrVersionRuleNotFound: the definition has no version rule.
	ErrVersionRuleNotFound = errors.New("version rule not found")
	// ErrVersionRetired: a version is retired or deleted, so no new run
	// may start on it and no rule may name it.
	ErrVersionRetired = errors.New("version retired")
	// ErrVersionPolicyChanged: a create carried NewRun.VersionGen, and a
	// version rule or state changed since that generation was read; the
	// run was not created. Read the policy again and choose again.
	ErrVersionPolicyChanged = errors.New("version policy changed")
)

// The states of a definition version. A version without a stored state
// is active.
const (
	VersionActive  = "active"
	VersionRetired = "retired"
	VersionDeleted = "deleted"
)

// Versions keeps, per definition name (flows, job kinds and documents
// share the name space of the flow runtime), the version rule that
// chooses the version of a new run, and the states of its versions
// (retired, deleted). The tables (SQLite migration 0015_versions,
// PostgreSQL 0017_versions): version_rules, one row per name;
// definition_versions, one row per name and version whose state was
// changed. PruneRuns touches neither.
//
// Every write to either table (by these methods or otherwise), and every
// document version stored (Documents), advances the store's version
// generation (table version_generation, one row,
// advanced by triggers in the writing transaction: SQLite migration 0028,
// PostgreSQL 0030). VersionPolicy returns it with the policy, read in the
// same snapshot, so that a caller may keep a policy and choose versions
// from it without reading it again: a create with NewRun.VersionGen set
// is refused with ErrVersionPolicyChanged, inside its transaction, when
// the generation is no longer that one. A rule or state change is thereby
// in force for every create whose transaction reads the generation after
// it committed (as it was when each start read the policy itself), and
// so is a new latest document version for a caller that keeps the latest
// version of a document with the policy.
type Versions interface {
	// VersionPolicy returns a name's rule (nil when it has none) and the
	// stored states of its versions, by version, in one read.
	VersionPolicy(ctx context.Context, name string) (*VersionPolicy, error)
	// PutVersionRule creates or replaces a name's rule and returns it as
	// stored. In the same transaction it checks that no version of
	// p.Targets is retired or deleted (ErrVersionRetired, naming it).
	PutVersionRule(ctx context.Context, p *PutVersionRuleParams) (*VersionRule, error)
	// DeleteVersionRule deletes a name's rule, or returns
	// ErrVersionRuleNotFound.
	DeleteVersionRule(ctx context.Context, name string) error
	// SetVersionState records the state of a version (creating or
	// replacing its row) and returns it as stored.
	SetVersionState(ctx context.Context, p *SetVersionStateParams) (*VersionState, error)
	// CountRunsByVersion counts the flow runs (kind flow: flows, jobs and
	// documents) of a name per version: active (pending, running,
	// waiting) and finished, by version.
	CountRunsByVersion(ctx context.Context, name string) ([]*VersionRunCount, error)
}

// VersionRule is a stored version rule: Rule is its JSON (the root
// package's VersionRule; opaque to the store).
type VersionRule struct {
	Name      string
	Rule      json.RawMessage
	UpdatedAt time.Time
	UpdatedBy string
}

// VersionState is the stored state of one version of a name.
type VersionState struct {
	Name      string
	Version   int
	State     string
	ChangedAt time.Time
	ChangedBy string
}

// VersionPolicy is what a start reads: the rule (nil without one) and
// the stored states.
type VersionPolicy struct {
	Rule   *VersionRule
	States []*VersionState
	// Gen is the store's version generation when the policy was read
	// (positive): see Versions.
	Gen int64
}

// State returns the state of a version: active when none is stored.
func (p *VersionPolicy) State(version int) string {
	for _, s := range p.States {
		if s.Version == version {
			return s.State
		}
	}
	return VersionActive
}

// VersionRunCount is the number of runs of one version.
type VersionRunCount struct {
	Version  int
	Active   int
	Finished int
}

// PutVersionRuleParams are the parameters of PutVersionRule.
type PutVersionRuleParams struct {
	Name string
	// Rule is the rule's JSON (an object).
	Rule json.RawMessage
	// Targets are the versions the rule can choose: none may be retired.
	Targets []int
	At      time.Time
	By      string
}

// Check validates the parameters (errors wrap hephtype.ErrInvalidInput).
func (p *PutVersionRuleParams) Check() error {
	if err := checkVersionName(p.Name); err != nil {
		return err
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(p.Rule, &obj) != nil {
		return fmt.Errorf("%w: the version rule of %q is not a JSON object", hephtype.ErrInvalidInput, p.Name)
	}
	if p.At.IsZero() {
		return fmt.Errorf("%w: version rule of %q: At is zero", hephtype.ErrInvalidInput, p.Name)
	}
	return nil
}

// SetVersionStateParams are the parameters of SetVersionState.
type SetVersionStateParams struct {
	Name    string
	Version int
	// State is VersionActive, VersionRetired or VersionDeleted.
	State string
	At    time.Time
	By    string
}

// Check validates the parameters (errors wrap hephtype.ErrInvalidInput).
func (p *SetVersionStateParams) Check() error {
	if err := checkVersionName(p.Name); err != nil {
		return err
	}
	switch {
	case p.Version < 1:
		return fmt.Errorf("%w: %q version %d: versions count from 1", hephtype.ErrInvalidInput, p.Name, p.Version)
	case p.State != VersionActive && p.State != VersionRetired && p.State != VersionDeleted:
		return fmt.Errorf("%w: %q version %d: state %q is not %q, %q or %q", hephtype.ErrInvalidInput, p.Name, p.Version, p.State, VersionActive, VersionRetired, VersionDeleted)
	case p.At.IsZero():
		return fmt.Errorf("%w: %q version %d: At is zero", hephtype.ErrInvalidInput, p.Name, p.Version)
	}
	return nil
}

func checkVersionName(name string) error {
	if name == "" || len(name) > hephtype.MaxNameLen {
		return fmt.Errorf("%w: a definition name is 1 to %d bytes long", hephtype.ErrInvalidInput, hephtype.MaxNameLen)
	}
	return nil
}
