package hephtype

import "time"

// ScheduleDecl is a schedule declared with a definition: on a flow
// (flow.Builder.Schedule), a workflow (workflow.Definition.Schedule), a
// job kind, or in a flow document's "schedules" list. The runtime
// creates or updates it when the definition is registered, with the
// definition as its target (see docs/schedules.md).
type ScheduleDecl struct {
	// ID names the schedule. Required.
	ID string
	// Cron is a cron expression (5 or 6 fields, or a descriptor such as
	// @hourly); Every a fixed interval. A schedule has one of them.
	Cron  string
	Every time.Duration
	// TimeZone is the IANA zone Cron is read in ("" for UTC).
	TimeZone string
	// Jitter delays each tick's run by up to this much.
	Jitter time.Duration
	// Overlap is what a tick does while the schedule's previous run is
	// active: "skip" (the default, ""), "buffer_one", "allow_all" or
	// "cancel_previous".
	Overlap string
	// Input is the input of every run (encoded as JSON), or nil.
	Input any
}

// OverlapPolicies are the values of ScheduleDecl.Overlap (and of the
// root package's OverlapPolicy).
var OverlapPolicies = []string{"skip", "buffer_one", "allow_all", "cancel_previous"}
