package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// messageFlags are heph start's flags that start a workflow with a signal
// or an update.
type messageFlags struct {
	signal, signalInput string
	update, updateInput string
	id, waitFor         string
	updateTimeout       time.Duration
}

func addMessageFlags(fl *pflag.FlagSet) *messageFlags {
	m := &messageFlags{}
	fl.StringVar(&m.signal, "signal", "", "signal-with-start: send this signal to the open run of --workflow-id, starting one first if there is none")
	fl.StringVar(&m.signalInput, "signal-input", "", "the signal's payload: JSON text, @file or -")
	fl.StringVar(&m.update, "update", "", "update-with-start: send this update to the open run of --workflow-id, starting one first if there is none, and print its result")
	fl.StringVar(&m.updateInput, "update-input", "", "the update's arguments: JSON text, @file or -")
	fl.StringVar(&m.id, "message-id", "", "the id of the signal or update: a repeated start with it delivers the message once (default: derived from --idempotency-key)")
	fl.StringVar(&m.waitFor, "update-wait-for", "completed", "wait until the update is accepted or completed")
	fl.DurationVar(&m.updateTimeout, "update-timeout", 0, "how long the server waits for the update (default the server's)")
	return m
}

// set says whether the start carries a message.
func (m *messageFlags) set() bool { return m.signal != "" || m.update != "" }

// check refuses flags that do not go together, before anything is sent.
func (m *messageFlags) check(req *apiclient.StartRequest, wait bool) error {
	switch {
	case m.signal != "" && m.update != "":
		return usagef("--signal and --update do not go together: a start takes one message")
	case !m.set():
		if m.signalInput != "" || m.updateInput != "" || m.id != "" {
			return usagef("--signal-input, --update-input and --message-id need --signal or --update")
		}
		return nil
	case req.Kind != "workflow":
		return usagef("--signal and --update start a code-first workflow: add --kind workflow (the kind is %q)", req.Kind)
	case req.WorkflowID == "":
		return usagef("--signal and --update need --workflow-id: the message goes to the open run of that workflow id, or to the run it starts")
	case m.signal != "" && m.updateInput != "", m.update != "" && m.signalInput != "":
		return usagef("--signal takes --signal-input, --update takes --update-input")
	case m.update != "" && m.waitFor != "accepted" && m.waitFor != "completed":
		return usagef("--update-wait-for must be accepted or completed, got %q", m.waitFor)
	case m.updateTimeout < 0:
		return usagef("--update-timeout must not be negative, got %v", m.updateTimeout)
	case m.update != "" && wait:
		return usagef("--wait goes with --signal, not --update (which prints the update's result)")
	}
	return nil
}

// startWithMessage runs heph start with --signal or --update.
func startWithMessage(ctx context.Context, g *globals, api *apiclient.Client, req *apiclient.StartRequest, idem string, m *messageFlags, wait bool) error {
	reqWait := time.Duration(0)
	if m.signal != "" {
		p, err := readPayload(g.env, "--signal-input", m.signalInput)
		if err != nil {
			return err
		}
		req.Signal = &apiclient.SignalStart{Name: m.signal, Payload: p, ID: m.id}
	} else {
		a, err := readPayload(g.env, "--update-input", m.updateInput)
		if err != nil {
			return err
		}
		req.Update = &apiclient.UpdateStart{Name: m.update, Args: a, ID: m.id, WaitFor: m.waitFor}
		if m.updateTimeout > 0 {
			req.Update.Timeout = m.updateTimeout.String()
		}
		reqWait = m.updateTimeout
		if reqWait == 0 {
			reqWait = time.Minute // the server's longest wait
		}
	}
	rctx, cancel := g.reqCtx(ctx, reqWait)
	run, resp, err := api.StartWithMessage(rctx, req, idem)
	cancel()
	if err != nil {
		return startError(ctx, g, api, req, err)
	}
	if wait {
		return awaitResult(ctx, g, api, run.ID, 0)
	}
	return g.emit(resp, func(w io.Writer) error {
		if m.signal != "" {
			_, err := fmt.Fprintf(w, "signal %s sent to run %s: workflow %s id %s, %s\n", m.signal, run.ID, run.Workflow, req.WorkflowID, run.Status)
			return err
		}
		if run.Update == nil || run.Update.Stage == "accepted" {
			_, err := fmt.Fprintf(w, "update %s accepted by run %s: workflow %s id %s\n", m.update, run.ID, run.Workflow, req.WorkflowID)
			return err
		}
		fmt.Fprintf(w, "update %s completed by run %s: workflow %s id %s\n", m.update, run.ID, run.Workflow, req.WorkflowID)
		if compactJSON(run.Update.Result) == "" {
			return nil
		}
		return writeJSON(w, run.Update.Result)
	})
}
