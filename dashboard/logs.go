package dashboard

import (
	"fmt"
	"net/http"

	"github.com/hephaestus-go/hephaestus"
)

// The run page's Logs section: what the run's steps, activities and
// actions logged (flow.Logger, workflow.ActivityLogger, remote workers),
// one group per attempt, in the order the attempts first logged.

// logGroup is the log of one attempt.
type logGroup struct {
	Step    string
	Index   int
	Attempt int
	Worker  string
	Lines   []logLine
}

// Title names the attempt: "charge, attempt 2" ("charge[3], attempt 1"
// for a map element or an activity's sequence number).
func (g *logGroup) Title() string {
	step := g.Step
	if g.Index > 0 {
		step = fmt.Sprintf("%s[%d]", g.Step, g.Index)
	}
	return fmt.Sprintf("%s, attempt %d", step, g.Attempt)
}

// logLine is a record as the page shows it.
type logLine struct {
	Seq     int64
	At      string
	Level   string
	Message string
	Attrs   string
	Dropped bool
}

// runLogs reads the first page of the run's step logs into data.
func (d *Dashboard) runLogs(r *http.Request, base string, data *runData) error {
	var page hephaestus.LogPage
	if err := d.get(r, base+"/logs", nil, &page); err != nil {
		return err
	}
	data.LogsURL = base + "/logs"
	data.LogCount = len(page.Records)
	data.LogsMore = len(page.Records) >= 1000
	byAttempt := map[[3]any]*logGroup{}
	for _, rec := range page.Records {
		key := [3]any{rec.Step, rec.Index, rec.Attempt}
		g := byAttempt[key]
		if g == nil {
			g = &logGroup{Step: rec.Step, Index: rec.Index, Attempt: rec.Attempt, Worker: rec.Worker}
			byAttempt[key] = g
			data.Logs = append(data.Logs, g)
		}
		attrs := ""
		if len(rec.Attrs) > 0 {
			attrs = string(rec.Attrs)
		}
		g.Lines = append(g.Lines, logLine{Seq: rec.Seq, At: stamp(rec.Time), Level: rec.Level, Message: rec.Message, Attrs: attrs, Dropped: rec.Dropped > 0})
	}
	return nil
}
