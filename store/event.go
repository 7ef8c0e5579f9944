package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Limits of events, the same on every backend.
const (
	// MaxEventNameBytes bounds an event's name (1 to this many bytes).
	MaxEventNameBytes = 200
	// MaxEventIDBytes bounds an event's id (1 to this many bytes).
	MaxEventIDBytes = 200
	// MaxEventDataBytes bounds an event's data (its JSON text).
	MaxEventDataBytes = 1 << 20
	// MaxEventFieldDepth bounds the segments of ListEventsParams.Field.
	MaxEventFieldDepth = 8
	// MaxEventsPage bounds ListEventsParams.Limit; DefaultEventsPage is
	// its default.
	MaxEventsPage     = 1000
	DefaultEventsPage = 100
)

// ErrEventNotFound: no event has the given id.
var ErrEventNotFound = errors.New("event not found")

// Events keeps the events sent to the engine (migrations events): one row
// per event, by its id, in the order they were stored (Seq). An event is
// stored once: a second send with the same id changes nothing and returns
// the first. PruneRuns does not touch events; PruneEvents does.
type Events interface {
	// SendEvent stores p.Event (its Seq is set by the store) and returns
	// it with false, or, when an event with its ID is stored already,
	// returns the stored one and true and writes nothing. An invalid
	// event (CheckEvent) fails with an error wrapping
	// hephtype.ErrInvalidInput.
	SendEvent(ctx context.Context, p *SendEventParams) (*EventRecord, bool, error)
	// GetEvent returns an event by id, or ErrEventNotFound.
	GetEvent(ctx context.Context, id string) (*EventRecord, error)
	// ListEvents returns events newest (highest Seq) first, filtered, at
	// most p.Limit (DefaultEventsPage when 0, at most MaxEventsPage). A
	// bad filter fails with an error wrapping hephtype.ErrInvalidInput
	// that names the field.
	ListEvents(ctx context.Context, p *ListEventsParams) ([]*EventRecord, error)
	// PruneEvents deletes up to p.Limit (at most MaxEventsPage; 0 means
	// that) of the events stored before p.Before, oldest first, with
	// their firings, and up to p.Limit of the trigger groups that ended
	// (started, failed or skipped) before p.Before, with their events,
	// and up to p.Limit of the throttle windows that ended (their start
	// plus their trigger's throttle period) by p.Before, in one
	// transaction, and returns how many events it deleted. A window that
	// ended is never counted again (a join deletes its key's past windows
	// itself); pruning them bounds the table for keys that stop receiving
	// events.
	PruneEvents(ctx context.Context, p *PruneEventsParams) (int, error)
}

// EventRecord is a stored event.
type EventRecord struct {
	// ID identifies the event; a re-send with the same ID is a no-op.
	ID string
	// Name says what happened ("order.paid").
	Name string
	// Data is the event's payload: a JSON value, or nil.
	Data json.RawMessage
	// At is when the event was stored.
	At time.Time
	// Seq orders events as they were stored (assigned by SendEvent;
	// increasing, not necessarily dense). It is the cursor of
	// ListEventsParams.BeforeSeq.
	Seq int64
}

// SendEventParams are the parameters of SendEvent.
type SendEventParams struct {
	// Event is stored with At set to its At (the caller's clock).
	Event *EventRecord
}

// ListEventsParams filter ListEvents. Every set filter must hold.
type ListEventsParams struct {
	// Name, when set, is the event name.
	Name string
	// After and Before, when set, bound At: After <= At < Before.
	After, Before time.Time
	// BeforeSeq, when positive, lists only events with a lower Seq (the
	// cursor of the next page: the Seq of the last event of this one).
	BeforeSeq int64
	// Field, when set, is a path into Data: member names separated by
	// dots ("customer.id"), each 1 to 100 bytes of letters, digits, '_'
	// and '-', at most MaxEventFieldDepth of them. Only events whose
	// value at the path equals Value are listed.
	Field string
	// Value is a JSON scalar (a string, a number or a boolean), required
	// with Field. Numbers compare by value (1 equals 1.0).
	Value json.RawMessage
	Limit int
}

// PruneEventsParams are the parameters of PruneEvents.
type PruneEventsParams struct {
	Before time.Time
	Limit  int
}

// CheckEvent reports what is wrong with an event to be stored, naming the
// field; the error wraps hephtype.ErrInvalidInput.
func CheckEvent(e *EventRecord) error {
	if e == nil {
		return fmt.Errorf("%w: event: missing", hephtype.ErrInvalidInput)
	}
	if err := checkEventText("name", e.Name, MaxEventNameBytes); err != nil {
		return err
	}
	if err := checkEventText("id", e.ID, MaxEventIDBytes); err != nil {
		return err
	}
	if len(e.Data) > MaxEventDataBytes {
		return fmt.Errorf("%w: %w: event %q: data is %d bytes, over the limit of %d", hephtype.ErrInvalidInput, hephtype.ErrPayloadTooLarge, e.Name, len(e.Data), MaxEventDataBytes)
	}
	if len(e.Data) > 0 && !json.Valid(e.Data) {
		return fmt.Errorf("%w: event %q: data is not valid JSON", hephtype.ErrInvalidInput, e.Name)
	}
	if e.At.IsZero() {
		return fmt.Errorf("%w: event %q: at is not set", hephtype.ErrInvalidInput, e.Name)
	}
	return nil
}

func checkEventText(field, s string, max int) error {
	switch {
	case s == "" || len(s) > max:
		return fmt.Errorf("%w: event %s must be 1 to %d bytes long (it is %d)", hephtype.ErrInvalidInput, field, max, len(s))
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: event %s is not valid UTF-8", hephtype.ErrInvalidInput, field)
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("%w: event %s %q holds a control character", hephtype.ErrInvalidInput, field, s)
	}
	return nil
}

// EventField is a checked ListEventsParams.Field and Value: the path's
// segments and the value as JSON (Kind "string", "number" or "bool"; Text
// the string's contents, the number as written, or "true"/"false").
type EventField struct {
	Path []string
	Kind string
	Text string
	// Number is the number's value (Kind "number").
	Number float64
}

// CheckEventField checks p.Field and p.Value, and returns them parsed, or
// nil when no field is set. The error wraps hephtype.ErrInvalidInput and
// names the parameter.
func CheckEventField(p *ListEventsParams) (*EventField, error) {
	if p.Field == "" {
		if len(p.Value) > 0 {
			return nil, fmt.Errorf("%w: events filter: value is set without field", hephtype.ErrInvalidInput)
		}
		return nil, nil
	}
	path := strings.Split(p.Field, ".")
	if len(path) > MaxEventFieldDepth {
		return nil, fmt.Errorf("%w: events filter: field %q has %d segments (at most %d)", hephtype.ErrInvalidInput, p.Field, len(path), MaxEventFieldDepth)
	}
	for i, seg := range path {
		if seg == "" || len(seg) > 100 || strings.ContainsFunc(seg, func(r rune) bool {
			return r != '_' && r != '-' && (r < '0' || r > '9') && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z')
		}) {
			return nil, fmt.Errorf("%w: events filter: field %q: segment %d must be 1 to 100 letters, digits, '_' or '-'", hephtype.ErrInvalidInput, p.Field, i+1)
		}
	}
	f := &EventField{Path: path}
	d := json.NewDecoder(bytes.NewReader(p.Value))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return nil, fmt.Errorf("%w: events filter: value %q is not a JSON scalar (a string, a number or true/false)", hephtype.ErrInvalidInput, p.Value)
	}
	switch x := v.(type) {
	case string:
		f.Kind, f.Text = "string", x
	case bool:
		f.Kind, f.Text = "bool", fmt.Sprint(x)
	case json.Number:
		n, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("%w: events filter: value %s is out of range", hephtype.ErrInvalidInput, x)
		}
		f.Kind, f.Text, f.Number = "number", x.String(), n
	default:
		return nil, fmt.Errorf("%w: events filter: value %s is not a JSON scalar (a string, a number or true/false)", hephtype.ErrInvalidInput, p.Value)
	}
	return f, nil
}

// EventsLimit is p.Limit with its default and bound applied.
func EventsLimit(n int) int {
	if n <= 0 {
		return DefaultEventsPage
	}
	return min(n, MaxEventsPage)
}
