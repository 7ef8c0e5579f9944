package flowdoc

import (
	"errors"
	"fmt"
	"sort"
)

// Error is one problem in a document: where it is (the document's name,
// line and column, and the path of the offending value, such as
// "steps.summarize.next"), what is wrong and how to fix it. Parse and
// Compile report every problem at once, joined with errors.Join; use
// Errors to inspect them.
type Error struct {
	Doc    string
	Line   int
	Column int
	// Path is the dotted path of the offending value in the document.
	Path string
	// Message says what is wrong.
	Message string
	// Fix says how to fix it.
	Fix string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s:%d:%d: %s: %s", e.Doc, e.Line, e.Column, e.Path, e.Message)
	if e.Fix != "" {
		s += "; fix: " + e.Fix
	}
	return s
}

// Errors returns every *Error inside err, in document order.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		var e *Error
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		if errors.As(err, &e) {
			out = append(out, e)
		}
	}
	walk(err)
	return out
}

// errs collects a document's problems.
type errs struct {
	doc  string
	list []*Error
}

func (c *errs) add(n *node, path, fix, format string, args ...any) {
	line, col := 1, 1
	if n != nil {
		line, col = n.line, n.col
	}
	c.list = append(c.list, &Error{Doc: c.doc, Line: line, Column: col, Path: path, Message: fmt.Sprintf(format, args...), Fix: fix})
}

func (c *errs) err() error {
	if len(c.list) == 0 {
		return nil
	}
	sort.SliceStable(c.list, func(i, j int) bool {
		a, b := c.list[i], c.list[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	out := make([]error, len(c.list))
	for i, e := range c.list {
		out[i] = e
	}
	return errors.Join(out...)
}
