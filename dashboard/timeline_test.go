package dashboard

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/server"
)

// bars returns the bars of the row with key k.
func bars(t *testing.T, tl *timeline, k string) []tlBar {
	t.Helper()
	for _, r := range tl.Rows {
		if r.Key == k {
			return r.Bars
		}
	}
	var keys []string
	for _, r := range tl.Rows {
		keys = append(keys, r.Key)
	}
	t.Fatalf("no row %q in %q", k, keys)
	return nil
}

func kinds(bs []tlBar) string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Kind+"/"+b.Outcome)
	}
	return strings.Join(out, " ")
}

func TestTimelineFlow(t *testing.T) {
	f := loadFixture(t, "order")
	tl := timelineOf(f.Run, f.Events, f.Run.CreatedAt.Add(time.Hour)) // finished: now is ignored
	if !tl.End.Equal(*f.Run.FinishedAt) || !tl.Start.Equal(f.Run.CreatedAt) {
		t.Fatalf("span %v..%v, want the run's %v..%v", tl.Start, tl.End, f.Run.CreatedAt, f.Run.FinishedAt)
	}
	charge := bars(t, tl, "charge_payment")
	if got := kinds(charge); got != "wait/retrying run/retrying wait/completed run/completed" {
		t.Fatalf("charge_payment bars %s", got)
	}
	if charge[0].Attempt != 1 || charge[2].Attempt != 2 {
		t.Errorf("attempts %d, %d", charge[0].Attempt, charge[2].Attempt)
	}
	if !charge[2].From.After(charge[1].To) {
		t.Errorf("no backoff gap between attempt 1 (ends %v) and attempt 2 (queued %v)", charge[1].To, charge[2].From)
	}
	if want := "charge_payment attempt 1: queued 1ms, ran 30ms, failed, retrying: card declined"; charge[1].Title != want {
		t.Errorf("title %q, want %q", charge[1].Title, want)
	}
	if got := kinds(bars(t, tl, "price_items #1")); got != "wait/retrying run/retrying wait/completed run/completed" {
		t.Errorf("price_items #1 bars %s", got)
	}
	if got := kinds(bars(t, tl, "price_items")); got != "run/completed" {
		t.Errorf("price_items bars %s", got)
	}
	w := bars(t, tl, "approve (waiting)")
	if kinds(w) != "waiting/completed" || !strings.Contains(w[0].Title, "resumed with approved") {
		t.Errorf("approve (waiting) bars %+v", w)
	}
	if got := kinds(bars(t, tl, "")); got != "run/completed" {
		t.Errorf("run row %s", got)
	}
	checkTimelineSVG(t, tl)
}

func TestTimelineFailedRun(t *testing.T) {
	f := loadFixture(t, "order_failed")
	tl := timelineOf(f.Run, f.Events, time.Time{})
	if got := kinds(bars(t, tl, "price_items")); got != "run/failed" {
		t.Errorf("price_items bars %s: the map step fails with the run", got)
	}
	// The third attempt of the charge was due after the run failed.
	if got := kinds(bars(t, tl, "charge_payment")); got != "wait/retrying run/retrying wait/retrying run/retrying" {
		t.Errorf("charge_payment bars %s", got)
	}
	if got := kinds(bars(t, tl, "")); got != "run/failed" {
		t.Errorf("run row %s", got)
	}
	checkTimelineSVG(t, tl)
}

// TestTimelineRunning: a run cut short is running: what is open extends
// to now.
func TestTimelineRunning(t *testing.T) {
	f := loadFixture(t, "order")
	var evs []server.Event
	for _, e := range f.Events {
		if e.Seq <= 15 { // charge_payment waits to be retried; price_items #1 too
			evs = append(evs, e)
		}
	}
	run := *f.Run
	run.Status, run.FinishedAt = "running", nil
	now := evs[len(evs)-1].At.Add(5 * time.Second)
	tl := timelineOf(&run, evs, now)
	if !tl.End.Equal(now) {
		t.Fatalf("end %v, want now %v", tl.End, now)
	}
	charge := bars(t, tl, "charge_payment")
	last := charge[len(charge)-1]
	if last.Kind != barWait || last.Outcome != "running" || !last.To.Equal(now) || last.Attempt != 2 {
		t.Errorf("charge_payment's last bar %+v, want attempt 2 queued until now", last)
	}
	if got := kinds(bars(t, tl, "reserve_inventory")); got != "wait/running" {
		t.Errorf("reserve_inventory bars %s, want it queued until now", got)
	}
	if got := kinds(bars(t, tl, "")); got != "run/running" {
		t.Errorf("run row %s", got)
	}
	checkTimelineSVG(t, tl)
}

func TestTimelineWorkflow(t *testing.T) {
	f := loadFixture(t, "checkout")
	tl := timelineOf(f.Run, f.Events, time.Time{})
	if got := kinds(bars(t, tl, "charge #2")); got != "wait/retrying run/retrying wait/completed run/completed" {
		t.Errorf("charge #2 bars %s", got)
	}
	if b := bars(t, tl, "charge #2"); !strings.HasSuffix(b[1].Title, "failed, retrying: gateway timeout") {
		t.Errorf("title %q", b[1].Title)
	}
	if got := kinds(bars(t, tl, "notify #3")); got != "wait/completed run/completed" {
		t.Errorf("notify #3 bars %s", got)
	}
	timer := bars(t, tl, "timer #4")
	if kinds(timer) != "timer/completed" || timer[0].To.Sub(timer[0].From) < 200*time.Millisecond {
		t.Errorf("timer #4 bars %+v", timer)
	}
	if got := kinds(bars(t, tl, "child ship #5")); got != "run/completed" {
		t.Errorf("child bars %s", got)
	}
	checkTimelineSVG(t, tl)
}

// checkTimelineSVG checks the picture of tl: a rect per bar with its
// classes, data attributes and title, in its row, within the plot.
func checkTimelineSVG(t *testing.T, tl *timeline) {
	t.Helper()
	root := parseSVG(t, string(timelineSVG(tl)))
	rows := root.find(func(n *xnode) bool { return n.XMLName.Local == "g" && n.hasClass("row") })
	if len(rows) != len(tl.Rows) {
		t.Fatalf("%d rows drawn, want %d", len(rows), len(tl.Rows))
	}
	for i, r := range rows {
		want := tl.Rows[i]
		rects := r.find(func(n *xnode) bool { return n.XMLName.Local == "rect" })
		if r.attr("data-step") != want.Key || len(rects) != len(want.Bars) {
			t.Fatalf("row %d: data-step %q with %d bars, want %q with %d", i, r.attr("data-step"), len(rects), want.Key, len(want.Bars))
		}
		for j, rect := range rects {
			b := want.Bars[j]
			if !rect.hasClass("bar") || !rect.hasClass(b.Kind) || !rect.hasClass("outcome-"+b.Outcome) ||
				rect.attr("data-step") != want.Key || rect.attr("data-attempt") == "" {
				t.Errorf("bar %+v drawn as %+v", b, rect.Attrs)
			}
			if title := rect.child("title"); title == nil || title.Text != b.Title || b.Title == "" {
				t.Errorf("bar %+v: title %+v", b, title)
			}
		}
	}
	ticks := root.find(func(n *xnode) bool { return n.hasClass("tick-label") })
	if len(ticks) < 2 || ticks[0].Text != "+0s" {
		t.Errorf("ticks %+v, want some, from +0s", ticks)
	}
}

func TestTimelineEscapes(t *testing.T) {
	evil := `<a&"b>`
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs := []server.Event{
		{Seq: 1, Kind: "run_started", At: at},
		{Seq: 2, Kind: "step_scheduled", Step: evil, Attempt: 1, At: at},
		{Seq: 3, Kind: "step_started", Step: evil, Attempt: 1, At: at.Add(time.Second)},
		{Seq: 4, Kind: "step_failed", Step: evil, Attempt: 1, Error: evil, At: at.Add(2 * time.Second)},
		{Seq: 5, Kind: "run_failed", Error: evil, At: at.Add(2 * time.Second)},
	}
	s := string(timelineSVG(timelineOf(&server.Run{Status: "failed", CreatedAt: at}, evs, at)))
	if strings.Contains(s, "<a&") {
		t.Fatalf("unescaped text in:\n%s", s)
	}
	root := parseSVG(t, s)
	rects := root.find(func(n *xnode) bool { return n.XMLName.Local == "rect" && n.attr("data-step") == evil })
	if len(rects) != 2 || rects[1].child("title").Text != evil+" attempt 1: queued 1s, ran 1s, failed: "+evil {
		t.Fatalf("bars of %s: %+v", evil, rects)
	}
}

func TestTimelineEmpty(t *testing.T) {
	for _, tl := range []*timeline{nil, timelineOf(nil, nil, time.Time{})} {
		if root := parseSVG(t, string(timelineSVG(tl))); !root.hasClass("empty") {
			t.Errorf("empty timeline drawn as %+v", root)
		}
	}
	// One instant: no division by zero.
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tl := timelineOf(nil, []server.Event{{Seq: 1, Kind: "run_started", At: at}, {Seq: 2, Kind: "run_completed", At: at}}, at)
	checkTimelineSVG(t, tl)
}

func TestTickStep(t *testing.T) {
	for span, want := range map[time.Duration]time.Duration{
		time.Millisecond: time.Millisecond, 30 * time.Millisecond: 5 * time.Millisecond, 1200 * time.Millisecond: 200 * time.Millisecond,
		9 * time.Second: 2 * time.Second, 2 * time.Minute: 20 * time.Second, 3 * time.Hour: 30 * time.Minute, 4 * time.Hour: time.Hour, 30 * 24 * time.Hour: 8 * 24 * time.Hour,
	} {
		if got := tickStep(span); got != want || span/got > 6 {
			t.Errorf("tickStep(%v) = %v, want %v", span, got, want)
		}
	}
}

func TestFmtDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 120 * time.Millisecond: "120ms", 1234 * time.Millisecond: "1.2s", 45 * time.Second: "45s",
		2 * time.Minute: "2m", 150 * time.Second: "2m30s", time.Hour: "1h", 90 * time.Minute: "1h30m", 72 * time.Hour: "3d",
		-2 * time.Second: "-2s", 500 * time.Microsecond: "500µs",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestTimelineGolden(t *testing.T) {
	for _, name := range fixtureNames {
		f := loadFixture(t, name)
		golden(t, name+".timeline.svg", string(timelineSVG(timelineOf(f.Run, f.Events, time.Time{})))+"\n")
	}
}

// A timeline is readable on a short run: no bar is thinner than
// tlMinBar, a retry's start is marked, each attempt's bar names its
// worker, and a wait is drawn as a waiting bar of its own row.
func TestTimelineReadable(t *testing.T) {
	f := loadFixture(t, "order")
	svg := string(timelineSVG(timelineOf(f.Run, f.Events, time.Time{})))
	for _, m := range regexp.MustCompile(`<rect class="bar[^"]*"[^>]* width="([0-9.]+)"`).FindAllStringSubmatch(svg, -1) {
		if w, err := strconv.ParseFloat(m[1], 64); err != nil || w < tlMinBar {
			t.Errorf("a bar %d wide: %s", int(w), m[0])
		}
	}
	for _, want := range []string{
		`<line class="attempt-marker" data-step="charge_payment" data-attempt="2"`,
		`data-step="charge_payment" data-attempt="1" data-worker="`,
		`<g class="row" data-step="approve (waiting)">`,
		`class="bar waiting outcome-completed"`,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the timeline has no %s", want)
		}
	}
	if strings.Contains(svg, `attempt-marker" data-step="charge_payment" data-attempt="1"`) {
		t.Error("a first attempt is marked as a retry")
	}
}
