package hephtype

import (
	"fmt"
	"slices"
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

// MaxAttrName bounds the name of a search attribute.
const MaxAttrName = 100

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
