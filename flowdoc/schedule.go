package flowdoc

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/cronspec"
)

// Schedule is a schedule a document declares for itself (its
// "schedules" list): RegisterDocuments creates or updates it, with the
// document as target.
type Schedule = hephtype.ScheduleDecl

var (
	scheduleKeys = []string{"id", "cron", "every", "time_zone", "jitter", "overlap", "input"}
	overlaps     = hephtype.OverlapPolicies
)

// Schedules returns the schedules the document declares, in order.
func (d *Document) Schedules() []Schedule { return slices.Clone(d.schedules) }

// schedules reads the document's "schedules" list. Timing errors point at
// the field at fault.
func (p *parser) schedules(d *Document, v *node) {
	if v.kind != yaml.SequenceNode {
		p.c.add(v, "schedules", "write a list of schedules, each with an id and a cron or every", "expected a list, found %s", v.kindName())
		return
	}
	seen := map[string]bool{}
	for i, n := range v.vals {
		path := fmt.Sprintf("schedules[%d]", i)
		if !p.mapping(n, path) {
			continue
		}
		p.keys(n, path, scheduleKeys)
		var s Schedule
		var ok bool
		if x, k := n.get("id"); k != nil {
			if s.ID, ok = p.str(x, path+".id"); ok && seen[s.ID] {
				p.c.add(x, path+".id", "give each schedule its own id", "schedule id %q is declared twice", s.ID)
				ok = false
			}
			seen[s.ID] = true
		} else {
			p.c.add(n, path+".id", `add "id: <schedule id>"`, "the schedule has no id")
			ok = false
		}
		cronN, _ := n.get("cron")
		if cronN != nil {
			s.Cron, _ = p.str(cronN, path+".cron")
		}
		everyN, _ := n.get("every")
		if everyN != nil {
			s.Every, _ = p.duration(everyN, path+".every")
		}
		zoneN, _ := n.get("time_zone")
		if zoneN != nil {
			s.TimeZone, _ = p.str(zoneN, path+".time_zone")
		}
		if x, k := n.get("jitter"); k != nil {
			s.Jitter, _ = p.duration(x, path+".jitter")
		}
		if x, k := n.get("overlap"); k != nil {
			if s.Overlap, _ = p.str(x, path+".overlap"); s.Overlap != "" && !slices.Contains(overlaps, s.Overlap) {
				p.c.add(x, path+".overlap", "use one of: "+strings.Join(overlaps, ", "), "unknown overlap policy %q", s.Overlap)
			}
		}
		if x, k := n.get("input"); k != nil {
			in, err := x.toAny()
			if err != nil {
				p.c.add(x, path+".input", "write a plain JSON value", "%v", err)
			}
			s.Input = in
		}
		if cronN == nil && everyN == nil {
			p.c.add(n, path, `add "cron: <expression>" or "every: <duration>"`, "the schedule has no timing")
			ok = false
		}
		if s.Cron != "" || s.Every > 0 {
			_, err := cronspec.Parse(cronspec.Timing{Cron: s.Cron, Every: s.Every, TimeZone: s.TimeZone})
			var ce *cronspec.Error
			switch {
			case err == nil:
			case errors.As(err, &ce):
				at, field := n, path
				switch {
				case strings.HasPrefix(ce.Field, "cron") && cronN != nil:
					at, field = cronN, path+".cron"
				case ce.Field == "every" && everyN != nil:
					at, field = everyN, path+".every"
				case ce.Field == "time_zone" && zoneN != nil:
					at, field = zoneN, path+".time_zone"
				}
				p.c.add(at, field, "correct the timing (see docs/schedules.md)", "%s: %s", ce.Field, ce.Reason)
				ok = false
			default:
				p.c.add(n, path, "correct the timing (see docs/schedules.md)", "%v", err)
				ok = false
			}
		}
		if ok {
			d.schedules = append(d.schedules, s)
		}
	}
}
