package dashboard

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/server"
)

// The bar kinds of a timeline.
const (
	barWait    = "wait"    // queued: from ready to started
	barRun     = "run"     // an attempt running, or a child run
	barTimer   = "timer"   // a workflow's durable timer
	barWaiting = "waiting" // a step waiting to be resumed from outside
)

// timeline is a gantt chart of a run: a row per step, map element,
// activity, timer, child and waiting step, with a bar per attempt.
type timeline struct {
	Start time.Time // the run's start: the axis's zero
	End   time.Time // the last thing drawn: the run's end, or now
	Rows  []*tlRow
}

// tlRow is a row of a timeline.
type tlRow struct {
	Key   string // the data-step of its bars: "charge_payment", "price_items #1", "charge #2"
	Label string
	Bars  []tlBar
}

// tlBar is one stretch of a row.
type tlBar struct {
	Kind    string // barWait, barRun, barTimer or barWaiting
	Outcome string // completed, failed, retrying, running, cancelled or snoozed
	Attempt int
	From    time.Time
	To      time.Time
	Title   string
}

// tlAttempt is an attempt being read from the history.
type tlAttempt struct {
	n       int
	ready   time.Time // when it was queued: scheduled, expanded, retry ready
	started time.Time
	queued  bool
	running bool
}

// tlBuilder holds timelineOf's walk.
type tlBuilder struct {
	t    *timeline
	rows map[string]*tlRow
	cur  map[string]*tlAttempt // the open attempt of each row
	// pending holds an attempt's bars until its outcome is known.
	pending map[string][]tlBar
	names   map[int]string  // a workflow's command sequence -> row key
	maps    map[string]bool // flow steps that are map steps
	waits   map[string]time.Time
	timers  map[string]time.Time
	end     time.Time
}

// timelineOf reads a run's history into a timeline. Attempts queue from
// their step_scheduled entry (or their map's expansion, or their retry's
// ready time) to their start, and run from the start recorded in
// step_started to their outcome; the backoff between two attempts shows
// as a gap. What has not ended is drawn up to now, or up to the run's
// end when it has finished.
func timelineOf(run *server.Run, events []server.Event, now time.Time) *timeline {
	b := &tlBuilder{t: &timeline{}, rows: map[string]*tlRow{}, cur: map[string]*tlAttempt{}, pending: map[string][]tlBar{},
		names: map[int]string{}, maps: map[string]bool{}, waits: map[string]time.Time{}, timers: map[string]time.Time{}}
	if run != nil {
		b.t.Start = run.CreatedAt
	}
	for _, e := range events {
		if b.t.Start.IsZero() || e.At.Before(b.t.Start) {
			b.t.Start = e.At
		}
		if e.At.After(b.end) {
			b.end = e.At
		}
	}
	finished := run != nil && hephtype.RunStatus(run.Status).Terminal()
	if run != nil && run.FinishedAt != nil && run.FinishedAt.After(b.end) {
		b.end = *run.FinishedAt
	}
	if !finished && now.After(b.end) {
		b.end = now
	}
	if b.t.Start.IsZero() {
		b.t.Start = b.end
	}
	b.t.End = b.end
	for _, e := range events {
		b.read(e)
	}
	b.close(finished)
	return b.t
}

func (b *tlBuilder) row(key, label string) *tlRow {
	r, ok := b.rows[key]
	if !ok {
		r = &tlRow{Key: key, Label: label}
		b.rows[key] = r
		b.t.Rows = append(b.t.Rows, r)
	}
	return r
}

// key names the row of a step entry: the step, a map's element, or a
// workflow's activity "name #seq".
func (b *tlBuilder) key(e server.Event) string {
	if isActivity(e) {
		if k, ok := b.names[e.Index]; ok {
			return k
		}
		return nameOr(e.Name, "activity") + " #" + strconv.Itoa(e.Index)
	}
	if b.maps[e.Step] && hephtype.EventKind(e.Kind) != hephtype.EventStepCompleted && hephtype.EventKind(e.Kind) != hephtype.EventStepFailed &&
		hephtype.EventKind(e.Kind) != hephtype.EventStepCancelled {
		return e.Step + " #" + strconv.Itoa(e.Index)
	}
	return e.Step
}

// read draws what a history entry adds to the timeline.
func (b *tlBuilder) read(e server.Event) {
	switch hephtype.EventKind(e.Kind) {
	case hephtype.EventRunStarted:
		b.row("", "run")
	case hephtype.EventStepScheduled:
		b.stepScheduled(e)
	case hephtype.EventMapExpanded:
		b.mapExpanded(e)
	case hephtype.EventStepStarted:
		b.stepStarted(e)
	case hephtype.EventStepCompleted, hephtype.EventItemCompleted:
		b.endAttempt(b.key(e), e, "completed", e.At)
	case hephtype.EventStepFailed, hephtype.EventItemFailed:
		b.endAttempt(b.key(e), e, "failed", e.At)
	case hephtype.EventStepCancelled:
		b.stepCancelled(e)
	case hephtype.EventStepSnoozed:
		b.stepSnoozed(e)
	case hephtype.EventStepRetrying:
		b.stepRetrying(e)
	case hephtype.EventStepWaiting:
		b.stepWaiting(e)
	case hephtype.EventStepResumed:
		b.stepResumed(e)
	case hephtype.EventTimerStarted:
		b.timerStarted(e)
	case hephtype.EventTimerFired, hephtype.EventTimerCancelled:
		b.timerEnded(e)
	case hephtype.EventChildStarted:
		b.childStarted(e)
	case hephtype.EventChildCompleted:
		b.endAttempt(b.names[e.Index], e, "completed", e.At)
	case hephtype.EventChildFailed:
		b.endAttempt(b.names[e.Index], e, "failed", e.At)
	case hephtype.EventRunCompleted, hephtype.EventRunFailed, hephtype.EventRunCancelled, hephtype.EventRunContinued,
		hephtype.EventRunTimedOut:
		b.runEnded(e)
	}
}

// stepScheduled opens a row's queued attempt.
func (b *tlBuilder) stepScheduled(e server.Event) {
	k := b.key(e)
	if isActivity(e) {
		k = e.Name + " #" + strconv.Itoa(e.Index)
		b.names[e.Index] = k
	}
	b.row(k, k)
	b.cur[k] = &tlAttempt{n: max(e.Attempt, 1), ready: e.At, queued: true}
}

// mapExpanded opens the map step's row and a queued attempt of each
// element.
func (b *tlBuilder) mapExpanded(e server.Event) {
	b.maps[e.Step] = true
	b.row(e.Step, e.Step)
	b.cur[e.Step] = &tlAttempt{n: 1, started: e.At, running: true}
	for i := range e.Index {
		k := e.Step + " #" + strconv.Itoa(i)
		b.row(k, k)
		b.cur[k] = &tlAttempt{n: 1, ready: e.At, queued: true}
	}
}

// stepStarted starts a row's attempt, after a wait bar for the time it
// was queued.
func (b *tlBuilder) stepStarted(e server.Event) {
	k := b.key(e)
	b.row(k, k)
	a := b.cur[k]
	if a == nil || a.n != e.Attempt && e.Attempt > 0 {
		a = &tlAttempt{n: max(e.Attempt, 1)}
		b.cur[k] = a
	}
	start, ok := dataTime(e.Data, "started_at")
	if !ok {
		start = e.At
	}
	if a.queued && !a.ready.IsZero() && start.After(a.ready) {
		b.pending[k] = append(b.pending[k], tlBar{Kind: barWait, Attempt: a.n, From: a.ready, To: start})
	}
	a.queued, a.running, a.started = false, true, start
}

// stepCancelled ends a step's attempt, and a map step's elements with
// it.
func (b *tlBuilder) stepCancelled(e server.Event) {
	k := b.key(e)
	b.endAttempt(k, e, "cancelled", e.At)
	if b.maps[e.Step] { // its elements end with it
		for key, a := range b.cur {
			if strings.HasPrefix(key, e.Step+" #") && a != nil {
				b.endAttempt(key, e, "cancelled", e.At)
			}
		}
	}
}

// stepSnoozed ends a step's attempt and queues the next one for when the
// snooze ends.
func (b *tlBuilder) stepSnoozed(e server.Event) {
	k := b.key(e)
	b.endAttempt(k, e, "snoozed", e.At)
	ready := e.At
	var d string
	if json.Unmarshal(e.Data, &d) == nil {
		if dd, err := time.ParseDuration(d); err == nil {
			ready = e.At.Add(dd)
		}
	}
	b.cur[k] = &tlAttempt{n: max(e.Attempt, 1), ready: ready, queued: true}
}

// stepRetrying ends (or retitles) the failed attempt and queues the next
// one for when its backoff ends.
func (b *tlBuilder) stepRetrying(e server.Event) {
	k := b.key(e)
	if e.Error != "" || b.cur[k] != nil && b.cur[k].running { // a workflow's activity: the failure is on this entry
		b.endAttempt(k, e, "retrying", e.At)
	} else {
		b.retitle(k, "retrying")
	}
	ready := e.At
	if t, ok := dataTime(e.Data, "ready_at"); ok {
		ready = t
	} else if d, ok := backoffOf(e); ok {
		ready = e.At.Add(d)
	}
	b.cur[k] = &tlAttempt{n: e.Attempt, ready: ready, queued: true}
}

// stepWaiting ends a step's attempt and opens its waiting row.
func (b *tlBuilder) stepWaiting(e server.Event) {
	k := b.key(e)
	b.endAttempt(k, e, "completed", e.At)
	b.waits[k] = e.At
	b.row(k+" (waiting)", k+" (waiting)")
}

// stepResumed draws the bar of a waiting step's wait.
func (b *tlBuilder) stepResumed(e server.Event) {
	k := b.key(e)
	if from, ok := b.waits[k]; ok {
		title := fmt.Sprintf("%s waited %s, resumed with %s", k, fmtDur(e.At.Sub(from)), nameOr(e.Name, "an event"))
		if a := dataString(e.Data, "actor"); a != "" {
			title += " by " + a
		}
		b.bar(k+" (waiting)", tlBar{Kind: barWaiting, Outcome: "completed", From: from, To: e.At, Title: title})
		delete(b.waits, k)
	}
}

// timerStarted opens a workflow timer's row; a flow's timer (the
// deadline of a waiting step) shows on its waiting bar.
func (b *tlBuilder) timerStarted(e server.Event) {
	if !isActivity(e) { // the deadline of a flow's waiting step: on its waiting bar
		return
	}
	k := "timer #" + strconv.Itoa(e.Index)
	label := k
	if d, ok := timerDuration(e); ok {
		label = "timer " + fmtDur(d) + " #" + strconv.Itoa(e.Index)
	}
	b.names[e.Index] = k
	b.row(k, label)
	b.timers[k] = e.At
}

// timerEnded draws a workflow timer's bar.
func (b *tlBuilder) timerEnded(e server.Event) {
	if !isActivity(e) {
		return
	}
	k := b.names[e.Index]
	if from, ok := b.timers[k]; ok {
		out, verb := "completed", "fired"
		if hephtype.EventKind(e.Kind) == hephtype.EventTimerCancelled {
			out, verb = "cancelled", "cancelled"
		}
		b.bar(k, tlBar{Kind: barTimer, Outcome: out, From: from, To: e.At, Title: fmt.Sprintf("%s %s after %s", b.rows[k].Label, verb, fmtDur(e.At.Sub(from)))})
		delete(b.timers, k)
	}
}

// childStarted opens a child workflow's row and its running attempt.
func (b *tlBuilder) childStarted(e server.Event) {
	k := "child " + e.Name + " #" + strconv.Itoa(e.Index)
	b.names[e.Index] = k
	b.row(k, k)
	b.cur[k] = &tlAttempt{n: 1, started: e.At, running: true}
}

// runEnded draws the run's bar (and ends a map step that fails with its
// run).
func (b *tlBuilder) runEnded(e server.Event) {
	if e.Kind == string(hephtype.EventRunFailed) && e.Step != "" { // a map step fails with its run
		b.endAttempt(e.Step, e, "failed", e.At)
	}
	out := map[string]string{"run_completed": "completed", "run_failed": "failed", "run_cancelled": "cancelled", "run_continued": "completed", "run_timed_out": "failed"}[e.Kind]
	title := "run " + strings.ReplaceAll(strings.TrimPrefix(e.Kind, "run_"), "_", " ") + " after " + fmtDur(e.At.Sub(b.t.Start))
	if e.Error != "" {
		title += ": " + e.Error
	}
	b.bar("", tlBar{Kind: barRun, Outcome: out, Attempt: 1, From: b.t.Start, To: e.At, Title: title})
}

// endAttempt ends a row's open attempt with an outcome at the time to.
func (b *tlBuilder) endAttempt(k string, e server.Event, outcome string, to time.Time) {
	a := b.cur[k]
	if a == nil {
		return
	}
	delete(b.cur, k)
	if a.queued && to.After(a.ready) { // it never started
		b.pending[k] = append(b.pending[k], tlBar{Kind: barWait, Attempt: a.n, From: a.ready, To: to})
	}
	if a.running && !to.Before(a.started) {
		b.pending[k] = append(b.pending[k], tlBar{Kind: barRun, Attempt: a.n, From: a.started, To: to})
	}
	b.flush(k, a, outcome, e.Error)
}

// flush gives the bars of an attempt their outcome and title.
func (b *tlBuilder) flush(k string, a *tlAttempt, outcome, errText string) {
	bars := b.pending[k]
	delete(b.pending, k)
	var queued, ran time.Duration
	for _, x := range bars {
		if x.Kind == barWait {
			queued += x.To.Sub(x.From)
		} else {
			ran += x.To.Sub(x.From)
		}
	}
	title := k
	if k == "" {
		title = "run"
	}
	if a.n > 0 && !strings.HasPrefix(k, "child ") {
		title += " attempt " + strconv.Itoa(a.n)
	}
	var parts []string
	if queued > 0 {
		parts = append(parts, "queued "+fmtDur(queued))
	}
	if ran > 0 || len(parts) == 0 {
		parts = append(parts, "ran "+fmtDur(ran))
	}
	verb := outcome
	if outcome == "retrying" {
		verb = "failed, retrying"
	}
	parts = append(parts, verb)
	title += ": " + strings.Join(parts, ", ")
	if errText != "" {
		title += ": " + errText
	}
	for _, x := range bars {
		x.Outcome, x.Title = outcome, title
		b.bar(k, x)
	}
}

// retitle marks the last failed attempt of a row as retried.
func (b *tlBuilder) retitle(k, outcome string) {
	r := b.rows[k]
	if r == nil {
		return
	}
	n := 0
	for i := len(r.Bars) - 1; i >= 0; i-- {
		x := &r.Bars[i]
		if x.Outcome != "failed" || n != 0 && x.Attempt != n {
			break
		}
		n = x.Attempt
		x.Outcome = outcome
		x.Title = strings.Replace(x.Title, ", failed", ", failed, retrying", 1)
	}
}

func (b *tlBuilder) bar(k string, x tlBar) {
	r := b.row(k, nameOr(k, "run"))
	if x.To.After(b.end) {
		x.To = b.end
	}
	if x.From.After(x.To) {
		return
	}
	r.Bars = append(r.Bars, x)
}

// close ends what is still open: running up to the end (now), or, for a
// finished run, cancelled at its end.
func (b *tlBuilder) close(finished bool) {
	outcome := "running"
	if finished {
		outcome = "cancelled"
	}
	for _, r := range b.t.Rows {
		k := r.Key
		if a := b.cur[k]; a != nil {
			delete(b.cur, k)
			if a.queued && !a.ready.After(b.end) {
				b.pending[k] = append(b.pending[k], tlBar{Kind: barWait, Attempt: a.n, From: a.ready, To: b.end})
			}
			if a.running {
				b.pending[k] = append(b.pending[k], tlBar{Kind: barRun, Attempt: a.n, From: a.started, To: b.end})
			}
			b.flush(k, a, outcome, "")
		}
		if from, ok := b.waits[k]; ok {
			b.bar(k+" (waiting)", tlBar{Kind: barWaiting, Outcome: outcome, From: from, To: b.end, Title: fmt.Sprintf("%s waiting for %s", k, fmtDur(b.end.Sub(from)))})
		}
		if from, ok := b.timers[k]; ok {
			b.bar(k, tlBar{Kind: barTimer, Outcome: outcome, From: from, To: b.end, Title: fmt.Sprintf("%s started %s ago", r.Label, fmtDur(b.end.Sub(from)))})
		}
	}
	if r := b.rows[""]; r != nil && len(r.Bars) == 0 && !finished {
		b.bar("", tlBar{Kind: barRun, Outcome: "running", Attempt: 1, From: b.t.Start, To: b.end, Title: "run running for " + fmtDur(b.end.Sub(b.t.Start))})
	}
}

// The timeline picture's geometry.
const (
	tlLabelW = 200 // the column of row labels
	tlPlotW  = 720 // the time axis
	tlRowH   = 22
	tlBarH   = 14
	tlAxisH  = 28
	tlMargin = 8
)

// timelineSVG draws a timeline: a row per line with its label, its bars
// as <rect class="bar KIND outcome-OUTCOME" data-step=.. data-attempt=..>
// each with a <title>, under a time axis labelled from the run's start.
func timelineSVG(t *timeline) template.HTML {
	if t == nil || len(t.Rows) == 0 {
		return emptySVG("timeline", "no history")
	}
	span := t.End.Sub(t.Start)
	if span <= 0 {
		span = time.Millisecond
	}
	width := float64(tlLabelW + tlPlotW + 2*tlMargin)
	height := float64(tlAxisH + len(t.Rows)*tlRowH + 2*tlMargin)
	xOf := func(at time.Time) float64 {
		f := float64(at.Sub(t.Start)) / float64(span)
		f = math.Max(0, math.Min(1, f))
		return tlMargin + tlLabelW + f*tlPlotW
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-label="timeline of the run">`,
		num(width), num(height), num(width), num(height))
	b.WriteString(`<g class="axis">`)
	step := tickStep(span)
	bottom := float64(tlMargin + tlAxisH + len(t.Rows)*tlRowH)
	for d := time.Duration(0); d <= span; d += step {
		x := xOf(t.Start.Add(d))
		fmt.Fprintf(&b, `<line class="tick" x1="%s" y1="%d" x2="%s" y2="%s"/>`, num(x), tlMargin+tlAxisH-6, num(x), num(bottom))
		fmt.Fprintf(&b, `<text class="tick-label" x="%s" y="%d" text-anchor="middle">+%s</text>`, num(x), tlMargin+tlAxisH-10, fmtDur(d))
	}
	b.WriteString(`</g>`)
	for i, r := range t.Rows {
		y := float64(tlMargin + tlAxisH + i*tlRowH)
		fmt.Fprintf(&b, `<g class="row" data-step="%s">`, esc(r.Key))
		fmt.Fprintf(&b, `<text class="row-label" x="%d" y="%s"><title>%s</title>%s</text>`, tlMargin, num(y+tlRowH/2+4), esc(r.Label), esc(cut(r.Label, 28)))
		for _, x := range r.Bars {
			x1, x2 := xOf(x.From), xOf(x.To)
			w := math.Max(x2-x1, 1)
			if x1+w > tlMargin+tlLabelW+tlPlotW {
				x1 = tlMargin + tlLabelW + tlPlotW - w
			}
			fmt.Fprintf(&b, `<rect class="bar %s outcome-%s" data-step="%s" data-attempt="%d" x="%s" y="%s" width="%s" height="%d" rx="2"><title>%s</title></rect>`,
				token(x.Kind), token(x.Outcome), esc(r.Key), x.Attempt, num(x1), num(y+(tlRowH-tlBarH)/2), num(w), tlBarH, esc(x.Title))
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // every piece of text in it is escaped
}

// tickStep is a round step (1, 2 or 5 times a power of ten of a unit)
// giving at most about six ticks over span.
func tickStep(span time.Duration) time.Duration {
	steps := []time.Duration{}
	for _, unit := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second} {
		steps = append(steps, unit, 2*unit, 5*unit)
	}
	steps = append(steps, time.Minute, 2*time.Minute, 5*time.Minute, 10*time.Minute, 15*time.Minute, 30*time.Minute,
		time.Hour, 2*time.Hour, 6*time.Hour, 12*time.Hour, 24*time.Hour)
	for _, s := range steps {
		if span/s <= 6 {
			return s
		}
	}
	d := 24 * time.Hour
	for span/d > 6 {
		d *= 2
	}
	return d
}
