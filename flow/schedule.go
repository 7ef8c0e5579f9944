package flow

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/cronspec"
)

// Schedule is a schedule declared on a flow (Builder.Schedule).
type Schedule = hephtype.ScheduleDecl

// Schedule declares a schedule that starts runs of the flow: the client
// creates or updates it when the flow is registered (the code owns its
// timing and input; a pause made at run time stays). Build reports a
// schedule without an id, with no timing or a bad one, or an unknown
// overlap policy. See docs/schedules.md.
func (b *Builder) Schedule(s Schedule) *Builder {
	if err := checkSchedule(&s); err != nil {
		b.errs = append(b.errs, &ValidationError{Flow: b.name, Rule: RuleInvalidOption, Message: err.Error()})
		return b
	}
	if slices.ContainsFunc(b.schedules, func(o Schedule) bool { return o.ID == s.ID }) {
		b.errs = append(b.errs, &ValidationError{Flow: b.name, Rule: RuleInvalidOption, Message: fmt.Sprintf("schedule %q is declared twice", s.ID)})
		return b
	}
	b.schedules = append(b.schedules, s)
	return b
}

// Schedules returns the schedules declared on the flow.
func (f *Flow) Schedules() []Schedule { return slices.Clone(f.schedules) }

// checkSchedule reports what is wrong with a declared schedule, naming
// the field: no id, no timing or a bad one, an unknown overlap policy, a
// negative jitter.
func checkSchedule(s *Schedule) error {
	if strings.TrimSpace(s.ID) == "" {
		return errors.New("schedule: the id is empty")
	}
	if _, err := cronspec.Parse(cronspec.Timing{Cron: s.Cron, Every: s.Every, TimeZone: s.TimeZone}); err != nil {
		return fmt.Errorf("schedule %q: %w", s.ID, err)
	}
	if s.Jitter < 0 {
		return fmt.Errorf("schedule %q: jitter %v is negative", s.ID, s.Jitter)
	}
	if s.Overlap != "" && !slices.Contains(hephtype.OverlapPolicies, s.Overlap) {
		return fmt.Errorf("schedule %q: overlap policy %q is unknown; use one of %s", s.ID, s.Overlap, strings.Join(hephtype.OverlapPolicies, ", "))
	}
	return nil
}
