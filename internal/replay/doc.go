// Package replay is the deterministic core of code-first workflows: it
// runs a workflow function over the run's history, replaying what was
// decided before and deciding what comes next. Like internal/engine it
// does no I/O and reads no clock; the runtime feeds it events and executes
// the commands it returns.
//
// # History
//
// A run's history is a list of Events written by two parties:
//
//	run_started                      runtime, at start: workflow, input, seed, time
//	step_completed / step_failed     runtime: an activity's final outcome (ID = its command)
//	timer_fired                      runtime (ID = the timer's command)
//	signal_received                  runtime: name and payload
//	child_completed / child_failed   runtime (ID = the child's command)
//	decision                         activation: opens its output; carries the activation time
//	step_scheduled, timer_started, timer_cancelled, marker, update_accepted,
//	update_completed, child_started, child_cancelled,
//	run_completed / run_failed / run_continued
//	                                 activation: one event per command, after its decision
//	step_started, step_retrying      runtime, informational: replay skips them
//
// The runtime appends its events as things happen and then asks for a
// decision (Instance.Decide) with the activation time and any update
// requests. The decision delivers every event not yet delivered, runs the
// workflow until each of its units waits, offers the updates, and returns
// the events to append — a decision event, then the events of its
// commands — and the commands to execute, in one transaction. Rejected
// updates write nothing; if nothing was delivered and nothing accepted,
// nothing is written at all.
//
// On replay, a decision event marks an activation that happened: the
// events the runtime wrote before it are delivered again, in order, at
// the same point, with the same time, and the workflow must issue the
// commands recorded after it, in order. It gets recorded results instead
// of running anything. A command that differs from the recorded one
// (another kind, activity name, timer duration, activity input or queue,
// …), a missing one or an extra one is a *NonDeterminismError that names
// both sides, the lines of workflow code that issued them and what
// changed; the instance is then unusable, nothing is written, and the
// runtime retries later (with fixed code). A step_scheduled entry records
// its call (input hash, queue, call site) in Ref, a timer_started entry
// its call site in Data; histories written before they did replay
// without the input and queue comparisons.
//
// # Scheduling
//
// The workflow function, each parallel branch and each async phase
// handler is a unit: a goroutine that runs only while it holds the baton
// (see sched.go). Units run in rounds in creation order until all wait,
// so the order of commands and their sequence numbers is a function of
// the history alone. Sequence numbers are shared by all units; the
// runtime's events refer to commands by them.
//
// # Sticky execution
//
// An Instance holds a run's units parked where the history left them.
// Keeping it between decisions (feeding it only the events appended
// since, from Len on) avoids replaying the history; closing it evicts it.
// A fresh instance fed the whole history reaches the same state
// (Snapshot); the property tests check it.
//
// Sim is an in-memory stand-in for the runtime, for tests.
package replay
