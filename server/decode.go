package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// decode reads the request's JSON body strictly into v: an unknown field,
// a value of the wrong type, malformed JSON or data after the value is a
// 400 problem that names the field (and the expected type); a body above
// Config.MaxBodyBytes is 413. An empty body is allowed when optional
// (v keeps its zero value), and a 400 otherwise.
func (c *call) decode(v any, optional bool) error {
	return decodeBody(c.r.Body, v, optional)
}

func decodeBody(body io.Reader, v any, optional bool) error {
	if body == nil {
		body = http.NoBody
	}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) {
		if optional {
			return nil
		}
		return badRequest("the request needs a JSON object as its body")
	}
	if err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return decodeError(err)
		}
		return badRequest("the body holds more than one JSON value")
	}
	return nil
}

// decodeError turns a JSON decoding error into its problem.
func decodeError(err error) error {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return &Problem{Status: http.StatusRequestEntityTooLarge, Kind: kindTooLarge, Detail: fmt.Sprintf("the request body is larger than %d bytes", mb.Limit)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return badRequest(fmt.Sprintf("the body is not valid JSON: %s (at byte %d)", se.Error(), se.Offset))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return badRequest("the body is not valid JSON: it ends too early")
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the body"
		}
		p := badRequest(fmt.Sprintf("%s: expected %s, got %s", field, jsonType(te.Type), te.Value))
		p.Errors = []FieldError{{Path: te.Field, Message: fmt.Sprintf("expected %s, got %s", jsonType(te.Type), te.Value)}}
		return p
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		p := badRequest(fmt.Sprintf("unknown field %q", name))
		p.Errors = []FieldError{{Path: name, Message: "unknown field"}}
		return p
	}
	return badRequest("the body does not decode: " + err.Error())
}

// jsonType names, for people, the JSON a Go type decodes from.
func jsonType(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	switch t {
	case reflect.TypeFor[duration]():
		return `a duration string such as "30s"`
	case reflect.TypeFor[timestamp]():
		return "an RFC 3339 time string"
	case reflect.TypeFor[json.RawMessage]():
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonType(t.Elem())
	}
	return "a JSON value"
}

// duration is a Go duration string in JSON ("30s", "1h30m").
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[duration]()}
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return &json.UnmarshalTypeError{Value: strconv.Quote(s), Type: reflect.TypeFor[duration]()}
	}
	*d = duration(v)
	return nil
}

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// timestamp is an RFC 3339 time in JSON.
type timestamp time.Time

func (t *timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: jsonKind(b), Type: reflect.TypeFor[timestamp]()}
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: strconv.Quote(s), Type: reflect.TypeFor[timestamp]()}
	}
	*t = timestamp(v)
	return nil
}

// jsonKind names the kind of a JSON value, as json.UnmarshalTypeError's
// Value does.
func jsonKind(b []byte) string {
	switch s := strings.TrimSpace(string(b)); {
	case s == "null":
		return "null"
	case s == "true" || s == "false":
		return "bool"
	case strings.HasPrefix(s, `"`):
		return "string"
	case strings.HasPrefix(s, "{"):
		return "object"
	case strings.HasPrefix(s, "["):
		return "array"
	}
	return "number"
}

// checkParams refuses, with a 400 problem that names the parameter, a
// query string that does not decode, and a query or path parameter that
// is not UTF-8 or holds a NUL byte, which no store keeps: every route
// runs it before its handler, so a handler sees only decodable text.
func checkParams(r *http.Request, pattern string) error {
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest("the query string does not decode: " + err.Error())
	}
	for _, name := range slices.Sorted(maps.Keys(vals)) {
		if !plainText(name) {
			return paramProblem("query parameter", strconv.Quote(name), "the name is not UTF-8 text without NUL bytes")
		}
		for _, v := range vals[name] {
			if !plainText(v) {
				return paramProblem("query parameter", name, fmt.Sprintf("%q is not UTF-8 text without NUL bytes", v))
			}
		}
	}
	for rest := pattern; ; {
		_, after, ok := strings.Cut(rest, "{")
		if !ok {
			return nil
		}
		name, tail, _ := strings.Cut(after, "}")
		name = strings.TrimSuffix(name, "...")
		if v := r.PathValue(name); !plainText(v) {
			return paramProblem("path parameter", name, fmt.Sprintf("%q is not UTF-8 text without NUL bytes", v))
		}
		rest = tail
	}
}

func plainText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

func paramProblem(what, name, msg string) *Problem {
	p := badRequest(fmt.Sprintf("%s %s: %s", what, name, msg))
	p.Errors = []FieldError{{Path: name, Message: msg}}
	return p
}

// query reads the parameters of a request's query string, collecting
// the first error: call err() after reading them all.
type query struct {
	v     url.Values
	first error
}

func (c *call) query() *query { return &query{v: c.r.URL.Query()} }

func (q *query) fail(name, format string, args ...any) {
	q.failFix(name, "", format, args...)
}

// failFix is fail with a fix: what to pass instead (Problem.Fix, which
// ends the detail too).
func (q *query) failFix(name, fix, format string, args ...any) {
	if q.first == nil {
		p := badRequest(fmt.Sprintf("query parameter %s: %s", name, fmt.Sprintf(format, args...)))
		p.Errors = []FieldError{{Path: name, Message: fmt.Sprintf(format, args...)}}
		q.first = p
		if fix != "" {
			q.first = withFix(p, fix)
		}
	}
}

func (q *query) err() error { return q.first }

// str returns a parameter's value ("" when absent).
func (q *query) str(name string) string { return q.v.Get(name) }

// list returns a parameter's values, repeated or comma-separated.
func (q *query) list(name string) []string {
	var out []string
	for _, v := range q.v[name] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// integer returns an integer parameter in [lo, hi], def when absent.
func (q *query) integer(name string, def, lo, hi int) int {
	s := q.v.Get(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		q.failFix(name, fmt.Sprintf("pass a whole number from %d to %d", lo, hi), "expected an integer, got %q", s)
		return def
	}
	if n < lo || n > hi {
		q.failFix(name, fmt.Sprintf("pass a whole number from %d to %d", lo, hi), "%d is out of range", n)
		return def
	}
	return n
}

// dur returns a duration parameter, at most hi; zero when absent.
func (q *query) dur(name string, hi time.Duration) time.Duration {
	s := q.v.Get(name)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		q.failFix(name, `pass a duration such as "30s" or "5m"`, "expected a duration, got %q", s)
		return 0
	}
	return min(d, hi)
}

// time returns an RFC 3339 time parameter; zero when absent.
func (q *query) time(name string) time.Time {
	s := q.v.Get(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		q.failFix(name, `pass an RFC 3339 time such as "2026-01-02T15:04:05Z"`, "expected an RFC 3339 time, got %q", s)
		return time.Time{}
	}
	return t
}

// int64 returns a non-negative integer parameter; 0 when absent.
func (q *query) int64(name string) int64 {
	s := q.v.Get(name)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		q.failFix(name, "pass a whole number, 0 or more", "expected a non-negative integer, got %q", s)
		return 0
	}
	return n
}
