// Package flow defines DAG flows in Go: steps of typed code that emit
// events, joined by edges, validated when the flow is built.
//
// # Steps
//
// A step is a Go function with a JSON-serialisable input and output. Its
// input is the run input, decoded into the function's parameter type:
//
//	charge := flow.Step(b, "charge", func(ctx context.Context, o Order) (Payment, error) { … })
//
// Step emits the event "ok". EventStep lets the code choose the event, or
// wait:
//
//	flow.EventStep(b, "validate", func(ctx context.Context, o Order) (flow.Result[Order], error) {
//		if o.Amount <= 0 {
//			return flow.Emit("invalid", o), nil
//		}
//		return flow.Emit("valid", o), nil
//	}, flow.Events("valid", "invalid"))
//
// A step reads the outputs of the steps before it, typed, through their
// StepRef: charge.Output(ctx) returns a Payment. The step context holds the
// run input and the output of every completed ancestor (every step from
// which a path of edges leads to the step, however many hops back) under
// that step's key (its name, or Key), so parallel branches never overwrite
// each other. Reading a step that does not lead to the reader, or an
// ancestor skipped because its branch was not taken, is a permanent
// *ReadError naming both steps (ErrNotAncestor, ErrSkipped). A step may
// declare the steps it reads with Reads: Build then checks that each is an
// ancestor, and the context holds only those outputs.
//
// Map runs its function once per element of a JSON array — the output of
// its one dependency, or the run input, or of another ancestor (Over), or a
// field of one of these — in
// parallel, each element with its own retries; the output is the array of
// results in input order, and Map's StepRef reads it as []Out.
//
// A step declared with Waits may return Wait: the run then waits until it
// is resumed from outside with one of the step's events and a payload
// (which becomes the step's output), or until the timeout given to Waits
// delivers the event "timeout". Approval gates are waiting steps.
//
// # Edges
//
// Two styles mix freely in one flow:
//
//   - Hephaestus style: Start names the first step, and Edge(from, event,
//     targets...) routes an event to one target or fans out to several;
//     the target Done ends a path.
//   - PgFlow style: DependsOn(steps...) makes a step follow others on their
//     "ok" event; steps that nothing leads to start the run.
//
// A step runs when every incoming edge is resolved and at least one fired.
// An edge whose event was not emitted is dead; a step whose incoming edges
// are all dead is skipped and passes the deadness on (dead-path
// elimination), so branches and joins compose. An edge on the event
// "failed" routes a step that failed after its retries (to compensation,
// say) instead of failing the run.
//
// # Options
//
// Per step: Retry (a RetryPolicy: attempts, exponential backoff with
// jitter, non-retryable errors — or wrap an error with NonRetryable),
// Timeout, Queue, Priority, Key, Waits, Over, Reads. Builder.Defaults sets Retry,
// Timeout, Queue and Priority for every step. The flow itself has a
// Version, a BusinessKey (run ids "key::value", unique among active runs,
// forever, or not at all), Tags and Metadata.
//
// # Validation
//
// Build checks the whole definition and reports every problem at once,
// each a *ValidationError naming the steps at fault and saying how to fix
// it: cycles (with their path), steps unreachable from the start, edges on
// events a step does not declare, declared events without an edge,
// duplicate step names or context keys, dependencies on missing steps, map
// steps over values whose Go type is not an array, Reads of steps that are
// not ancestors, fan-outs whose branches
// never meet in a flow that ends in Done, bad options, and a flow with no
// steps. MustBuild panics instead, for package-level variables.
//
// A built Flow renders as Mermaid or Graphviz DOT text. Package hephtest
// runs flows in memory through the engine's pure decision core; package
// hephaestus runs them durably.
package flow
