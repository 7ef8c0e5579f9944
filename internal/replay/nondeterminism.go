package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// NonDeterminismError is the error hephtype defines, built by nde: the
// replay core reports it, and the runtime passes it on unchanged.
type NonDeterminismError = hephtype.NonDeterminismError

// ndeHint is the Hint of every NonDeterminismError.
const ndeHint = `if the change is intended, guard it with workflow.Patched(ctx, "<change id>") so that runs started before it keep the old path; ` +
	`otherwise replay the history with the old code (hephtest.ReplayHistory) to find the change`

// nde builds a NonDeterminismError of the activation being replayed: the
// recorded entry rec at history position pos (nil and 0 if none), the new
// command cmd (nil if none) and the site that issued it.
func (in *Instance) nde(rec *Event, pos int, cmd Command, site, reason string) *NonDeterminismError {
	e := &NonDeterminismError{Workflow: in.name, RunID: in.cfg.RunID, Decision: in.activation, Entry: pos, CommandAt: site, Reason: reason, Hint: ndeHint}
	if rec != nil {
		e.RecordedKind, e.Recorded, e.RecordedAt = rec.Kind, rec.String(), recordedAt(*rec)
	}
	if cmd != nil {
		e.Command = describe(cmd)
	}
	if rec != nil && cmd != nil {
		e.Changed, e.Old, e.New = difference(*rec, cmd)
	}
	return e
}

// describe says what a command is in the words of the workflow API, with
// the history entry that records it.
func describe(c Command) string {
	switch c := c.(type) {
	case ScheduleActivity:
		return fmt.Sprintf("Execute activity %q (step_scheduled #%d)", c.Name, c.Seq)
	case StartTimer:
		return fmt.Sprintf("workflow.Sleep or phase timeout of %s (timer_started #%d)", c.Duration, c.Seq)
	case CancelTimer:
		return fmt.Sprintf("the cancellation of timer #%d, when its phase ends (timer_cancelled #%d)", c.Seq, c.Seq)
	case RecordMarker:
		if c.Deprecated {
			return fmt.Sprintf("workflow.DeprecatePatch(ctx, %q) (marker #%d)", c.Patch, c.Seq)
		}
		return fmt.Sprintf("workflow.Patched(ctx, %q) (marker #%d)", c.Patch, c.Seq)
	case AcceptUpdate:
		return fmt.Sprintf("accepting update %q id %q (update_accepted #%d)", c.Name, c.UpdateID, c.Seq)
	case CompleteUpdate:
		return fmt.Sprintf("the reply to update %q id %q (update_completed #%d)", c.Name, c.UpdateID, c.Seq)
	case StartChild:
		return fmt.Sprintf("child workflow %q, of StartChild or ExecuteChild (child_started #%d)", c.Workflow, c.Seq)
	case CancelChild:
		return fmt.Sprintf("the cancellation of child workflow %q, when the workflow ends (child_cancelled #%d)", c.Workflow, c.Seq)
	case CompleteWorkflow:
		return "the workflow's return (run_completed)"
	case FailWorkflow:
		return "the workflow's error return (run_failed): " + c.Error
	case ContinueAsNew:
		return "workflow.ContinueAsNew (run_continued)"
	case UpsertAttributes:
		return "workflow.UpsertSearchAttributes (search_attributes_upserted)"
	}
	return c.String()
}

// callRecord is how a step_scheduled or child_started entry records its
// call, in its Ref (the row's step column), as JSON: where the code issued
// it and, for an activity, the hash of its input and its queue. Replay
// compares an activity's input hash and queue with the recorded ones; an
// entry without a call record (written before there was one) is not
// compared.
type callRecord struct {
	// Input is inputHash of the activity's input.
	Input string `json:"input,omitempty"`
	// Queue is the queue the code asked for; empty means the run's.
	Queue string `json:"queue,omitempty"`
	// At is "dir/file.go:line" of the workflow code.
	At string `json:"at,omitempty"`
}

func (r callRecord) encode() string { return string(mustJSON(r)) }

// decodeCall reads the call record of a step_scheduled entry; ok is false
// when it has none.
func decodeCall(ref string) (r callRecord, ok bool) {
	if !strings.HasPrefix(ref, "{") {
		return r, false
	}
	if err := json.Unmarshal([]byte(ref), &r); err != nil {
		return callRecord{}, false
	}
	return r, true
}

// inputHash identifies an input: the first 8 bytes of the SHA-256 of its
// canonical JSON (object keys sorted, no insignificant space, numbers as
// written), in hex. JSON that does not parse is hashed as it is.
func inputHash(raw json.RawMessage) string {
	canon := canonicalJSON(raw)
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:8])
}

func canonicalJSON(raw json.RawMessage) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("null")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}

// shortSite shortens a file path to its last directory and file name, the
// form the history records.
func shortSite(file string, line int) string {
	if file == "" {
		return ""
	}
	dir, name := path.Split(file)
	if d := path.Base(strings.TrimSuffix(dir, "/")); d != "." && d != "/" && d != "" {
		name = d + "/" + name
	}
	return name + ":" + strconv.Itoa(line)
}

// site returns "file:line" of the workflow code running now, or "".
func site() string {
	file, line := callSite()
	if file == "" {
		return ""
	}
	return file + ":" + strconv.Itoa(line)
}

// recordSite returns where the workflow code issues a command, for the
// history ("dir/file.go:line"): empty on replay, where the history already
// has it. It is callSite, with what it makes of each return address
// cached: resolving frames is most of its cost, and a workflow issues its
// commands from a few lines.
func (in *Instance) recordSite() string {
	if in.replaying {
		return ""
	}
	var pcs [32]uintptr
	n := runtime.Callers(2, pcs[:])
	for _, pc := range pcs[:n] {
		v, ok := siteCache.Load(pc)
		if !ok {
			v, _ = siteCache.LoadOrStore(pc, resolveSite(pc))
		}
		if s := v.(string); s != "" {
			return s
		}
	}
	return ""
}

// siteCache maps a return address to the short site of the first
// workflow-code frame among its (inlined) frames, or "" when they are all
// the library's.
var siteCache sync.Map

func resolveSite(pc uintptr) string {
	frames := runtime.CallersFrames([]uintptr{pc})
	for {
		f, more := frames.Next()
		if !isLibrary(f.Function) && f.File != "" {
			return shortSite(f.File, f.Line)
		}
		if !more {
			return ""
		}
	}
}

// recordedAt returns where the code issued a recorded command, when the
// history knows it.
func recordedAt(e Event) string {
	switch e.Kind {
	case hephtype.EventStepScheduled, hephtype.EventChildStarted:
		if r, ok := decodeCall(e.Ref); ok {
			return r.At
		}
	case hephtype.EventTimerStarted:
		if t, err := decodeTimer(e.Data); err == nil {
			return t.At
		}
	}
	return ""
}

// difference compares a recorded command rec with a new command cmd: when
// they are of the same kind it names what changed and its values in the
// history and in the code, or returns "" when nothing that replay checks
// changed. The input and queue of an activity are compared only when the
// history recorded them.
func difference(rec Event, cmd Command) (what, old, new string) {
	if c, ok := cmd.(ScheduleActivity); ok {
		if rec.Kind != hephtype.EventStepScheduled {
			return "", "", ""
		}
		if rec.Name != c.Name {
			return "activity name", strconv.Quote(rec.Name), strconv.Quote(c.Name)
		}
		r, ok := decodeCall(rec.Ref)
		if !ok || r.Input == "" {
			return "", "", ""
		}
		// The recorded hash is that of the recorded input, which the
		// store keeps as it was written: the same bytes need no hash.
		if !bytes.Equal(rec.Data, c.Input) {
			if h := inputHash(c.Input); h != r.Input {
				return "input", "sha256:" + r.Input, "sha256:" + h
			}
		}
		if r.Queue != c.Options.Queue {
			return "queue", queueName(r.Queue), queueName(c.Options.Queue)
		}
		return "", "", ""
	}
	ev := cmd.Event()
	if rec.Kind != ev.Kind {
		return "", "", ""
	}
	switch ev.Kind {
	case hephtype.EventChildStarted:
		if rec.Name != ev.Name {
			return "child workflow", strconv.Quote(rec.Name), strconv.Quote(ev.Name)
		}
	case hephtype.EventMarker:
		if rec.Name != ev.Name {
			return "patch id", strconv.Quote(rec.Name), strconv.Quote(ev.Name)
		}
	case hephtype.EventTimerStarted:
		a, err1 := decodeTimer(rec.Data)
		b, err2 := decodeTimer(ev.Data)
		if err1 == nil && err2 == nil && a.Duration != b.Duration {
			return "timer duration", a.Duration.String(), b.Duration.String()
		}
	case hephtype.EventUpdateAccepted:
		if rec.Name != ev.Name {
			return "update name", strconv.Quote(rec.Name), strconv.Quote(ev.Name)
		}
	}
	return "", "", ""
}

func queueName(q string) string {
	if q == "" {
		return "the run's queue"
	}
	return "queue " + strconv.Quote(q)
}

// matchEvent is cmd.Event() without what matching does not read: the call
// record of an activity, whose input hash costs a canonical encoding.
func matchEvent(cmd Command) Event {
	if c, ok := cmd.(ScheduleActivity); ok {
		return Event{Kind: hephtype.EventStepScheduled, ID: c.Seq, Name: c.Name, Data: c.Input}
	}
	return cmd.Event()
}
