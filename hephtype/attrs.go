package hephtype

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// AttrType is the type of a search attribute (docs/operations.md, Search
// attributes).
type AttrType string

// The types of search attributes.
const (
	// AttrString and AttrKeyword hold a string, compared as bytes.
	AttrString  AttrType = "string"
	AttrKeyword AttrType = "keyword"
	// AttrKeywordList holds a list of strings; a condition holds when an
	// element meets it (!=: when none equals).
	AttrKeywordList AttrType = "keyword_list"
	AttrInt         AttrType = "int"
	AttrFloat       AttrType = "float"
	AttrBool        AttrType = "bool"
	// AttrTime holds an instant, stored to the microsecond.
	AttrTime AttrType = "time"
)

// AttrTypes lists the types of search attributes.
var AttrTypes = []AttrType{AttrString, AttrKeyword, AttrKeywordList, AttrInt, AttrFloat, AttrBool, AttrTime}

// Valid reports whether t is one of AttrTypes.
func (t AttrType) Valid() bool { return slices.Contains(AttrTypes, t) }

// Ordered reports whether values of t compare with < <= > >=.
func (t AttrType) Ordered() bool { return t != AttrBool && t != AttrKeywordList }

// MaxAttrName bounds the name of a search attribute; MaxAttrs the number
// of attributes of a run; MaxAttrText the bytes of a string value (each
// element of a list).
const (
	MaxAttrName = 100
	MaxAttrs    = 100
	MaxAttrText = 1000
)

// CheckAttrName reports a name that cannot name a search attribute: empty,
// longer than MaxAttrName, or with other than ASCII letters, digits, _ and
// . (not first).
func CheckAttrName(name string) error {
	if name == "" || len(name) > MaxAttrName {
		return fmt.Errorf("search attribute name %q must have 1 to %d characters", name, MaxAttrName)
	}
	for i, c := range name {
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		later := c == '.' || (c >= '0' && c <= '9') // allowed after the first
		if !letter && (i == 0 || !later) {
			return fmt.Errorf("search attribute name %q: only letters, digits, _ and . (not first) are allowed", name)
		}
	}
	return nil
}

// AttrValue converts v (a Go value, or decoded from JSON with or without
// UseNumber) to the value of a search attribute of type t: a string
// (string, keyword), a []string (keyword_list, from a []string or a []any
// of strings), an int64 (from any integer or a whole number), a float64
// (from any number), a bool, or a time.Time (from a time.Time, or a string
// in RFC 3339 or a date). The error says what v is and what it is not.
func AttrValue(t AttrType, v any) (any, error) {
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			v = i
		} else if f, err := n.Float64(); err == nil {
			v = f
		}
	}
	switch t {
	case AttrString, AttrKeyword:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case AttrKeywordList:
		return listValue(v)
	case AttrInt:
		return intValue(v)
	case AttrFloat:
		return floatValue(v)
	case AttrBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case AttrTime:
		return timeValue(v)
	}
	return nil, fmt.Errorf("%v (%T) is not a %s", v, v, t)
}

func listValue(v any) (any, error) {
	switch l := v.(type) {
	case []string:
		return slices.Clone(l), nil
	case []any:
		out := make([]string, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("element %d, %v (%T), is not a string", i, e, e)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("%v (%T) is not a list of strings", v, v)
}

func intValue(v any) (any, error) {
	switch n := v.(type) {
	case int:
		return int64(n), nil
	case int8:
		return int64(n), nil
	case int16:
		return int64(n), nil
	case int32:
		return int64(n), nil
	case int64:
		return n, nil
	case uint8:
		return int64(n), nil
	case uint16:
		return int64(n), nil
	case uint32:
		return int64(n), nil
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), nil
		}
	}
	return nil, fmt.Errorf("%v (%T) is not an integer", v, v)
}

func floatValue(v any) (any, error) {
	switch n := v.(type) {
	case float64:
		return n, nil
	case float32:
		return float64(n), nil
	case int:
		return float64(n), nil
	case int64:
		return float64(n), nil
	case int32:
		return float64(n), nil
	}
	return nil, fmt.Errorf("%v (%T) is not a number", v, v)
}

func timeValue(v any) (any, error) {
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			t, err = time.Parse(time.DateOnly, x)
		}
		if err == nil {
			return t, nil
		}
	}
	return nil, fmt.Errorf("%v (%T) is not a time (RFC 3339 or a date)", v, v)
}

// CheckAttrValue reports a value that cannot be stored as a search
// attribute of type t: not of the type AttrValue converts to, a string
// longer than MaxAttrText, a number that is not finite.
func CheckAttrValue(t AttrType, value any) error {
	a := struct {
		Type  AttrType
		Value any
	}{t, value}
	ok := false
	switch v := a.Value.(type) {
	case string:
		ok = a.Type == AttrString || a.Type == AttrKeyword
		if ok && len(v) > MaxAttrText {
			return fmt.Errorf("%d bytes, more than %d", len(v), MaxAttrText)
		}
	case []string:
		ok = a.Type == AttrKeywordList
		for _, s := range v {
			if len(s) > MaxAttrText {
				return fmt.Errorf("an element of %d bytes, more than %d", len(s), MaxAttrText)
			}
		}
	case int64:
		ok = a.Type == AttrInt
	case float64:
		ok = a.Type == AttrFloat
		if ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
			return fmt.Errorf("%v is not a finite number", v)
		}
	case bool:
		ok = a.Type == AttrBool
	case time.Time:
		ok = a.Type == AttrTime
	}
	if !a.Type.Valid() {
		return fmt.Errorf("unknown type %q", a.Type)
	}
	if !ok {
		return fmt.Errorf("a %T is not a value of type %s", a.Value, a.Type)
	}
	return nil
}
