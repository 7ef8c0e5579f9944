// Package attrfilter parses the filter language over search attributes
// (docs/operations.md, Search attributes) into a store.AttrFilter:
//
//	filter = cond { "and" cond }
//	cond   = name op value | name "in" "[" value { "," value } "]"
//	       | name "between" value "and" value
//	op     = "=" | "!=" | "<" | "<=" | ">" | ">="
//	value  = word | '"' JSON string text '"'
//
// Keywords (and, in, between, true, false) ignore case. A value is read
// as the declared type of its attribute: an int, a float, true or false,
// a time in RFC 3339 or a date (2006-01-02, midnight UTC), or a string
// (keyword_list: an element). A word runs up to a space, a comma, a
// bracket, a quote or an operator character.
//
// The package is a pure core: no I/O, no clock.
package attrfilter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/suggest"
	"github.com/hephaestus-go/hephaestus/store"
)

// MaxLen bounds the text of a filter.
const MaxLen = 4000

// Error is a filter that cannot be read: Pos is the byte offset (from 1)
// where it goes wrong.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("filter: at %d: %s", e.Pos, e.Msg) }

// Parse reads text as a filter over the attributes that types declares
// (name to type). An empty text is an empty filter. The error is an
// *Error.
func Parse(text string, types map[string]store.AttrType) (store.AttrFilter, error) {
	if len(text) > MaxLen {
		return nil, &Error{Pos: MaxLen + 1, Msg: fmt.Sprintf("the filter is longer than %d bytes", MaxLen)}
	}
	p := &parser{lex: lexer{src: text}, types: types}
	p.next()
	if p.tok.kind == tEOF {
		return nil, nil
	}
	var f store.AttrFilter
	for {
		if err := p.cond(&f); err != nil {
			return nil, err
		}
		if p.tok.kind == tEOF {
			break
		}
		if !p.keyword("and") {
			return nil, p.expected("and or the end of the filter")
		}
		p.next()
	}
	if len(f) > store.MaxAttrConds {
		return nil, &Error{Pos: 1, Msg: fmt.Sprintf("%d conditions, more than %d", len(f), store.MaxAttrConds)}
	}
	return f, nil
}

type parser struct {
	lex   lexer
	tok   token
	types map[string]store.AttrType
}

func (p *parser) next() { p.tok = p.lex.next() }

func (p *parser) keyword(k string) bool {
	return p.tok.kind == tWord && strings.EqualFold(p.tok.text, k)
}

func (p *parser) expected(what string) *Error {
	return &Error{Pos: p.tok.pos, Msg: "expected " + what + ", found " + p.tok.describe()}
}

// cond reads one condition (two for between) into f.
func (p *parser) cond(f *store.AttrFilter) error {
	if p.tok.kind != tWord {
		return p.expected("an attribute name")
	}
	name, pos := p.tok.text, p.tok.pos
	t, ok := p.types[name]
	if !ok {
		return &Error{Pos: pos, Msg: unknown(name, p.types)}
	}
	p.next()
	switch {
	case p.tok.kind == tOp:
		op := store.AttrOp(p.tok.text)
		if !t.Ordered() && op != store.OpEq && op != store.OpNe {
			return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("%s does not apply to %s, of type %s", op, name, t)}
		}
		p.next()
		v, err := p.value(name, t)
		if err != nil {
			return err
		}
		*f = append(*f, store.AttrCond{Name: name, Type: t, Op: op, Values: []any{v}})
	case p.keyword("in"):
		p.next()
		vals, err := p.list(name, t)
		if err != nil {
			return err
		}
		*f = append(*f, store.AttrCond{Name: name, Type: t, Op: store.OpIn, Values: vals})
	case p.keyword("between"):
		if !t.Ordered() {
			return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("between does not apply to %s, of type %s", name, t)}
		}
		return p.between(f, name, t)
	default:
		return p.expected("an operator (= != < <= > >=), in or between after " + name)
	}
	return nil
}

func (p *parser) between(f *store.AttrFilter, name string, t store.AttrType) error {
	p.next()
	lo, err := p.value(name, t)
	if err != nil {
		return err
	}
	if !p.keyword("and") {
		return p.expected("and in between")
	}
	p.next()
	hi, err := p.value(name, t)
	if err != nil {
		return err
	}
	*f = append(*f, store.AttrCond{Name: name, Type: t, Op: store.OpGe, Values: []any{lo}},
		store.AttrCond{Name: name, Type: t, Op: store.OpLe, Values: []any{hi}})
	return nil
}

func (p *parser) list(name string, t store.AttrType) ([]any, error) {
	if p.tok.kind != tOpen {
		return nil, p.expected("[")
	}
	p.next()
	var vals []any
	for {
		v, err := p.value(name, t)
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		if len(vals) > store.MaxAttrIn {
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("more than %d values in the list of %s", store.MaxAttrIn, name)}
		}
		switch p.tok.kind {
		case tComma:
			p.next()
		case tClose:
			p.next()
			return vals, nil
		default:
			return nil, p.expected(", or ]")
		}
	}
}

// value reads a value of attribute name, of type t.
func (p *parser) value(name string, t store.AttrType) (any, error) {
	tok := p.tok
	if tok.kind != tWord && tok.kind != tString {
		return nil, p.expected("a value of " + name + " (" + string(t) + ")")
	}
	if tok.err != "" {
		return nil, &Error{Pos: tok.pos, Msg: tok.err}
	}
	v, err := convert(tok.text, tok.kind == tString, t)
	if err != nil {
		return nil, &Error{Pos: tok.pos, Msg: fmt.Sprintf("%s is of type %s: %v", name, t, err)}
	}
	p.next()
	return v, nil
}

// convert reads text as a value of type t.
func convert(text string, quoted bool, t store.AttrType) (any, error) {
	if quoted && t != store.AttrString && t != store.AttrKeyword && t != store.AttrKeywordList {
		return nil, fmt.Errorf("%q is a quoted string", text)
	}
	switch t {
	case store.AttrInt:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", text)
		}
		return n, nil
	case store.AttrFloat:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil || x != x || x > 1e308 || x < -1e308 {
			return nil, fmt.Errorf("%q is not a finite number", text)
		}
		return x, nil
	case store.AttrBool:
		switch strings.ToLower(text) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("%q is not true or false", text)
	case store.AttrTime:
		return ParseTime(text)
	}
	if len(text) > store.MaxAttrText {
		return nil, fmt.Errorf("%d bytes, more than %d", len(text), store.MaxAttrText)
	}
	return text, nil
}

// ParseTime reads a time in RFC 3339 (with or without fractions) or a date
// (midnight UTC), as the stores keep it: UTC, to the microsecond.
func ParseTime(text string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		t, err = time.Parse(time.DateOnly, text)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a time in RFC 3339 (2026-11-01T10:00:00Z) or a date (2026-11-01)", text)
	}
	return time.UnixMicro(t.UnixMicro()).UTC(), nil
}

// unknown is the message for an attribute that is not declared.
func unknown(name string, types map[string]store.AttrType) string {
	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	slices.Sort(names)
	msg := fmt.Sprintf("unknown search attribute %q", name)
	if len(names) == 0 {
		return msg + ": no search attribute is declared"
	}
	return msg + suggest.DidYouMean(name, names, true)
}
