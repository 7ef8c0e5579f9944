package flowdoc

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/triggers"
	"github.com/hephaestus-go/hephaestus/store"
)

// Trigger is a trigger a document declares for itself (an entry of its
// "on" list): every event of its name whose data the filter accepts
// starts a run of the document. RegisterDocuments declares it as the
// trigger TriggerName(<stored name>, Name), with the document as target.
type Trigger struct {
	// Name is the entry's "name", or else its event: unique in the
	// document, and stable across its versions.
	Name string
	// Event is the name of the events that fire it.
	Event string
	// Filter and Input are CEL expressions over event (a map with id,
	// name, data, at and seq): a boolean the run needs, and the run's
	// input (the event's data when empty).
	Filter string
	Input  string
	// BusinessKey and ConcurrencyKey are CEL expressions over event: the
	// run's business key value and concurrency key (Trigger.BusinessKey).
	BusinessKey    string
	ConcurrencyKey string
	// Key, Debounce, Throttle* and Batch* are the trigger's flow control
	// over its events ("key", "debounce", "throttle: {limit, period}",
	// "batch: {size, window}"; store.Trigger says what each does).
	Key            string
	Debounce       time.Duration
	ThrottleLimit  int
	ThrottlePeriod time.Duration
	BatchSize      int
	BatchWindow    time.Duration
}

var onKeys = []string{"batch", "business_key", "concurrency_key", "debounce", "event", "filter", "input", "key", "name", "throttle"}

// Triggers returns the triggers the document declares ("on"), in order.
func (d *Document) Triggers() []Trigger { return slices.Clone(d.triggers) }

// TriggerPrefix is the prefix of the names of the triggers a document
// declares: "<document>:on:". A document name holds no ':', so no other
// document's triggers share it.
func TriggerPrefix(document string) string { return document + ":on:" }

// TriggerName is the name of the trigger that the entry named entry
// (Trigger.Name) of a document's "on" list declares: "<document>:on:<entry>".
func TriggerName(document, entry string) string { return TriggerPrefix(document) + entry }

// triggerProbe names the trigger the checks of one field compile.
const triggerProbe = "t"

// eventTriggers reads the document's "on" list. Each field is checked with
// the rules the trigger loop applies (triggers.Compile), and an error
// points at the field at fault.
func (p *parser) eventTriggers(d *Document, v *node) {
	if v.kind != yaml.SequenceNode {
		p.c.add(v, "on", "write a list of triggers, each with an event", "expected a list, found %s", v.kindName())
		return
	}
	seen := map[string]bool{}
	for i, n := range v.vals {
		path := fmt.Sprintf("on[%d]", i)
		if !p.mapping(n, path) {
			continue
		}
		p.keys(n, path, onKeys)
		t, ok := p.eventTrigger(n, path)
		if !ok {
			continue
		}
		at, field := n, path+".event"
		if x, k := n.get("name"); k != nil {
			at, field = x, path+".name"
		} else if x, k := n.get("event"); k != nil {
			at = x
		}
		switch full := TriggerName(d.name, t.Name); {
		case seen[t.Name]:
			p.c.add(at, field, `give each trigger its own name ("name: <name>")`, "trigger %q is declared twice", t.Name)
		case len(full) > store.MaxTriggerNameBytes:
			p.c.add(at, field, `give the trigger a shorter name ("name: <name>")`,
				"the trigger's name %q is %d bytes, more than the limit of %d", full, len(full), store.MaxTriggerNameBytes)
		default:
			d.triggers = append(d.triggers, t)
		}
		seen[t.Name] = true
	}
}

// eventTrigger reads one entry of "on"; ok is false when a field is at
// fault.
func (p *parser) eventTrigger(n *node, path string) (t Trigger, ok bool) {
	if x, k := n.get("event"); k != nil {
		if t.Event, ok = p.str(x, path+".event"); ok {
			probe := &store.Trigger{Name: triggerProbe, Event: t.Event, TargetKind: store.TargetDocument, TargetName: triggerProbe}
			if err := store.CheckTrigger(probe); err != nil {
				p.c.add(x, path+".event", "write the name of the events that start the document", "%s", triggerReason(err, ""))
				ok = false
			}
		}
	} else {
		p.c.add(n, path+".event", `add "event: <event name>"`, "the trigger has no event")
		ok = false
	}
	if x, k := n.get("name"); k != nil {
		var named bool
		switch t.Name, named = p.str(x, path+".name"); {
		case !named:
			ok = false
		case strings.ContainsFunc(t.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			p.c.add(x, path+".name", "write the name on one line, without control characters", "the name %q holds a control character", t.Name)
			ok = false
		}
	} else {
		t.Name = t.Event
	}
	for _, f := range []struct {
		key string
		dst *string
		fix string
	}{
		{"filter", &t.Filter, `write a CEL expression over event that gives a boolean, such as "event.data.amount > 100"`},
		{"input", &t.Input, `write a CEL expression over event, such as '{"order": event.data.order}'`},
		{"business_key", &t.BusinessKey, `write a CEL expression over event that gives a string or a number, such as "event.data.order"`},
		{"concurrency_key", &t.ConcurrencyKey, `write a CEL expression over event that gives a string, such as '"tenant-" + event.data.tenant'`},
		{"key", &t.Key, `write a CEL expression over event that gives a string or a number, such as "event.data.tenant"`},
	} {
		x, k := n.get(f.key)
		if k == nil {
			continue
		}
		if x.kind != yaml.ScalarNode || x.tag != "!!str" || x.value == "" {
			p.c.add(x, path+"."+f.key, f.fix, "expected a CEL expression as a string, found %s", x.kindName())
			ok = false
			continue
		}
		probe := &store.Trigger{Name: triggerProbe, Event: triggerProbe, TargetKind: store.TargetDocument, TargetName: triggerProbe}
		switch f.key {
		case "filter":
			probe.Filter = x.value
		case "input":
			probe.Input = x.value
		case "business_key":
			probe.BusinessKey = x.value
		case "key":
			probe.Key, probe.Debounce = x.value, time.Second
		default:
			probe.ConcurrencyKey = x.value
		}
		if _, _, err := triggers.Compile(probe); err != nil {
			reason := triggerReason(err, fmt.Sprintf("%s %q: ", f.key, x.value))
			if r, cut := strings.CutPrefix(reason, "it gives "); cut {
				reason = "the " + f.key + " gives " + r
			}
			p.c.add(x, path+"."+f.key, f.fix, "%s", reason)
			ok = false
			continue
		}
		*f.dst = x.value
	}
	return t, p.flowControl(n, path, &t) && ok
}

// flowControl reads an entry's debounce, throttle and batch and checks
// them as the store does, pointing at the field at fault.
func (p *parser) flowControl(n *node, path string, t *Trigger) bool {
	ok := true
	var last *node
	lastPath := path
	if x, k := n.get("debounce"); k != nil {
		t.Debounce, ok = p.duration(x, path+".debounce")
		last, lastPath = x, path+".debounce"
	}
	pair := func(key, count, dur string, n1 *int, d *time.Duration) {
		x, k := n.get(key)
		if k == nil {
			return
		}
		last, lastPath = x, path+"."+key
		if !p.mapping(x, lastPath) {
			ok = false
			return
		}
		p.keys(x, lastPath, []string{count, dur})
		for _, f := range []string{count, dur} {
			if _, k := x.get(f); k == nil {
				p.c.add(x, lastPath+"."+f, fmt.Sprintf(`add "%s: ..."`, f), "the %s has no %s", key, f)
				ok = false
			}
		}
		if y, k := x.get(count); k != nil {
			var good bool
			*n1, good = p.integer(y, lastPath+"."+count)
			ok = ok && good
		}
		if y, k := x.get(dur); k != nil {
			var good bool
			*d, good = p.duration(y, lastPath+"."+dur)
			ok = ok && good
		}
	}
	pair("throttle", "limit", "period", &t.ThrottleLimit, &t.ThrottlePeriod)
	pair("batch", "size", "window", &t.BatchSize, &t.BatchWindow)
	if !ok {
		return false
	}
	probe := &store.Trigger{Name: triggerProbe, Event: triggerProbe, TargetKind: store.TargetDocument, TargetName: triggerProbe, Key: t.Key,
		Debounce: t.Debounce, ThrottleLimit: t.ThrottleLimit, ThrottlePeriod: t.ThrottlePeriod, BatchSize: t.BatchSize, BatchWindow: t.BatchWindow}
	if err := store.CheckTrigger(probe); err != nil {
		at := last
		if at == nil {
			at, _ = n.get("key")
			lastPath = path + ".key"
		}
		p.c.add(at, lastPath, "use at most one of debounce, throttle and batch, within the limits of docs/events.md", "%s", triggerReason(err, ""))
		return false
	}
	return true
}

// triggerReason is the reason of an error of triggers.Compile, without
// the prefixes that name the probe trigger and the expression (already
// named by the error's path).
func triggerReason(err error, expr string) string {
	s := err.Error()
	for _, prefix := range []string{hephtype.ErrInvalidInput.Error() + ": ", fmt.Sprintf("trigger %q: ", triggerProbe), hephtype.ErrInvalidInput.Error() + ": ", expr} {
		if prefix != "" {
			s = strings.TrimPrefix(s, prefix)
		}
	}
	return s
}
