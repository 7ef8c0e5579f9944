package steplog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// handler buffers the records of an attempt and passes them on to base.
type handler struct {
	buf *Buffer
	// root makes the process logger's handler with the attempt's
	// attributes (nil: none); goas are the groups and attributes of With
	// and WithGroup, in order, applied to it as well.
	root *lazyBase
	goas []groupOrAttrs
}

// base returns the process logger's handler with the handler's groups
// and attributes, or nil.
func (h *handler) base() slog.Handler {
	if h.root == nil {
		return nil
	}
	b := h.root.get()
	for _, g := range h.goas {
		if g.group != "" {
			b = b.WithGroup(g.group)
		} else {
			b = b.WithAttrs(g.attrs)
		}
	}
	return b
}

type groupOrAttrs struct {
	group string
	attrs []slog.Attr
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	if l >= MinLevel {
		return true
	}
	b := h.base()
	return b != nil && b.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	msg := h.buf.redact(r.Message)
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, h.redactAttr(a))
		return true
	})
	if r.Level >= MinLevel {
		h.buf.add(store.LogRecord{Time: r.Time, Level: r.Level, Message: truncate(msg, maxMessage), Attrs: h.encode(attrs)})
	}
	base := h.base()
	if base == nil || !base.Enabled(ctx, r.Level) {
		return nil
	}
	out := slog.NewRecord(r.Time, r.Level, msg, r.PC)
	out.AddAttrs(attrs...)
	return base.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.redactAttr(a)
	}
	return &handler{buf: h.buf, root: h.root, goas: append(h.goas[:len(h.goas):len(h.goas)], groupOrAttrs{attrs: red})}
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &handler{buf: h.buf, root: h.root, goas: append(h.goas[:len(h.goas):len(h.goas)], groupOrAttrs{group: name})}
}

// redactAttr replaces the value of a secret-named attribute, and the
// secrets of the buffer in string values, groups included.
func (h *handler) redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch {
	case secretKey(a.Key):
		return slog.String(a.Key, Redacted)
	case v.Kind() == slog.KindString:
		return slog.String(a.Key, h.buf.redact(v.String()))
	case v.Kind() == slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.buf.redact(err.Error()))
		}
	case v.Kind() == slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, x := range g {
			out[i] = h.redactAttr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// encode makes the JSON object of the handler's attributes and a
// record's, nested in the handler's groups; nil when there are none.
func (h *handler) encode(attrs []slog.Attr) json.RawMessage {
	root := &object{}
	cur := root
	for _, g := range h.goas {
		if g.group != "" {
			sub := &object{}
			cur.fields = append(cur.fields, field{g.group, sub})
			cur = sub
			continue
		}
		cur.add(g.attrs)
	}
	cur.add(attrs)
	root.prune()
	if len(root.fields) == 0 {
		return nil
	}
	b, err := json.Marshal(root)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": "attributes do not encode: " + err.Error()})
	}
	if s := h.buf.redact(string(b)); s != string(b) {
		b = []byte(s) // a secret inside a value of another kind
	}
	if len(b) > maxAttrs {
		b, _ = json.Marshal(map[string]any{"truncated": fmt.Sprintf("the attributes were %d bytes; a record keeps %d", len(b), maxAttrs)})
	}
	return b
}

// object is a JSON object that keeps the order of its fields.
type object struct{ fields []field }

type field struct {
	key string
	val any
}

func (o *object) add(attrs []slog.Attr) {
	for _, a := range attrs {
		v := a.Value.Resolve()
		if a.Key == "" && v.Kind() != slog.KindGroup {
			continue
		}
		if v.Kind() == slog.KindGroup {
			sub := &object{}
			sub.add(v.Group())
			if a.Key == "" { // inlined, as slog does
				o.fields = append(o.fields, sub.fields...)
				continue
			}
			o.fields = append(o.fields, field{a.Key, sub})
			continue
		}
		o.fields = append(o.fields, field{a.Key, value(v)})
	}
}

// prune drops empty groups, as slog's handlers do.
func (o *object) prune() {
	kept := o.fields[:0]
	for _, f := range o.fields {
		if sub, ok := f.val.(*object); ok {
			if sub.prune(); len(sub.fields) == 0 {
				continue
			}
		}
		kept = append(kept, f)
	}
	o.fields = kept
}

func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(f.val)
		if err != nil {
			v, _ = json.Marshal(fmt.Sprint(f.val))
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// value is the JSON form of a resolved slog value.
func value(v slog.Value) any {
	switch v.Kind() {
	case slog.KindTime:
		return v.Time().Format(time.RFC3339Nano)
	case slog.KindDuration:
		return v.Duration().String()
	case slog.KindAny:
		x := v.Any()
		if err, ok := x.(error); ok {
			return err.Error()
		}
		if _, err := json.Marshal(x); err != nil {
			return fmt.Sprint(x)
		}
		return x
	}
	return v.Any()
}

// jsonEscape is s as it appears inside a JSON string.
func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// RedactJSON replaces the values of the keys named like secrets in a JSON
// object (at any depth), as the handler does for attributes: for records
// that come from outside the process. Anything but an object comes back
// as it is (the store refuses it).
func RedactJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return b
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return b
	}
	if !redactMap(m) {
		return b
	}
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}

// redactMap redacts m in place and reports whether it changed anything.
func redactMap(m map[string]any) bool {
	changed := false
	for k, v := range m {
		if secretKey(k) {
			m[k], changed = Redacted, true
			continue
		}
		if sub, ok := v.(map[string]any); ok && redactMap(sub) {
			changed = true
		}
	}
	return changed
}
