package flowdoc

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
)

// Secrets in documents: {{secret.NAME}} reads a named secret (the client's
// SetSecret) when the step runs. Only an action that lists the argument
// (Action.secretArgs: the HTTP action's url and headers) accepts one, so
// the value goes into the request and nowhere else: the step's arguments
// are resolved in the process that runs the action and never stored, and
// what the action returns or fails with has the value replaced by
// [secret:NAME].

// secretUse is a secret a step's arguments read, with its value.
type secretUse struct {
	name, value string
}

// checkSecretRef refuses a secret reference outside the arguments an
// action accepts secrets in.
func checkSecretRef(c *errs, step string, a *Action, argsPath string, r refAt) {
	rel := strings.TrimPrefix(r.path, argsPath+".")
	if a != nil && !a.Remote && rel != r.path && slices.ContainsFunc(a.secretArgs, func(p string) bool {
		return rel == p || strings.HasPrefix(rel, p+".")
	}) {
		return
	}
	c.add(r.n, r.path, "pass a secret only in the url or a header of the HTTP action (flowdoc.RegisterHTTP)",
		"{{%s}}: step %q cannot read a secret in %s", r.r.text, step, r.path)
}

// redactString replaces each secret's value in s (as it is, and as URLs
// and JSON escape it) with [secret:NAME].
func (c *ActionCall) redactString(s string) string {
	for _, u := range c.secrets {
		mark := "[secret:" + u.name + "]"
		j, _ := json.Marshal(u.value)
		for _, form := range []string{u.value, url.QueryEscape(u.value), url.PathEscape(u.value), string(j[1 : len(j)-1])} {
			if form != "" {
				s = strings.ReplaceAll(s, form, mark)
			}
		}
	}
	return s
}

// redactJSON redacts the secrets of the call from every string (and key)
// of a JSON document.
func (c *ActionCall) redactJSON(b json.RawMessage) json.RawMessage {
	if len(c.secrets) == 0 {
		return b
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return json.RawMessage(c.redactString(string(b)))
	}
	out, err := json.Marshal(c.redactValue(v))
	if err != nil {
		return json.RawMessage(c.redactString(string(b)))
	}
	return out
}

func (c *ActionCall) redactValue(v any) any {
	switch x := v.(type) {
	case string:
		return c.redactString(x)
	case []any:
		for i := range x {
			x[i] = c.redactValue(x[i])
		}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[c.redactString(k)] = c.redactValue(e)
		}
		return m
	}
	return v
}

// redactError returns err with the secrets of the call redacted from its
// message; errors.Is and errors.As still see the original chain, whose
// HTTPStatusError and url.Error the HTTP action redacted in place.
func (c *ActionCall) redactError(err error) error {
	if err == nil || len(c.secrets) == 0 {
		return err
	}
	var se *HTTPStatusError
	if errors.As(err, &se) {
		se.URL, se.Body = c.redactString(se.URL), c.redactString(se.Body)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = c.redactString(ue.URL)
	}
	return &redactedError{msg: c.redactString(err.Error()), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
