package dashboard

// resetActions are, for a code-first workflow run, Retry (a failed run:
// a reset to its last good point) and Reset… to a point, with or without
// the signals received after it; each goes to the new run.
func (d *runData) resetActions(base string) []runAction {
	if !d.IsWorkflow() || d.Run.ParentID != "" || d.Run.ResetTo != "" {
		return nil // a child is reset with its parent; a reset run has its successor
	}
	point := field{Name: "point", Label: "Point: first, last_good or a decision number", Type: "text", Placeholder: "last_good",
		Options: []string{"last_good", "first"}}
	reason := field{Name: "reason", Label: "Reason", Type: "text"}
	var out []runAction
	if d.Run.Status == "failed" {
		out = append(out, runAction{ID: "action-retry-workflow", Label: "Retry", API: base + "/retry", Title: "Retry the workflow run",
			Then:    "goto:/runs/{id}",
			Confirm: "Retry workflow run " + d.Run.ID + "? A new run carries it on from its last good decision with the current code; the signals it received after that point are applied again."})
	}
	return append(out,
		runAction{ID: "action-reset-workflow", Label: "Reset…", API: base + "/reset-workflow", Title: "Reset the workflow run to a point of its history",
			Then:    "goto:/runs/{id}",
			Confirm: "Reset workflow run " + d.Run.ID + "? A new run replays its history up to the point and continues with the current code; this run is marked reset (cancelled if it is active).",
			Fields:  jsonAttr([]field{point, reason})},
		runAction{ID: "action-reset-workflow-signals", Label: "Reset, re-apply signals…", API: base + "/reset-workflow", Title: "Reset the workflow run and apply its later signals again",
			Then:    "goto:/runs/{id}",
			Body:    jsonAttr(map[string]bool{"reapply_signals": true}),
			Confirm: "Reset workflow run " + d.Run.ID + " and append the signals it received after the point to the new run? This run is marked reset (cancelled if it is active).",
			Fields:  jsonAttr([]field{point, reason})})
}
