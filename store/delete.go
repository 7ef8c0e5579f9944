package store

import (
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// ErrRunActive: DeleteRun without Force was asked to delete a run that is
// pending, running or waiting, or a finished run that still has tasks
// (work it left to do: starting the run that continues it, reporting to
// its parent, cancelling its children).
var ErrRunActive = errors.New("run is active")

// DeleteRunParams names the run DeleteRun deletes.
type DeleteRunParams struct {
	// ID is the run's id. Required.
	ID string
	// Force deletes the run even when it is active or has tasks left:
	// its tasks go with it, so that none is claimed again and no holder
	// of one can commit (its fence finds the task gone).
	Force bool
}

// DeletedRun is what DeleteRun deleted.
type DeletedRun struct {
	ID       string
	Workflow string
	Kind     hephtype.RunKind
	// Status is the run's status when it was deleted.
	Status hephtype.RunStatus
	// Tasks is the number of tasks deleted with it (0 unless Force).
	Tasks int
}

// Check reports what makes p unfit.
func (p *DeleteRunParams) Check() error {
	if p.ID == "" {
		return fmt.Errorf("%w: the run id is empty", hephtype.ErrInvalidInput)
	}
	return nil
}

// RunActiveError is the ErrRunActive refusal of DeleteRun for the run d
// describes (what it would have deleted).
func RunActiveError(d *DeletedRun) error {
	if d.Status.Active() {
		return fmt.Errorf("delete run %s: %w: it is %s", d.ID, ErrRunActive, d.Status)
	}
	return fmt.Errorf("delete run %s: %w: it is %s with %d task(s) of work left", d.ID, ErrRunActive, d.Status, d.Tasks)
}
