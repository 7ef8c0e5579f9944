package limits_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/limits"
)

func TestPayloadAndInput(t *testing.T) {
	if err := limits.Payload(make([]byte, 10), 10, "x"); err != nil {
		t.Fatalf("10 bytes at a limit of 10: %v", err)
	}
	err := limits.Payload(make([]byte, 11), 10, "the output of step \"s\"")
	if !errors.Is(err, limits.ErrPayloadTooLarge) || errors.Is(err, limits.ErrInvalidInput) {
		t.Fatalf("11 bytes: %v, want ErrPayloadTooLarge only", err)
	}
	if !strings.Contains(err.Error(), `the output of step "s" is 11 bytes, above the limit of 10 bytes`) {
		t.Fatalf("message %q does not say what and by how much", err)
	}
	err = limits.Input(make([]byte, 11), 10, "the input")
	if !errors.Is(err, limits.ErrPayloadTooLarge) || !errors.Is(err, limits.ErrInvalidInput) {
		t.Fatalf("Input: %v, want both errors", err)
	}
}

func TestJSON(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
		err  string
	}{
		{map[string]int{"a": 1}, `{"a":1}`, ""},
		{nil, "null", ""},
		{[]byte(nil), "null", ""},
		{json.RawMessage(`[1,2]`), `[1,2]`, ""},
		{[]byte(`{"a":`), "", "is not valid JSON"},
		{make(chan int), "", "does not encode as JSON"},
	} {
		got, err := limits.JSON(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("JSON(%T) error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("JSON(%v) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}
