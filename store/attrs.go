package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/suggest"
)

// AttrType is the type of a search attribute (hephtype.AttrType).
type AttrType = hephtype.AttrType

// The types of search attributes.
const (
	AttrString      = hephtype.AttrString
	AttrKeyword     = hephtype.AttrKeyword
	AttrKeywordList = hephtype.AttrKeywordList
	AttrInt         = hephtype.AttrInt
	AttrFloat       = hephtype.AttrFloat
	AttrBool        = hephtype.AttrBool
	AttrTime        = hephtype.AttrTime
)

// Attr is the value of a search attribute: Value is a string (string,
// keyword), a []string (keyword_list), an int64, a float64 (finite), a
// bool, or a time.Time (UTC, to the microsecond), as Type says.
type Attr struct {
	Type  AttrType
	Value any
}

// MaxAttrName bounds the name of a search attribute; MaxAttrs the number
// of attributes of a run; MaxAttrText the bytes of a string value (each
// element of a list).
const (
	MaxAttrName = hephtype.MaxAttrName
	MaxAttrs    = hephtype.MaxAttrs
	MaxAttrText = hephtype.MaxAttrText
)

// CheckAttrName is hephtype.CheckAttrName.
func CheckAttrName(name string) error { return hephtype.CheckAttrName(name) }

// CheckAttrs reports an attribute of m that cannot be stored; the error
// names it and wraps hephtype.ErrInvalidInput.
func CheckAttrs(m map[string]Attr) error {
	if len(m) > MaxAttrs {
		return fmt.Errorf("%w: %d search attributes, more than %d", hephtype.ErrInvalidInput, len(m), MaxAttrs)
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if err := CheckAttrName(name); err != nil {
			return fmt.Errorf("%w: %w", hephtype.ErrInvalidInput, err)
		}
		if err := checkAttr(m[name]); err != nil {
			return fmt.Errorf("%w: search attribute %s: %w", hephtype.ErrInvalidInput, name, err)
		}
	}
	return nil
}

func checkAttr(a Attr) error { return hephtype.CheckAttrValue(a.Type, a.Value) }

// MergeAttrs returns the attributes of a run after an upsert: those of
// old, replaced and added to by those of upsert (nil when there are
// none). Neither map is changed.
func MergeAttrs(old, upsert map[string]Attr) map[string]Attr {
	if len(upsert) == 0 {
		return old
	}
	out := make(map[string]Attr, len(old)+len(upsert))
	maps.Copy(out, old)
	for k, a := range upsert {
		out[k] = normAttr(a)
	}
	return out
}

// CloneAttrs returns a copy of m that shares nothing that can change.
func CloneAttrs(m map[string]Attr) map[string]Attr {
	if m == nil {
		return nil
	}
	out := make(map[string]Attr, len(m))
	for k, a := range m {
		if l, ok := a.Value.([]string); ok {
			a.Value = slices.Clone(l)
		}
		out[k] = a
	}
	return out
}

// normAttr is a as stored: a time in UTC to the microsecond, a list
// copied.
func normAttr(a Attr) Attr {
	switch v := a.Value.(type) {
	case time.Time:
		a.Value = time.UnixMicro(v.UnixMicro()).UTC()
	case []string:
		a.Value = slices.Clone(v)
	}
	return a
}

// NormAttrs returns m as stored (see normAttr), nil when empty.
func NormAttrs(m map[string]Attr) map[string]Attr {
	if len(m) == 0 {
		return nil
	}
	return MergeAttrs(nil, m)
}

// storedAttr is the form of an attribute in the runs' search_attributes
// column: its type and value, a time as Unix microseconds. The stores'
// triggers copy it to the indexed table run_attributes.
type storedAttr struct {
	T AttrType        `json:"t"`
	V json.RawMessage `json:"v"`
}

// EncodeAttrs returns the search_attributes column of a run with the
// attributes m (nil: NULL, for none).
func EncodeAttrs(m map[string]Attr) (*string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]storedAttr, len(m))
	for k, a := range m {
		v := a.Value
		if t, ok := v.(time.Time); ok {
			v = t.UnixMicro()
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("search attribute %s: %w", k, err)
		}
		out[k] = storedAttr{T: a.Type, V: b}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// DecodeAttrs reads the search_attributes column of a run (nil or empty:
// none).
func DecodeAttrs(col []byte) (map[string]Attr, error) {
	if len(col) == 0 {
		return nil, nil
	}
	var in map[string]storedAttr
	if err := json.Unmarshal(col, &in); err != nil {
		return nil, fmt.Errorf("search attributes: %w", err)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make(map[string]Attr, len(in))
	for k, s := range in {
		v, err := decodeAttrValue(s.T, s.V)
		if err != nil {
			return nil, fmt.Errorf("search attribute %s: %w", k, err)
		}
		out[k] = Attr{Type: s.T, Value: v}
	}
	return out, nil
}

func decodeAttrValue(t AttrType, raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var err error
	switch t {
	case AttrString, AttrKeyword:
		var s string
		err = d.Decode(&s)
		return s, err
	case AttrKeywordList:
		var l []string
		err = d.Decode(&l)
		return l, err
	case AttrInt, AttrTime:
		var n json.Number
		if err = d.Decode(&n); err != nil {
			return nil, err
		}
		i, err := n.Int64()
		if t == AttrTime {
			return time.UnixMicro(i).UTC(), err
		}
		return i, err
	case AttrFloat:
		var f float64
		err = d.Decode(&f)
		return f, err
	case AttrBool:
		var b bool
		err = d.Decode(&b)
		return b, err
	}
	return nil, fmt.Errorf("unknown type %q", t)
}

// AttrOp is the operator of a condition on a search attribute.
type AttrOp string

// The operators of AttrCond.
const (
	OpEq AttrOp = "="
	OpNe AttrOp = "!="
	OpLt AttrOp = "<"
	OpLe AttrOp = "<="
	OpGt AttrOp = ">"
	OpGe AttrOp = ">="
	OpIn AttrOp = "in"
)

// AttrCond is a condition on a search attribute of a run: the run has the
// attribute Name with type Type and its value meets Op with Values (one
// value, or the list of in). Values hold the Go types of Attr.Value for
// Type (a string for the elements of a keyword_list). A run without the
// attribute, or with it under another type, meets no condition on it.
type AttrCond struct {
	Name   string
	Type   AttrType
	Op     AttrOp
	Values []any
}

// AttrFilter keeps the runs that meet every one of its conditions.
type AttrFilter []AttrCond

// MaxAttrConds bounds an AttrFilter; MaxAttrIn the values of one in.
const (
	MaxAttrConds = 20
	MaxAttrIn    = 100
)

// Check reports a filter that a store cannot run; the errors wrap
// hephtype.ErrInvalidInput.
func (f AttrFilter) Check() error {
	if len(f) > MaxAttrConds {
		return fmt.Errorf("%w: %d search attribute conditions, more than %d", hephtype.ErrInvalidInput, len(f), MaxAttrConds)
	}
	for i, c := range f {
		if err := c.check(); err != nil {
			return fmt.Errorf("%w: search attribute condition %d (%s): %w", hephtype.ErrInvalidInput, i+1, c.Name, err)
		}
	}
	return nil
}

func (c *AttrCond) check() error {
	if err := CheckAttrName(c.Name); err != nil {
		return err
	}
	if !c.Type.Valid() {
		return fmt.Errorf("unknown type %q", c.Type)
	}
	switch c.Op {
	case OpEq, OpNe:
	case OpLt, OpLe, OpGt, OpGe:
		if !c.Type.Ordered() {
			return fmt.Errorf("%s does not apply to type %s", c.Op, c.Type)
		}
	case OpIn:
		if len(c.Values) == 0 || len(c.Values) > MaxAttrIn {
			return fmt.Errorf("in needs 1 to %d values, got %d", MaxAttrIn, len(c.Values))
		}
	default:
		return fmt.Errorf("unknown operator %q", c.Op)
	}
	if c.Op != OpIn && len(c.Values) != 1 {
		return fmt.Errorf("%s needs one value, got %d", c.Op, len(c.Values))
	}
	et := c.Type
	if et == AttrKeywordList {
		et = AttrKeyword
	}
	for _, v := range c.Values {
		if err := checkAttr(Attr{Type: et, Value: v}); err != nil {
			return err
		}
	}
	return nil
}

// AttrColumn returns the column of run_attributes that holds values of
// type t (s: text, n: integer, f: float), and v as a value of that column:
// a time as Unix microseconds, a bool as 1 or 0.
func AttrColumn(t AttrType, v any) (string, any) {
	switch x := v.(type) {
	case time.Time:
		return "n", x.UnixMicro()
	case bool:
		if x {
			return "n", int64(1)
		}
		return "n", int64(0)
	case int64:
		return "n", x
	case float64:
		return "f", x
	}
	return "s", v
}

// Matches reports whether attributes m meet every condition of f: the
// filter as the stores run it, in memory.
func (f AttrFilter) Matches(m map[string]Attr) bool {
	for _, c := range f {
		if !c.matches(m) {
			return false
		}
	}
	return true
}

func (c *AttrCond) matches(m map[string]Attr) bool {
	a, ok := m[c.Name]
	if !ok || a.Type != c.Type {
		return false
	}
	vals := []any{a.Value}
	if l, ok := a.Value.([]string); ok {
		vals = make([]any, len(l))
		for i, s := range l {
			vals[i] = s
		}
		if c.Op == OpNe {
			for _, v := range vals {
				if compareAttr(v, c.Values[0]) == 0 {
					return false
				}
			}
			return true
		}
	}
	for _, v := range vals {
		if c.holds(v) {
			return true
		}
	}
	return false
}

func (c *AttrCond) holds(v any) bool {
	if c.Op == OpIn {
		for _, w := range c.Values {
			if compareAttr(v, w) == 0 {
				return true
			}
		}
		return false
	}
	n := compareAttr(v, c.Values[0])
	switch c.Op {
	case OpEq:
		return n == 0
	case OpNe:
		return n != 0
	case OpLt:
		return n < 0
	case OpLe:
		return n <= 0
	case OpGt:
		return n > 0
	}
	return n >= 0
}

// compareAttr compares two values of one type as the stores do.
func compareAttr(a, b any) int {
	_, x := AttrColumn("", a)
	_, y := AttrColumn("", b)
	switch x := x.(type) {
	case int64:
		y, _ := y.(int64)
		return cmpOrdered(x, y)
	case float64:
		y, _ := y.(float64)
		return cmpOrdered(x, y)
	case string:
		y, _ := y.(string)
		return strings.Compare(x, y)
	}
	return 0
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// AttrsOf converts values (as Go values or decoded from JSON) to the
// attributes that decl declares, by name: an int from any integer (a
// whole float64, a json.Number), a float from any number, a time from a
// time.Time or a string in RFC 3339 or a date, a keyword_list from a
// []string or a []any of strings. The error names the attribute (with a
// did-you-mean for a name not declared) and wraps
// hephtype.ErrInvalidInput.
func AttrsOf(decl map[string]AttrType, values map[string]any) (map[string]Attr, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := make(map[string]Attr, len(values))
	for _, name := range slices.Sorted(maps.Keys(values)) {
		t, ok := decl[name]
		if !ok {
			return nil, fmt.Errorf("%w: %s", hephtype.ErrInvalidInput, UndeclaredAttr(name, decl))
		}
		v, err := hephtype.AttrValue(t, values[name])
		if err != nil {
			return nil, fmt.Errorf("%w: search attribute %s (%s): %w", hephtype.ErrInvalidInput, name, t, err)
		}
		out[name] = normAttr(Attr{Type: t, Value: v})
	}
	return out, CheckAttrs(out)
}

// UndeclaredAttr is the message for a search attribute name that decl
// does not declare.
func UndeclaredAttr(name string, decl map[string]AttrType) string {
	msg := fmt.Sprintf("search attribute %q is not declared", name)
	if len(decl) == 0 {
		return msg + " (none is)"
	}
	return msg + suggest.DidYouMean(name, slices.Sorted(maps.Keys(decl)), true)
}
