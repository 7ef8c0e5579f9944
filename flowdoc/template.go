package flowdoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/secrets"
	"github.com/hephaestus-go/hephaestus/store"
)

// MaxTemplateOutput bounds the resolved arguments of one step, in bytes.
const MaxTemplateOutput = 256 << 10

// ref is a parsed template reference such as steps.search.output.id: a
// root (input, steps, run, item or secret), the step for steps, and a
// field path (the secret's name for secret).
type ref struct {
	text   string // the reference as written, without braces
	root   string
	step   string
	fields []string
}

// template is a string argument with {{...}} references.
type template struct {
	parts []tplPart // literal text and references, in order
	whole bool      // the string is exactly one reference
}

type tplPart struct {
	lit string
	ref *ref
}

// TemplateError reports a template that cannot be resolved when the step
// runs. It is NonRetryable: the same run resolves it the same way again.
type TemplateError struct {
	Step     string
	Template string
	Reason   string
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("step %q: template {{%s}}: %s", e.Step, e.Template, e.Reason)
}

// parseTemplate parses the {{...}} references of s; a string without one
// gives nil.
func parseTemplate(s string) (*template, error) {
	if !strings.Contains(s, "{{") && !strings.Contains(s, "}}") {
		return nil, nil
	}
	t := &template{}
	rest := s
	for rest != "" {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if strings.Contains(rest, "}}") {
				return nil, fmt.Errorf("%q has a closing }} without an opening {{", s)
			}
			t.parts = append(t.parts, tplPart{lit: rest})
			break
		}
		if strings.Contains(rest[:i], "}}") {
			return nil, fmt.Errorf("%q has a closing }} without an opening {{", s)
		}
		if i > 0 {
			t.parts = append(t.parts, tplPart{lit: rest[:i]})
		}
		rest = rest[i+2:]
		j := strings.Index(rest, "}}")
		if j < 0 {
			return nil, fmt.Errorf("%q has an opening {{ without a closing }}", s)
		}
		r, err := parseRef(strings.TrimSpace(rest[:j]))
		if err != nil {
			return nil, err
		}
		t.parts = append(t.parts, tplPart{ref: r})
		rest = rest[j+2:]
	}
	t.whole = len(t.parts) == 1 && t.parts[0].ref != nil
	return t, nil
}

func parseRef(s string) (*ref, error) {
	segs := strings.Split(s, ".")
	for _, g := range segs {
		if g == "" || strings.ContainsAny(g, " \t{}\"'[]()") {
			return nil, fmt.Errorf("{{%s}} is not a reference; write input.<field>, steps.<step>.output.<field>, run.<field>, item.<field> or secret.<name>", s)
		}
	}
	r := &ref{text: s, root: segs[0]}
	switch r.root {
	case "input", "item":
		r.fields = segs[1:]
	case "run":
		if len(segs) != 2 {
			return nil, fmt.Errorf("{{%s}}: write run.id, run.step, run.attempt, run.created_by or run.on_behalf_of", s)
		}
		switch segs[1] {
		case "id", "step", "attempt", "created_by", "on_behalf_of":
		default:
			return nil, fmt.Errorf("{{%s}}: run has no field %q; write run.id, run.step, run.attempt, run.created_by or run.on_behalf_of", s, segs[1])
		}
		r.fields = segs[1:]
	case "steps":
		if len(segs) < 3 || segs[2] != "output" {
			return nil, fmt.Errorf("{{%s}}: write steps.<step>.output, optionally followed by .<field>", s)
		}
		r.step = segs[1]
		r.fields = segs[3:]
	case "secret":
		if len(segs) != 2 {
			return nil, fmt.Errorf("{{%s}}: write secret.<name>", s)
		}
		if store.CheckSecretName(segs[1]) != nil {
			return nil, fmt.Errorf("{{%s}}: %q is not a secret name: write 1 to %d letters, digits, '_' and '-', starting with a letter or '_'", s, segs[1], store.MaxSecretName)
		}
		r.fields = segs[1:]
	default:
		return nil, fmt.Errorf("{{%s}}: a reference starts with input, steps, run, item or secret", s)
	}
	return r, nil
}

// scope holds the values templates and conditions read while a step runs.
type scope struct {
	step  string
	input any
	steps map[string]any // step name -> output, for the steps read
	run   map[string]any
	item  any
	isMap bool
	// secret returns the value of a secret, which the scope then
	// redacts from what the action returns (nil: none is readable).
	secret func(name string) (string, error)
}

func (sc *scope) lookup(r *ref) (any, error) {
	var v any
	switch r.root {
	case "input":
		v = sc.input
	case "item":
		if !sc.isMap {
			return nil, &TemplateError{Step: sc.step, Template: r.text, Reason: "item exists only in map steps"}
		}
		v = sc.item
	case "run":
		return sc.run[r.fields[0]], nil
	case "secret":
		return sc.lookupSecret(r)
	case "steps":
		out, ok := sc.steps[r.step]
		if !ok {
			return nil, &TemplateError{Step: sc.step, Template: r.text, Reason: fmt.Sprintf("step %q has no output in this run (its path was not taken)", r.step)}
		}
		v = out
	}
	for i, f := range r.fields {
		switch x := v.(type) {
		case map[string]any:
			nv, ok := x[f]
			if !ok {
				return nil, &TemplateError{Step: sc.step, Template: r.text, Reason: fmt.Sprintf("no field %q at %s", f, strings.Join(append([]string{r.root}, r.fields[:i]...), "."))}
			}
			v = nv
		case []any:
			n, err := strconv.Atoi(f)
			if err != nil || n < 0 || n >= len(x) {
				return nil, &TemplateError{Step: sc.step, Template: r.text, Reason: fmt.Sprintf("%q is not an index of a list of %d elements", f, len(x))}
			}
			v = x[n]
		default:
			return nil, &TemplateError{Step: sc.step, Template: r.text, Reason: fmt.Sprintf("cannot read field %q of a %s", f, jsonKind(v))}
		}
	}
	return v, nil
}

// lookupSecret resolves {{secret.NAME}}: a secret that is not stored, or
// cannot be opened, fails the step without retries (a TemplateError); a
// store that cannot be read is retried.
func (sc *scope) lookupSecret(r *ref) (any, error) {
	name := r.fields[0]
	if sc.secret == nil {
		return nil, &TemplateError{Step: sc.step, Template: r.text, Reason: "secrets are readable only when the step runs"}
	}
	v, err := sc.secret(name)
	switch {
	case errors.Is(err, store.ErrSecretNotFound):
		return nil, &TemplateError{Step: sc.step, Template: r.text, Reason: fmt.Sprintf("secret %q is not stored: set it with heph secrets set %s", name, name)}
	case errors.Is(err, secrets.ErrUnavailable), errors.Is(err, secrets.ErrUnknownKey), errors.Is(err, secrets.ErrCorrupt), errors.Is(err, hephtype.ErrInvalidInput):
		return nil, &TemplateError{Step: sc.step, Template: r.text, Reason: err.Error()}
	case err != nil:
		return nil, fmt.Errorf("step %q: read secret %q: %w", sc.step, name, err)
	}
	return v, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, int64, json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	}
	return "object"
}

// render resolves t: a whole template keeps its JSON type; otherwise the
// references interpolate into the string (strings as they are, other
// values as JSON).
func (t *template) render(sc *scope) (any, error) {
	if t.whole {
		return sc.lookup(t.parts[0].ref)
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.ref == nil {
			b.WriteString(p.lit)
			continue
		}
		v, err := sc.lookup(p.ref)
		if err != nil {
			return nil, err
		}
		if s, ok := v.(string); ok {
			b.WriteString(s)
		} else {
			j, _ := json.Marshal(v)
			b.Write(j)
		}
		if b.Len() > MaxTemplateOutput {
			return nil, &TemplateError{Step: sc.step, Template: p.ref.text, Reason: fmt.Sprintf("the text grows beyond %d bytes", MaxTemplateOutput)}
		}
	}
	return b.String(), nil
}

// value is an argument value: literal JSON with templates inside strings.
type value struct {
	lit  any
	tpl  *template
	list []*value
	obj  map[string]*value
	keys []string
}

func compileValue(n *node, path string, c *errs, refs *[]refAt) *value {
	switch n.kind {
	case yaml.MappingNode:
		v := &value{obj: map[string]*value{}}
		for i, k := range n.keys {
			v.keys = append(v.keys, k.value)
			v.obj[k.value] = compileValue(n.vals[i], join(path, k.value), c, refs)
		}
		return v
	case yaml.SequenceNode:
		v := &value{list: []*value{}}
		for i, x := range n.vals {
			v.list = append(v.list, compileValue(x, fmt.Sprintf("%s[%d]", path, i), c, refs))
		}
		return v
	}
	lit, err := n.toAny()
	if err != nil {
		c.add(n, path, "write a plain JSON value", "%v", err)
		return &value{}
	}
	if s, ok := lit.(string); ok {
		t, err := parseTemplate(s)
		if err != nil {
			c.add(n, path, "write {{input.<field>}}, {{steps.<step>.output.<field>}}, {{run.<field>}}, {{item.<field>}} or {{secret.<name>}}", "%v", err)
			return &value{lit: s}
		}
		if t != nil {
			for _, p := range t.parts {
				if p.ref != nil {
					*refs = append(*refs, refAt{r: p.ref, n: n, path: path})
				}
			}
			return &value{tpl: t}
		}
	}
	return &value{lit: lit}
}

type refAt struct {
	r    *ref
	n    *node
	path string
}

func (v *value) resolve(sc *scope) (any, error) {
	switch {
	case v.tpl != nil:
		return v.tpl.render(sc)
	case v.obj != nil:
		m := make(map[string]any, len(v.obj))
		for _, k := range v.keys {
			x, err := v.obj[k].resolve(sc)
			if err != nil {
				return nil, err
			}
			m[k] = x
		}
		return m, nil
	case v.list != nil:
		s := make([]any, len(v.list))
		for i, e := range v.list {
			x, err := e.resolve(sc)
			if err != nil {
				return nil, err
			}
			s[i] = x
		}
		return s, nil
	}
	return v.lit, nil
}

// static reports whether the value has no template, so it can be checked
// when the document is compiled.
func (v *value) static() bool {
	switch {
	case v.tpl != nil:
		return false
	case v.obj != nil:
		for _, x := range v.obj {
			if !x.static() {
				return false
			}
		}
	case v.list != nil:
		for _, x := range v.list {
			if !x.static() {
				return false
			}
		}
	}
	return true
}
