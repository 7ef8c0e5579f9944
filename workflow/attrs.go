package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/suggest"
)

// SearchAttribute declares a search attribute of the workflow's runs
// (docs/operations.md, Search attributes): set at start
// (hephaestus.WorkflowOptions.SearchAttributes), upserted by workflow code
// (UpsertSearchAttributes) and by its activities
// (UpsertActivitySearchAttributes), filtered in lists
// (hephaestus.ListOptions.Where). A name that is not declared, or a value
// not of its type, is refused where it is set. It returns d, and panics on
// a bad name or type: definitions are made at program start. Declaring a
// name again keeps the last type.
func (d *Definition[In, Out]) SearchAttribute(name string, t flow.AttrType) *Definition[In, Out] {
	if err := hephtype.CheckAttrName(name); err != nil {
		panic("workflow.SearchAttribute: " + err.Error())
	}
	if !t.Valid() {
		panic(fmt.Sprintf("workflow.SearchAttribute: search attribute %s: unknown type %q (one of %v)", name, t, hephtype.AttrTypes))
	}
	if d.attrs == nil {
		d.attrs = map[string]flow.AttrType{}
	}
	d.attrs[name] = t
	return d
}

// SearchAttributes returns the search attributes the workflow declares,
// by name.
func (d *Definition[In, Out]) SearchAttributes() map[string]flow.AttrType { return maps.Clone(d.attrs) }

// UpsertSearchAttributes sets search attributes of the run from workflow
// code: each replaces the attribute of that name, the others stay. It is
// replay-safe: the history records the upsert as a command
// (search_attributes_upserted), written and applied to the run in the
// same transaction as the decision that issues it, and on replay the
// recorded entry stands for it (applied once, whatever replays). A
// name the workflow does not declare (Definition.SearchAttribute), or a
// value not of its type, is an error and upserts nothing. Values convert
// as for starts: an int from any whole number, a time from a time.Time or
// an RFC 3339 string, a keyword_list from a []string.
func UpsertSearchAttributes(ctx Context, attrs map[string]any) error {
	u := unitOf(ctx)
	if len(attrs) == 0 {
		return nil
	}
	raw, err := encodeAttrs("workflow "+u.Info().Workflow, u.DeclaredAttributes(), attrs)
	if err != nil {
		return err
	}
	u.UpsertAttributes(raw)
	return nil
}

// storedAttr is an attribute in the form the runs' search_attributes
// column stores it (store.DecodeAttrs reads it): its type and value, a
// time as Unix microseconds.
type storedAttr struct {
	T hephtype.AttrType `json:"t"`
	V any               `json:"v"`
}

// encodeAttrs checks values against decl and encodes them as the runs
// table stores them. The error names the attribute and who declares
// them (owner).
func encodeAttrs(owner string, decl map[string]hephtype.AttrType, values map[string]any) (json.RawMessage, error) {
	if len(values) > hephtype.MaxAttrs {
		return nil, fmt.Errorf("%w: %d search attributes, more than %d", hephtype.ErrInvalidInput, len(values), hephtype.MaxAttrs)
	}
	out := make(map[string]storedAttr, len(values))
	for _, name := range slices.Sorted(maps.Keys(values)) {
		t, ok := decl[name]
		if !ok {
			msg := fmt.Sprintf("search attribute %q is not declared by %s", name, owner)
			if len(decl) == 0 {
				msg += " (it declares none: Definition.SearchAttribute)"
			} else {
				msg += suggest.DidYouMean(name, slices.Sorted(maps.Keys(decl)), true)
			}
			return nil, fmt.Errorf("%w: %s", hephtype.ErrInvalidInput, msg)
		}
		v, err := hephtype.AttrValue(t, values[name])
		if err != nil {
			return nil, fmt.Errorf("%w: search attribute %s (%s): %w", hephtype.ErrInvalidInput, name, t, err)
		}
		if err := hephtype.CheckAttrValue(t, v); err != nil {
			return nil, fmt.Errorf("%w: search attribute %s: %w", hephtype.ErrInvalidInput, name, err)
		}
		if tm, ok := v.(time.Time); ok {
			v = tm.UnixMicro()
		}
		out[name] = storedAttr{T: t, V: v}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%w: search attributes: %w", hephtype.ErrInvalidInput, err)
	}
	return b, nil
}

// UpsertActivitySearchAttributes sets search attributes of the run from
// activity code: they are checked against the workflow's declaration
// (Definition.SearchAttribute) at once, and written with the attempt's
// result, in the commit that records it, so an attempt that fails, or
// whose result is refused (its lease lost), sets none, and a retried
// commit sets them once. A later call replaces the value of a name an
// earlier one set. Outside activity code it is an error.
func UpsertActivitySearchAttributes(ctx context.Context, attrs map[string]any) error {
	i, ok := replay.ActivityInfoFrom(ctx)
	if !ok || i.Upsert == nil {
		return errors.New("workflow.UpsertActivitySearchAttributes: not called from activity code")
	}
	if len(attrs) == 0 {
		return nil
	}
	return i.Upsert(attrs)
}
