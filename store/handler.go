package store

import (
	"fmt"
	"strconv"
	"strings"
)

// A task's handler (Task.Handler) names what a worker must have registered
// to run it; workers claim only the tasks whose handler they have, so
// processes with different code can serve one queue (a rolling deploy with
// two versions of a flow side by side), and a task that no worker can run
// waits, visibly, instead of failing on whoever claims it.
//
//   - the steps and timers of a flow run need its flow and version:
//     "flow:<name>@<version>" (FlowHandler);
//   - the decision tasks of a workflow run need the workflow:
//     "workflow:<name>" (WorkflowHandler), or, for a run pinned to a
//     build, the workflow in that build: "workflow:<name>@<build>"
//     (WorkflowBuildHandler);
//   - activity tasks need the activity: "activity:<name>"
//     (ActivityHandler);
//   - the steps of a flow that a worker outside the process runs (a
//     remote step, a document's remote action) need that worker's
//     action: "action:<name>" (ActionHandler); the flow's other tasks
//     keep the flow's handler;
//   - workflow timers and operations (starting or cancelling a child,
//     reporting to a parent, continuing as new) need nothing: any worker
//     runs them, handing the decision they cause to a decision task when
//     it lacks the workflow.

// FlowHandler is the handler of the tasks of a flow version.
func FlowHandler(name string, version int) string {
	return "flow:" + name + "@" + strconv.Itoa(version)
}

// WorkflowHandler is the handler of a workflow's decision tasks.
func WorkflowHandler(name string) string { return "workflow:" + name }

// WorkflowBuildHandler is the handler of the decision tasks of a run of
// a workflow pinned to a build: only workers of that build have it.
func WorkflowBuildHandler(name, build string) string { return "workflow:" + name + "@" + build }

// ActivityHandler is the handler of an activity's tasks.
func ActivityHandler(name string) string { return "activity:" + name }

// ActionHandler is the handler of the steps that workers outside the
// process run for the action name (flow.Remote, flowdoc.RemoteAction).
func ActionHandler(name string) string { return "action:" + name }

// DescribeHandler says what a handler needs, for people.
func DescribeHandler(h string) string {
	kind, name, ok := strings.Cut(h, ":")
	if !ok {
		return strconv.Quote(h)
	}
	switch kind {
	case "flow":
		if i := strings.LastIndexByte(name, '@'); i >= 0 {
			return "flow " + strconv.Quote(name[:i]) + " version " + name[i+1:]
		}
	case "workflow":
		if i := strings.LastIndexByte(name, '@'); i >= 0 {
			return "workflow " + strconv.Quote(name[:i]) + " build " + name[i+1:]
		}
		return kind + " " + strconv.Quote(name)
	case "activity":
		return kind + " " + strconv.Quote(name)
	case "action":
		return "remote action " + strconv.Quote(name)
	}
	return strconv.Quote(h)
}

// DescribeTask names a task for people: "step \"charge\"", "decision"…
func DescribeTask(t *Task) string {
	switch t.Kind {
	case TaskDecision:
		return "decision"
	case TaskActivity:
		return "activity " + strconv.Quote(t.Step)
	case TaskTimer, TaskWorkflowTimer:
		return "timer"
	case TaskWorkflowOp:
		return "operation " + strconv.Quote(t.Step)
	}
	if t.Index >= 0 {
		return fmt.Sprintf("step %q (element %d)", t.Step, t.Index)
	}
	return "step " + strconv.Quote(t.Step)
}
