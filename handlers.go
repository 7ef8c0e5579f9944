package hephaestus

import (
	"slices"
	"strconv"
	"strings"
)

// A task's handler (store.Task.Handler) names what a worker must have
// registered to run it; workers claim only the tasks whose handler they
// have, so processes with different code can serve one queue (a rolling
// deploy with two versions of a flow side by side), and a task that no
// worker can run waits, visibly, instead of failing on whoever claims it.
//
//   - the steps and timers of a flow run need its flow and version:
//     "flow:<name>@<version>";
//   - the decision tasks of a workflow run need the workflow:
//     "workflow:<name>";
//   - activity tasks need the activity: "activity:<name>";
//   - workflow timers and operations (starting or cancelling a child,
//     reporting to a parent, continuing as new) need nothing: any worker
//     runs them, handing the decision they cause to a decision task when
//     it lacks the workflow.

func flowHandler(name string, version int) string {
	return "flow:" + name + "@" + strconv.Itoa(version)
}

func workflowHandler(name string) string { return "workflow:" + name }

func activityHandler(name string) string { return "activity:" + name }

// describeHandler says what a handler needs, for people.
func describeHandler(h string) string {
	kind, name, ok := strings.Cut(h, ":")
	if !ok {
		return strconv.Quote(h)
	}
	switch kind {
	case "flow":
		if i := strings.LastIndexByte(name, '@'); i >= 0 {
			return "flow " + strconv.Quote(name[:i]) + " version " + name[i+1:]
		}
	case "workflow", "activity":
		return kind + " " + strconv.Quote(name)
	}
	return strconv.Quote(h)
}

// updateHandlers recomputes what this process can run, after a
// registration.
func (c *Client) updateHandlers() {
	hs := c.flows.handlers()
	hs = append(hs, c.wf.reg.handlers()...)
	slices.Sort(hs)
	c.handlers.Store(&hs)
}

// claimHandlers is the non-nil list of handlers claims ask for.
func (c *Client) claimHandlers() []string {
	if p := c.handlers.Load(); p != nil && *p != nil {
		return *p
	}
	return []string{}
}
