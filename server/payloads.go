package server

import (
	"encoding/json"
	"reflect"
	"strconv"

	"github.com/hephaestus-go/hephaestus/codec"
)

// Payloads in answers (docs/payloads.md, "Who can read"). The fields of
// the API's types that hold a payload (a run's input and output, a
// step's output, a history entry's data, heartbeat details, an update's
// or query's result, published state, a schedule's input, a task's
// input) are tagged `payload:""`. Before an answer is written, each is
// replaced by a placeholder
//
//	{"encrypted":true,"size":1843,"key":"k2"}
//
// when the server cannot read it (an envelope: the server has no key for
// it, or no codec at all), or when the server encrypts payloads and the
// caller's role lacks the permission to read them (the read role). Ids,
// names, statuses, times, errors, metadata and search attributes are not
// payloads and are always shown.

// The values of a token's payload permission (store.TokenOptions.Payloads;
// "": its role's).
const (
	PayloadsAllow = "allow"
	PayloadsDeny  = "deny"
)

// PayloadGrants are the values a token's payload permission may take.
var PayloadGrants = []string{"", PayloadsAllow, PayloadsDeny}

// readsPayloads reports whether the caller may read payloads: reading
// them is a permission of its own, which a token is granted or refused
// when it is made (TokenOptions.Payloads) and otherwise has by its role
// (every role but read); any caller when the server does not encrypt
// payloads (then there is nothing to protect: the database holds them in
// plain).
func (c *call) readsPayloads() bool {
	if !c.s.cfg.Client.EncryptsPayloads() {
		return true
	}
	if c.token != nil {
		switch c.token.Options.Payloads {
		case PayloadsAllow:
			return true
		case PayloadsDeny:
			return false
		}
	}
	return c.role != roleRead
}

// payloadShown is what the caller is shown of a payload.
func (c *call) payloadShown(v json.RawMessage, reads bool) json.RawMessage {
	if len(v) == 0 {
		return v
	}
	if codec.IsEncoded(v) {
		b := []byte(`{"encrypted":true`)
		if info, err := codec.Describe(v); err == nil {
			b = append(b, `,"size":`...)
			b = strconv.AppendInt(b, int64(info.Size), 10)
			if info.Key != "" {
				b = append(b, `,"key":`...)
				b = strconv.AppendQuote(b, info.Key)
			}
		}
		return append(b, '}')
	}
	if reads {
		return v
	}
	b := append([]byte(`{"encrypted":true,"size":`), strconv.Itoa(len(v))...)
	return append(b, '}')
}

var rawType = reflect.TypeFor[json.RawMessage]()

// hidePayloads replaces, in place, the payloads of v (an answer the
// handler built for this call) by what the caller is shown of them.
func (c *call) hidePayloads(v any) {
	reads := c.readsPayloads()
	walkPayloads(reflect.ValueOf(v), func(p json.RawMessage) json.RawMessage { return c.payloadShown(p, reads) })
}

// walkPayloads calls f on every payload field reachable from v (through
// pointers, interfaces, structs, slices and maps of pointers) and sets
// the field to what it returns.
func walkPayloads(v reflect.Value, f func(json.RawMessage) json.RawMessage) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkPayloads(v.Elem(), f)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			fv := v.Field(i)
			if _, tagged := sf.Tag.Lookup("payload"); tagged && sf.Type == rawType {
				if fv.CanSet() {
					fv.Set(reflect.ValueOf(f(fv.Interface().(json.RawMessage))))
				}
				continue
			}
			walkPayloads(fv, f)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem() == rawType || v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			walkPayloads(v.Index(i), f)
		}
	case reflect.Map:
		if e := v.Type().Elem().Kind(); e == reflect.Pointer || e == reflect.Interface {
			for _, k := range v.MapKeys() {
				walkPayloads(v.MapIndex(k), f)
			}
		}
	}
}
