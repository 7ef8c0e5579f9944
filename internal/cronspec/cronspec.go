// Package cronspec is the pure timing core of schedules: it parses and
// validates a schedule's timing (a cron expression or a fixed interval,
// in an IANA time zone), lists its ticks, computes the deterministic
// jitter of a tick and decides which missed ticks run after downtime.
// It does no I/O and never reads the clock: every time is an argument.
//
// A tick is an instant (UTC). Cron expressions are evaluated on the
// zone's wall clock, and each wall time is then mapped to an instant:
//
//   - a wall time that does not exist (the hour skipped when clocks
//     spring forward) maps to the first instant after the gap, so a tick
//     at 02:30 on the night clocks jump from 02:00 to 03:00 runs once, at
//     03:00; wall times that map to the same instant are one tick;
//   - a wall time that exists twice (the hour repeated when clocks fall
//     back) maps to its first occurrence, so a tick at 01:30 runs once.
//
// Fixed intervals step in real time, anchored: their ticks are
// anchor + k·interval, whatever the zone.
package cronspec

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	cron "github.com/netresearch/go-cron"
)

// ErrInvalid marks every error of Parse and Check.
var ErrInvalid = errors.New("invalid schedule")

// Error is a validation failure: Field names what is wrong ("cron",
// "cron minute field", "every", "time_zone", …) and Reason says why.
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Timing is what Parse reads: exactly one of Cron and Every.
type Timing struct {
	// Cron is a cron expression: 5 fields (minute hour day-of-month month
	// day-of-week), 6 fields (a leading seconds field), or a descriptor
	// (@yearly, @monthly, @weekly, @daily, @hourly, @every <duration>).
	Cron string
	// Every is a fixed interval (at least one second).
	Every time.Duration
	// Anchor is the origin of a fixed interval's ticks; zero means the
	// Unix epoch.
	Anchor time.Time
	// TimeZone is an IANA zone name; "" means UTC.
	TimeZone string
}

// MaxCronLength bounds a cron expression.
const MaxCronLength = 256

// Spec is a parsed, valid timing.
type Spec struct {
	cron   *cron.SpecSchedule // evaluated on wall times written as UTC
	every  time.Duration
	anchor time.Time
	loc    *time.Location
}

var parser = cron.MustNewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow |
	cron.Descriptor | cron.DowOrDom)

// fieldNames are the names of the fields of a 6-field expression.
var fieldNames = []string{"second", "minute", "hour", "day-of-month", "month", "day-of-week"}

// Parse validates t and returns its Spec. Errors are *Error, naming the
// field at fault.
func Parse(t Timing) (*Spec, error) {
	loc, err := location(t.TimeZone)
	if err != nil {
		return nil, err
	}
	cronText := strings.TrimSpace(t.Cron)
	switch {
	case cronText != "" && t.Every != 0:
		return nil, invalid("every", "set either a cron expression or an interval, not both")
	case cronText == "" && t.Every == 0:
		return nil, invalid("cron", "a schedule needs a cron expression or an interval")
	}
	if d, ok := strings.CutPrefix(cronText, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, invalid("cron", "%q: the duration after @every does not parse (write it like 90s, 5m or 1h30m)", cronText)
		}
		cronText, t.Every = "", every
	}
	if t.Every != 0 {
		if t.Every < time.Second {
			return nil, invalid("every", "the interval %v is shorter than one second", t.Every)
		}
		if t.Every%time.Second != 0 {
			return nil, invalid("every", "the interval %v is not a whole number of seconds", t.Every)
		}
		anchor := t.Anchor
		if anchor.IsZero() {
			anchor = time.Unix(0, 0)
		}
		return &Spec{every: t.Every, anchor: anchor.UTC(), loc: loc}, nil
	}
	if len(cronText) > MaxCronLength {
		return nil, invalid("cron", "the expression is %d bytes long, more than %d", len(cronText), MaxCronLength)
	}
	if strings.HasPrefix(cronText, "TZ=") || strings.HasPrefix(cronText, "CRON_TZ=") {
		return nil, invalid("cron", "%q: give the time zone in the schedule's time zone, not in the expression", cronText)
	}
	if !strings.HasPrefix(cronText, "@") {
		fields := strings.Fields(cronText)
		if len(fields) != 5 && len(fields) != 6 {
			return nil, invalid("cron", "%q has %d fields; write 5 (minute hour day-of-month month day-of-week) or 6 (with a leading seconds field)", cronText, len(fields))
		}
		if err := checkFields(fields); err != nil {
			return nil, err
		}
	}
	s, err := parser.Parse(cronText)
	if err != nil {
		return nil, invalid("cron", "%q: %v", cronText, err)
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, invalid("cron", "%q is not a calendar expression", cronText)
	}
	c := *spec
	c.Location = time.UTC
	return &Spec{cron: &c, loc: loc}, nil
}

// checkFields parses each field alone, so an error names its field.
func checkFields(fields []string) error {
	names := fieldNames
	if len(fields) == 5 {
		names = names[1:]
	}
	for i, f := range fields {
		probe := make([]string, 6)
		for j := range probe {
			probe[j] = "*"
		}
		probe[0] = "0"
		probe[6-len(fields)+i] = f
		if _, err := parser.Parse(strings.Join(probe, " ")); err != nil {
			return invalid("cron "+names[i]+" field", "%q: %v", f, err)
		}
	}
	return nil
}

func location(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, invalid("time_zone", `"Local" depends on the machine; name an IANA zone such as Europe/Berlin`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, invalid("time_zone", "%q is not an IANA time zone (such as America/New_York or UTC)", name)
	}
	return loc, nil
}

// Location is the spec's time zone.
func (s *Spec) Location() *time.Location { return s.loc }

// Next returns the first tick strictly after t, and false when there is
// none (an expression that matches no date within the parser's search).
func (s *Spec) Next(t time.Time) (time.Time, bool) {
	t = t.UTC()
	if s.every > 0 {
		if t.Before(s.anchor) {
			return s.anchor, true
		}
		k := t.Sub(s.anchor) / s.every
		n := s.anchor.Add((k + 1) * s.every)
		if !n.After(t) { // rounding for spans beyond time.Duration
			n = n.Add(s.every)
		}
		return n, true
	}
	w := wall(t.In(s.loc))
	for range 10000 {
		w = s.cron.Next(w)
		if w.IsZero() {
			return time.Time{}, false
		}
		if u := s.instant(w); u.After(t) {
			return u, true
		}
	}
	return time.Time{}, false
}

// wall writes the wall clock of t as a UTC time (truncated to seconds).
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

// instant maps a wall time (written as UTC) of the spec's zone to an
// instant: the first occurrence of a repeated wall time, the end of the
// gap for a skipped one.
func (s *Spec) instant(w time.Time) time.Time {
	if s.loc == time.UTC {
		return w
	}
	var best time.Time
	var offs [3]int
	for i, probe := range []time.Time{w.Add(-36 * time.Hour), w, w.Add(36 * time.Hour)} {
		_, offs[i] = probe.In(s.loc).Zone()
	}
	for _, off := range offs {
		u := w.Add(-time.Duration(off) * time.Second)
		if wall(u.In(s.loc)).Equal(w) && (best.IsZero() || u.Before(best)) {
			best = u
		}
	}
	if !best.IsZero() {
		return best
	}
	// A gap (clocks sprang forward from offset lo to a larger one): read
	// with the offset in force before it, w names an instant within the
	// first hours after the transition, and the zone in force then began
	// at the transition, the first instant after the gap.
	lo := offs[0]
	for _, off := range offs {
		lo = min(lo, off)
	}
	u := w.Add(-time.Duration(lo) * time.Second)
	if start, _ := u.In(s.loc).ZoneBounds(); !start.IsZero() && !start.After(u) {
		return start.UTC()
	}
	return u
}

// NextN returns the first n ticks after t (fewer when the expression runs
// out).
func (s *Spec) NextN(t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, max(0, min(n, 1000)))
	for range n {
		next, ok := s.Next(t)
		if !ok {
			break
		}
		out = append(out, next)
		t = next
	}
	return out
}

// Between returns the ticks in (from, to], oldest first, at most limit
// of them (the oldest).
func (s *Spec) Between(from, to time.Time, limit int) []time.Time {
	var out []time.Time
	for len(out) < limit {
		next, ok := s.Next(from)
		if !ok || next.After(to) {
			break
		}
		out = append(out, next)
		from = next
	}
	return out
}

// Jitter is the delay of a tick of the schedule id: a hash of the id and
// the tick, in [0, max), the same in every process. Zero when max is.
func Jitter(id string, tick time.Time, maxJitter time.Duration) time.Duration {
	if maxJitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(tick.UTC().UnixNano(), 10)))
	return time.Duration(h.Sum64() % uint64(maxJitter))
}

// CatchUp says which missed ticks run after downtime (or a pause).
// Ticks > 0 runs the latest Ticks of them; Within > 0 runs those due
// within that span before now; both zero runs none. The tick that came
// due on time (less than Grace ago, and the latest) always runs.
type CatchUp struct {
	Ticks  int
	Within time.Duration
}

// Grace is how late the latest due tick may be handled and still count
// as on time rather than missed.
const Grace = time.Minute

// Plan is what Due decides.
type Plan struct {
	// Run are the ticks to handle, oldest first.
	Run []time.Time
	// Last is the latest due tick (zero when none is due): the
	// schedule's new cursor.
	Last time.Time
	// Missed counts the due ticks that do not run.
	Missed int
	// NextTick and NextFire are the first tick after Last (or after the
	// cursor when nothing is due) and its fire time (tick plus jitter);
	// zero when the expression has no more ticks.
	NextTick, NextFire time.Time
}

// maxLookback bounds how far back Due looks for ticks to run.
const maxLookback = 1000

// Due decides, at now, which ticks after cursor run: a tick is due when
// its fire time (tick plus jitter) has come. It only looks at the latest
// due ticks, so a long downtime costs no more than the catch-up window.
func Due(s *Spec, id string, jitter time.Duration, cursor, now time.Time, c CatchUp) Plan {
	fire := func(t time.Time) time.Time { return t.Add(Jitter(id, t, jitter)) }
	var p Plan
	first, ok := s.Next(cursor)
	if !ok || fire(first).After(now) {
		if ok {
			p.NextTick, p.NextFire = first, fire(first)
		}
		return p
	}
	// Find the due ticks, latest first, looking back far enough for the
	// window: spans grow until they reach the cursor or hold enough.
	want := max(c.Ticks, 1)
	var due []time.Time // oldest first, all due
	for span := time.Minute; ; span *= 4 {
		from := now.Add(-span - jitter)
		if !from.After(cursor) {
			from = cursor
		}
		ticks := s.Between(from, now, 1<<20)
		due = due[:0]
		for _, t := range ticks {
			if fire(t).After(now) {
				break
			}
			due = append(due, t)
		}
		if from.Equal(cursor) || len(due) > maxLookback || (len(due) >= want && (c.Within <= 0 || now.Sub(fire(due[0])) >= c.Within)) {
			break
		}
	}
	if len(due) == 0 {
		// Only ticks whose jitter keeps them from being due: wait for the
		// first of them.
		p.NextTick, p.NextFire = first, fire(first)
		return p
	}
	last := due[len(due)-1]
	p.Last = last
	total := len(due)
	if first.Before(due[0]) {
		total = -1 // more were due than we looked at
	}
	for i, t := range due {
		onTime := i == len(due)-1 && now.Sub(fire(t)) < Grace
		inWindow := (c.Ticks > 0 && len(due)-i <= c.Ticks) || (c.Within > 0 && now.Sub(fire(t)) <= c.Within)
		if onTime || inWindow {
			p.Run = append(p.Run, t)
		}
	}
	if total >= 0 {
		p.Missed = total - len(p.Run)
	} else {
		p.Missed = -1
	}
	if n, ok := s.Next(last); ok {
		p.NextTick, p.NextFire = n, fire(n)
	}
	return p
}

// Fire is the fire time of a tick of schedule id: the tick plus its
// jitter.
func Fire(id string, tick time.Time, jitter time.Duration) time.Time {
	return tick.Add(Jitter(id, tick, jitter))
}
