package workflow

import "github.com/hephaestus-go/hephaestus/hephtype"

// Schedule is a schedule declared on a workflow (Definition.Schedule).
type Schedule = hephtype.ScheduleDecl

// Schedule declares a schedule that starts runs of the workflow, with
// s.Input as their input: RegisterWorkflows creates or updates it (the
// code owns its timing and input; a pause made at run time stays), and
// reports a bad one with ErrInvalidInput naming the field. See
// docs/schedules.md. It returns d.
func (d *Definition[In, Out]) Schedule(s Schedule) *Definition[In, Out] {
	d.schedules = append(d.schedules, s)
	return d
}

// Schedules returns the schedules declared on the workflow.
func (d *Definition[In, Out]) Schedules() []Schedule {
	return append([]Schedule(nil), d.schedules...)
}
