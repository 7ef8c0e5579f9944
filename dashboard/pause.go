package dashboard

// pauseActions are Pause and Pause, cancelling what runs, for an active
// run that is not paused; Unpause for a paused one.
func (d *runData) pauseActions(base string) []runAction {
	if c := d.Run.Condition; c != nil && c.Kind == "paused" {
		return []runAction{{ID: "action-unpause", Label: "Unpause", API: base + "/unpause", Title: "Unpause the run", Class: "primary",
			Confirm: "Unpause run " + d.Run.ID + "? Its tasks are claimed again: timers that came due fire, and the signals and updates it received are handled."}}
	}
	return []runAction{
		{ID: "action-pause", Label: "Pause", API: base + "/pause", Title: "Pause the run",
			Confirm: "Pause run " + d.Run.ID + "? None of its tasks is claimed until it is unpaused; running steps finish and keep their results."},
		{ID: "action-pause-cancel", Label: "Pause, cancel running", API: base + "/pause", Title: "Pause the run and stop its running steps", Class: "danger",
			Body:    jsonAttr(map[string]bool{"cancel_running": true}),
			Confirm: "Pause run " + d.Run.ID + " and stop its running steps? They run again after unpause; nothing else of the run is claimed until then."},
	}
}
