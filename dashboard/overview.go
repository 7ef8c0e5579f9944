package dashboard

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/server"
)

// overviewWindow is a window the overview offers, with its bucket width.
type overviewWindow struct {
	Name   string
	Span   time.Duration
	Bucket time.Duration
}

// overviewWindows are the overview's windows; the first is the default.
var overviewWindows = []overviewWindow{
	{"1h", time.Hour, 2 * time.Minute},
	{"24h", 24 * time.Hour, time.Hour},
	{"7d", 7 * 24 * time.Hour, 6 * time.Hour},
}

// overviewData is the overview's.
type overviewData struct {
	Window  string
	Windows []overviewWindow
	Stats   *server.Stats
	// FailureRate is the failed share of the runs finished in the window
	// (completed or failed), in percent; -1 with none finished.
	FailureRate     int
	P50, P90, P99   time.Duration
	Throughput      template.HTML
	Queues          []*queueItem
	Active          []statusCount
	ActiveTotal     int
	ThroughputTitle string
	// StaleAfter is how long a run goes without progress to be stale.
	StaleAfter time.Duration
}

// statusCount is how many runs are in a status.
type statusCount struct {
	Status string
	Count  int
}

func (overviewData) PageTitle() string { return "Overview" }
func (overviewData) Live() bool        { return true }

// overviewPage shows the throughput, failure rate and latency of a
// window, the backlog of each queue and the blocked and stale runs.
func (d *Dashboard) overviewPage(r *http.Request) (string, any, error) {
	w := overviewWindows[0]
	if name := r.URL.Query().Get("window"); name != "" {
		found := false
		for _, o := range overviewWindows {
			if o.Name == name {
				w, found = o, true
			}
		}
		if !found {
			return "", nil, badRequest("window %q: use 1h, 24h or 7d", name)
		}
	}
	now := d.cfg.Now().UTC()
	q := url.Values{"since": {now.Add(-w.Span).Format(time.RFC3339Nano)}, "until": {now.Format(time.RFC3339Nano)}, "bucket": {w.Bucket.String()}}
	st := &server.Stats{}
	if err := d.get(r, "/api/v1/stats", q, st); err != nil {
		return "", nil, err
	}
	var queues []*server.Queue
	if err := d.get(r, "/api/v1/queues", nil, &queues); err != nil {
		return "", nil, err
	}
	data := &overviewData{Window: w.Name, Windows: overviewWindows, Stats: st, FailureRate: -1,
		P50: seconds(st.Latency.P50Seconds), P90: seconds(st.Latency.P90Seconds), P99: seconds(st.Latency.P99Seconds),
		Throughput: throughputSVG(st.Buckets, w), ThroughputTitle: "runs finished per " + humanBucket(w.Bucket),
		StaleAfter: time.Duration(st.StaleAfter)}
	if done := st.Totals.Completed + st.Totals.Failed; done > 0 {
		data.FailureRate = (100*st.Totals.Failed + done/2) / done
	}
	for _, qu := range queues {
		data.Queues = append(data.Queues, queueOf(qu))
	}
	for _, s := range runStatuses {
		if n := st.Active[s]; n > 0 {
			data.Active = append(data.Active, statusCount{s, n})
			data.ActiveTotal += n
		}
	}
	return "overview", data, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// humanBucket names a bucket width: "2 minutes", "hour", "6 hours".
func humanBucket(d time.Duration) string {
	switch {
	case d == time.Hour:
		return "hour"
	case d%time.Hour == 0:
		return fmt.Sprintf("%d hours", d/time.Hour)
	case d == time.Minute:
		return "minute"
	case d%time.Minute == 0:
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return d.String()
}

// The throughput chart's geometry.
const (
	chartW, chartH       = 900.0, 180.0
	chartLeft, chartBase = 40.0, 150.0
	chartTop             = 12.0
)

// throughputSVG draws the runs finished in each bucket as a bar: the
// completed at the bottom, the failed stacked on them. Each bar is a
// <g class="bucket" data-completed data-failed>; the picture is styled
// by CSS classes only.
func throughputSVG(buckets []server.StatsBucket, w overviewWindow) template.HTML {
	if len(buckets) == 0 {
		return emptySVG("throughput", "no bucket in this window")
	}
	top := 0
	for _, b := range buckets {
		top = max(top, b.Completed+b.Failed)
	}
	scale := niceCeil(top)
	plotW := chartW - chartLeft - 8
	slot := plotW / float64(len(buckets))
	barW := max(slot*0.8, 1)
	height := chartBase - chartTop
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" class="throughput" viewBox="0 0 %s %s" width="%s" height="%s" role="img" aria-label="runs completed and failed per bucket">`,
		num(chartW), num(chartH), num(chartW), num(chartH))
	// The axis: the baseline, the top gridline and their values.
	fmt.Fprintf(&s, `<g class="axis"><line x1="%s" y1="%s" x2="%s" y2="%s"/><line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/>`,
		num(chartLeft), num(chartBase), num(chartW-8), num(chartBase), num(chartLeft), num(chartTop), num(chartW-8), num(chartTop))
	fmt.Fprintf(&s, `<text x="%s" y="%s" text-anchor="end">0</text><text x="%s" y="%s" text-anchor="end">%d</text>`,
		num(chartLeft-6), num(chartBase+4), num(chartLeft-6), num(chartTop+4), scale)
	// A time label under the first, the middle and the last bucket.
	for _, i := range []int{0, len(buckets) / 2, len(buckets) - 1} {
		x := chartLeft + slot*float64(i) + slot/2
		fmt.Fprintf(&s, `<text x="%s" y="%s" text-anchor="middle">%s</text>`, num(x), num(chartBase+18), esc(bucketLabel(buckets[i].Start, w)))
	}
	s.WriteString(`</g><g class="bars">`)
	for i, b := range buckets {
		x := chartLeft + slot*float64(i) + (slot-barW)/2
		hc := height * float64(b.Completed) / float64(scale)
		hf := height * float64(b.Failed) / float64(scale)
		fmt.Fprintf(&s, `<g class="bucket" data-start="%s" data-completed="%d" data-failed="%d"><title>%s: %d completed, %d failed</title>`,
			b.Start.UTC().Format(time.RFC3339), b.Completed, b.Failed, esc(b.Start.UTC().Format("2006-01-02 15:04Z")), b.Completed, b.Failed)
		if b.Completed > 0 {
			fmt.Fprintf(&s, `<rect class="bar completed" x="%s" y="%s" width="%s" height="%s"/>`, num(x), num(chartBase-hc), num(barW), num(hc))
		}
		if b.Failed > 0 {
			fmt.Fprintf(&s, `<rect class="bar failed" x="%s" y="%s" width="%s" height="%s"/>`, num(x), num(chartBase-hc-hf), num(barW), num(hf))
		}
		s.WriteString(`</g>`)
	}
	s.WriteString(`</g></svg>`)
	return template.HTML(s.String()) //nolint:gosec // every piece of text in it is escaped
}

// bucketLabel is a bucket's start as the axis shows it.
func bucketLabel(t time.Time, w overviewWindow) string {
	if w.Span <= 24*time.Hour {
		return t.UTC().Format("15:04Z")
	}
	return t.UTC().Format("Jan 2 15:04Z")
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(n int) int {
	if n <= 1 {
		return 1
	}
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
	}
}
