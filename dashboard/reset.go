package dashboard

import "github.com/hephaestus-go/hephaestus/hephtype"

// resetAction is Reset to step… for a flow, document or job run that is
// not cancelled and has a step that ran: the dialog asks for the step,
// offering those that ran. The run runs again from it; the steps that are
// not after it keep their outputs.
func (d *runData) resetAction(base string) (runAction, bool) {
	if d.IsWorkflow() || d.Run.Status == string(hephtype.StatusCancelled) {
		return runAction{}, false
	}
	var ran []string
	for _, st := range d.Run.Steps {
		if st.Status != string(hephtype.StepPending) {
			ran = append(ran, st.Name)
		}
	}
	if len(ran) == 0 {
		return runAction{}, false
	}
	return runAction{ID: "action-reset", Label: "Reset to step…", API: base + "/reset", Title: "Reset the run to a step", Class: "danger",
		Confirm: "Run " + d.Run.ID + " again from a step? That step and every step after it run again (those running now are stopped " +
			"and their outputs cleared); the other steps keep their outputs.",
		Fields: jsonAttr([]field{{Name: "step", Label: "Step", Type: "text", Required: true, Options: ran, Placeholder: ran[0]}})}, true
}
