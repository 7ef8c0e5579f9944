package flowdoc_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flowdoc"
)

const scheduledDoc = `name: report
schedules:
  - id: nightly
    cron: "30 2 * * *"
    time_zone: Europe/Berlin
    jitter: 5m
    overlap: buffer_one
    input: {region: eu}
  - id: pulse
    every: 15m
steps:
  a: {action: echo, done: true}
`

func TestDocumentSchedules(t *testing.T) {
	d, err := flowdoc.Parse("report.yaml", []byte(scheduledDoc))
	if err != nil {
		t.Fatal(err)
	}
	got := d.Schedules()
	if len(got) != 2 {
		t.Fatalf("schedules = %+v, want 2", got)
	}
	n := got[0]
	if n.ID != "nightly" || n.Cron != "30 2 * * *" || n.TimeZone != "Europe/Berlin" || n.Jitter != 5*time.Minute || n.Overlap != "buffer_one" {
		t.Errorf("nightly = %+v", n)
	}
	if in, ok := n.Input.(map[string]any); !ok || in["region"] != "eu" {
		t.Errorf("nightly input = %#v, want {region: eu}", n.Input)
	}
	if p := got[1]; p.ID != "pulse" || p.Every != 15*time.Minute || p.Cron != "" {
		t.Errorf("pulse = %+v", p)
	}
}

// Each timing error names the line and the field at fault.
func TestDocumentScheduleErrors(t *testing.T) {
	head := "name: v\nsteps: {a: {action: echo, done: true}}\nschedules:\n"
	cases := []struct {
		name, sched string
		line        int
		path, msg   string
	}{
		{"bad cron", "  - id: s\n    cron: \"61 * * * *\"\n", 5, "schedules[0].cron", "minute"},
		{"bad zone", "  - id: s\n    cron: \"@hourly\"\n    time_zone: Mars/Olympus\n", 6, "schedules[0].time_zone", "time_zone"},
		{"no timing", "  - id: s\n", 4, "schedules[0]", "no timing"},
		{"no id", "  - cron: \"@hourly\"\n", 4, "schedules[0].id", "no id"},
		{"twice", "  - {id: s, every: 1m}\n  - {id: s, every: 2m}\n", 5, "schedules[1].id", "declared twice"},
		{"overlap", "  - {id: s, every: 1m, overlap: sometimes}\n", 4, "schedules[0].overlap", "unknown overlap policy"},
		{"unknown key", "  - {id: s, every: 1m, when: now}\n", 4, "schedules[0].when", `unknown key "when"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := flowdoc.Parse("v.yaml", []byte(head+c.sched))
			var fe *flowdoc.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Parse = %v, want a *flowdoc.Error", err)
			}
			if fe.Line != c.line || fe.Path != c.path || !strings.Contains(fe.Message, c.msg) {
				t.Errorf("error at %d %s: %q; want line %d, path %s, message containing %q", fe.Line, fe.Path, fe.Message, c.line, c.path, c.msg)
			}
		})
	}
}
