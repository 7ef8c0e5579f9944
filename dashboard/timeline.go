package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/runsteps"
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
	// Worker ran the attempt ("" when unknown).
	Worker string
}

// timelineOf draws a run's history as a timeline, from what
// internal/runsteps derives of each step (the API's step details read
// the same derivation): an attempt queues from its ready time (its
// step_scheduled entry, its map's expansion, or its retry's ready time)
// to its start, and runs from the start recorded in step_started to its
// outcome; the backoff between two attempts shows as a gap. A step
// waiting to be resumed gets a row of its own with its wait; a
// workflow's timer a bar for its time. What has not ended is drawn up to
// now, or up to the run's end when it has finished.
func timelineOf(run *server.Run, events []server.Event, now time.Time) *timeline {
	t := &timeline{}
	var end time.Time
	if run != nil {
		t.Start = run.CreatedAt
	}
	for _, e := range events {
		if t.Start.IsZero() || e.At.Before(t.Start) {
			t.Start = e.At
		}
		if e.At.After(end) {
			end = e.At
		}
	}
	finished := run != nil && hephtype.RunStatus(run.Status).Terminal()
	if run != nil && run.FinishedAt != nil && run.FinishedAt.After(end) {
		end = *run.FinishedAt
	}
	if !finished && now.After(end) {
		end = now
	}
	if t.Start.IsZero() {
		t.Start = end
	}
	t.End = end
	b := &tlBuilder{t: t, rows: map[string]*tlRow{}, end: end, labels: timerLabels(events)}

	in := &runsteps.Input{Finished: finished, End: end}
	for _, e := range events {
		in.Events = append(in.Events, runsteps.Event{Seq: e.Seq, Kind: hephtype.EventKind(e.Kind), Step: e.Step, Index: e.Index,
			Attempt: e.Attempt, Name: e.Name, Data: e.Data, Error: e.Error, At: e.At})
	}
	for _, e := range events {
		if hephtype.EventKind(e.Kind) == hephtype.EventRunStarted {
			b.row("", "run")
			break
		}
	}
	for _, s := range runsteps.Derive(in) {
		b.step(s)
	}
	b.runBar(events, finished)
	return t
}

// tlBuilder holds timelineOf's drawing.
type tlBuilder struct {
	t      *timeline
	rows   map[string]*tlRow
	end    time.Time
	labels map[string]string // a timer's row label, by key
}

// timerLabels names each workflow timer's row by its duration: "timer 5s
// #4".
func timerLabels(events []server.Event) map[string]string {
	out := map[string]string{}
	for _, e := range events {
		if hephtype.EventKind(e.Kind) == hephtype.EventTimerStarted && isActivity(e) {
			if d, ok := timerDuration(e); ok {
				out["timer #"+strconv.Itoa(e.Index)] = "timer " + fmtDur(d) + " #" + strconv.Itoa(e.Index)
			}
		}
	}
	return out
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

// step draws a step's attempts on its row, and its waits on its waiting
// row (a timer's on its own).
func (b *tlBuilder) step(s *runsteps.Step) {
	if len(s.Attempts) == 0 && len(s.Waits) == 0 {
		return // a flow step not reached
	}
	k := s.Key
	label := k
	if l, ok := b.labels[k]; ok {
		label = l
	}
	b.row(k, label)
	for _, a := range s.Attempts {
		b.attempt(k, s.Kind, a)
	}
	for _, w := range s.Waits {
		to, outcome := w.To, w.Outcome
		if to.IsZero() {
			to, outcome = b.end, "running"
		}
		if s.Kind == runsteps.KindTimer {
			title := fmt.Sprintf("%s started %s ago", label, fmtDur(b.end.Sub(w.From)))
			switch w.Outcome {
			case runsteps.Completed:
				title = fmt.Sprintf("%s fired after %s", label, fmtDur(to.Sub(w.From)))
			case runsteps.Cancelled:
				title = fmt.Sprintf("%s cancelled after %s", label, fmtDur(to.Sub(w.From)))
			}
			b.bar(k, tlBar{Kind: barTimer, Outcome: outcome, From: w.From, To: to, Title: title})
			continue
		}
		title := fmt.Sprintf("%s waiting for %s", k, fmtDur(to.Sub(w.From)))
		if w.Outcome == runsteps.Completed {
			title = fmt.Sprintf("%s waited %s, resumed with %s", k, fmtDur(to.Sub(w.From)), nameOr(w.Event, "an event"))
			if w.Actor != "" {
				title += " by " + w.Actor
			}
		}
		b.bar(k+" (waiting)", tlBar{Kind: barWaiting, Outcome: outcome, From: w.From, To: to, Title: title})
	}
}

// attempt draws an attempt: its wait in the queue, then its run.
func (b *tlBuilder) attempt(k, kind string, a *runsteps.Attempt) {
	outcome := a.Outcome
	switch outcome {
	case runsteps.Waiting:
		outcome = runsteps.Completed // the step ran; its wait has a row of its own
	case runsteps.Queued:
		outcome = runsteps.Running
	}
	to := a.End
	if to.IsZero() {
		to = b.end
	}
	var bars []tlBar
	if !a.Ready.IsZero() {
		until := to
		if a.Ran() && !a.Start.IsZero() {
			until = a.Start
		}
		if until.After(a.Ready) || !a.Ran() && !a.Ready.After(to) {
			bars = append(bars, tlBar{Kind: barWait, Attempt: a.N, From: a.Ready, To: until})
		}
	}
	if a.Ran() && !a.Start.IsZero() && !to.Before(a.Start) {
		bars = append(bars, tlBar{Kind: barRun, Attempt: a.N, From: a.Start, To: to})
	}
	var queued, ran time.Duration
	for _, x := range bars {
		if x.Kind == barWait {
			queued += x.To.Sub(x.From)
		} else {
			ran += x.To.Sub(x.From)
		}
	}
	title := k
	if kind != runsteps.KindChild {
		title += " attempt " + strconv.Itoa(a.N)
	}
	var parts []string
	if queued > 0 {
		parts = append(parts, "queued "+fmtDur(queued))
	}
	if ran > 0 || len(parts) == 0 {
		parts = append(parts, "ran "+fmtDur(ran))
	}
	verb := outcome
	if outcome == runsteps.Retrying {
		verb = "failed, retrying"
	}
	parts = append(parts, verb)
	title += ": " + strings.Join(parts, ", ")
	if a.Error != "" {
		title += ": " + a.Error
	}
	for _, x := range bars {
		x.Outcome, x.Title, x.Worker = outcome, title, a.Worker
		b.bar(k, x)
	}
}

// runBar draws the run's bar: to its end, or running up to now.
func (b *tlBuilder) runBar(events []server.Event, finished bool) {
	for _, e := range events {
		switch hephtype.EventKind(e.Kind) {
		case hephtype.EventRunCompleted, hephtype.EventRunFailed, hephtype.EventRunCancelled, hephtype.EventRunContinued,
			hephtype.EventRunTimedOut:
			out := map[string]string{"run_completed": "completed", "run_failed": "failed", "run_cancelled": "cancelled", "run_continued": "completed", "run_timed_out": "failed"}[e.Kind]
			title := "run " + strings.ReplaceAll(strings.TrimPrefix(e.Kind, "run_"), "_", " ") + " after " + fmtDur(e.At.Sub(b.t.Start))
			if e.Error != "" {
				title += ": " + e.Error
			}
			b.bar("", tlBar{Kind: barRun, Outcome: out, Attempt: 1, From: b.t.Start, To: e.At, Title: title})
		}
	}
	if r := b.rows[""]; r != nil && len(r.Bars) == 0 && !finished {
		b.bar("", tlBar{Kind: barRun, Outcome: "running", Attempt: 1, From: b.t.Start, To: b.end, Title: "run running for " + fmtDur(b.end.Sub(b.t.Start))})
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

// The timeline picture's geometry.
const (
	tlLabelW = 200 // the column of row labels
	tlPlotW  = 720 // the time axis
	tlRowH   = 22
	tlBarH   = 14
	tlAxisH  = 28
	tlMargin = 8
	tlMinBar = 4 // the narrowest bar, in pixels
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
			// A bar is never thinner than tlMinBar: a step of a few
			// milliseconds in a run of minutes stays visible and hoverable.
			w := math.Max(x2-x1, tlMinBar)
			if x1+w > tlMargin+tlLabelW+tlPlotW {
				x1 = tlMargin + tlLabelW + tlPlotW - w
			}
			worker := ""
			if x.Worker != "" {
				worker = fmt.Sprintf(` data-worker="%s"`, esc(x.Worker))
			}
			fmt.Fprintf(&b, `<rect class="bar %s outcome-%s" data-step="%s" data-attempt="%d"%s x="%s" y="%s" width="%s" height="%d" rx="2"><title>%s</title></rect>`,
				token(x.Kind), token(x.Outcome), esc(r.Key), x.Attempt, worker, num(x1), num(y+(tlRowH-tlBarH)/2), num(w), tlBarH, esc(x.Title))
			if x.Kind == barRun && x.Attempt > 1 && r.Key != "" { // where a retry starts
				fmt.Fprintf(&b, `<line class="attempt-marker" data-step="%s" data-attempt="%d" x1="%s" y1="%s" x2="%s" y2="%s"><title>attempt %d starts</title></line>`,
					esc(r.Key), x.Attempt, num(x1), num(y+1), num(x1), num(y+tlRowH-1), x.Attempt)
			}
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
