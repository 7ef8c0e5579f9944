package businesskey_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/businesskey"
)

const uuidLower = "5f0c8a2e-3b1d-4c6e-9a7f-2d4b6c8e0a1f"

// checkErr asserts err wraps ErrInvalid and mentions every want.
func checkErr(t *testing.T, what string, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s: unexpected error %v", what, err)
		}
		return
	}
	if err == nil {
		t.Errorf("%s: no error, want one mentioning %q", what, want)
		return
	}
	if !errors.Is(err, businesskey.ErrInvalid) {
		t.Errorf("%s: %v does not wrap ErrInvalid", what, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not mention %q", what, err, w)
		}
	}
}

func TestValidateKey(t *testing.T) {
	cases := []struct {
		key  string
		want []string // nil: valid
	}{
		{"orderid", nil},
		{"o", nil},
		{"order2024", nil},
		{"42", nil},
		{strings.Repeat("k", businesskey.MaxKeyLen), nil},
		{strings.Repeat("k", businesskey.MaxKeyLen+1), []string{"65 bytes", "limit is 64"}},
		{"", []string{"empty"}},
		{"Orderid", []string{"'O'", "position 0"}},
		{"orderID", []string{"'I'", "position 5"}},
		{"order id", []string{"' '", "position 5"}},
		{"order-id", []string{"'-'", "position 5"}},
		{"order_id", []string{"'_'", "position 5"}},
		{"order::id", []string{"':'", "position 5"}},
		{"ordér", []string{"'é'", "position 3"}},
		{"order\x00", []string{`'\x00'`, "position 5"}},
		{"order\xff", []string{"the byte 0xff", "position 5"}},
	}
	for _, tc := range cases {
		checkErr(t, fmt.Sprintf("ValidateKey(%q)", tc.key), businesskey.ValidateKey(tc.key), tc.want)
	}
}

func TestValidateValue(t *testing.T) {
	cases := []struct {
		value string
		want  []string
	}{
		{"1234", nil},
		{"abc123", nil},
		{uuidLower, nil},
		{strings.ToUpper(uuidLower), nil},
		// What users use for ids.
		{"order-42", nil},
		{"ORD-1", nil},
		{"user_7", nil},
		{"v1.2.3", nil},
		{strings.Repeat("a", businesskey.MaxValueLen), nil},
		{strings.Repeat("a", businesskey.MaxValueLen+1), []string{"201 bytes", "limit is 200"}},
		{strings.Repeat("ab", 1500), []string{"3000 bytes", "limit is 200"}},
		{"", []string{"empty"}},
		{"12 34", []string{"' '", "position 2"}},
		{" 1234", []string{"' '", "position 0"}},
		{"a::b", []string{"':'", "position 1", "reserved"}},
		{"{5f0c8a2e-3b1d-4c6e-9a7f-2d4b6c8e0a1f}", []string{"'{'", "position 0"}}, // braced form
		{"urn:uuid:" + uuidLower, []string{"':'", "position 3"}},
		{"a/b", []string{"'/'", "position 1"}},
		{"café", []string{"'é'", "position 3"}},
	}
	for _, tc := range cases {
		checkErr(t, fmt.Sprintf("ValidateValue(%q)", tc.value), businesskey.ValidateValue(tc.value), tc.want)
	}
}

func TestBuild(t *testing.T) {
	cases := []struct {
		key, value string
		id         string
		want       []string
	}{
		{"orderid", "1234", "orderid::1234", nil},
		{"orderid", uuidLower, "orderid::" + uuidLower, nil},
		{"", "1234", "", []string{"key name is empty"}},
		{"Order", "1234", "", []string{"key name", "'O'", "position 0"}},
		{"orderid", "", "", []string{"value is empty"}},
		{"orderid", "12::34", "", []string{"value", "':'", "position 2"}},
		{"orderid", "A1", "orderid::A1", nil},
		{"orderid", "a b", "", []string{"value", "' '", "position 1"}},
	}
	for _, tc := range cases {
		id, err := businesskey.Build(tc.key, tc.value)
		checkErr(t, fmt.Sprintf("Build(%q, %q)", tc.key, tc.value), err, tc.want)
		if id != tc.id {
			t.Errorf("Build(%q, %q) = %q, want %q", tc.key, tc.value, id, tc.id)
		}
	}
}

func TestBuildWithSuffix(t *testing.T) {
	id, err := businesskey.BuildWithSuffix("orderid", "1234", bytes.NewReader([]byte{0xde, 0xad, 0xbe, 0xef, 0xff}))
	if err != nil || id != "orderid::1234::deadbeef" {
		t.Fatalf("got %q, %v", id, err)
	}
	// crypto/rand when nil: eight lower-case hex digits.
	id, err = businesskey.BuildWithSuffix("orderid", "1234", nil)
	if err != nil {
		t.Fatal(err)
	}
	suffix, ok := strings.CutPrefix(id, "orderid::1234::")
	if !ok || len(suffix) != 8 || strings.Trim(suffix, "0123456789abcdef") != "" {
		t.Fatalf("id %q has no 8-hex-digit suffix", id)
	}
	// A short reader is an error that says what failed.
	_, err = businesskey.BuildWithSuffix("orderid", "1234", bytes.NewReader([]byte{1, 2}))
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "suffix") {
		t.Fatalf("short reader: err = %v", err)
	}
	// Invalid parts are checked before the reader is read.
	r := bytes.NewReader([]byte{1, 2, 3, 4})
	_, err = businesskey.BuildWithSuffix("Bad", "1234", r)
	checkErr(t, "BuildWithSuffix(Bad)", err, []string{"'B'", "position 0"})
	if r.Len() != 4 {
		t.Error("BuildWithSuffix read randomness for an invalid key")
	}
}

func TestNew(t *testing.T) {
	rnd := func() io.Reader { return bytes.NewReader([]byte{0x01, 0x23, 0x45, 0x67}) }
	cases := []struct {
		scope businesskey.Scope
		id    string
		want  []string
	}{
		{businesskey.ScopeActive, "orderid::42", nil},
		{businesskey.ScopeForever, "orderid::42", nil},
		{"", "orderid::42", nil},
		{businesskey.ScopeNone, "orderid::42::01234567", nil},
		{"sometimes", "", []string{`unknown scope "sometimes"`, `"active"`, `"forever"`, `"none"`}},
	}
	for _, tc := range cases {
		id, err := businesskey.New("orderid", "42", tc.scope, rnd())
		checkErr(t, fmt.Sprintf("New(scope %q)", tc.scope), err, tc.want)
		if id != tc.id {
			t.Errorf("New(scope %q) = %q, want %q", tc.scope, id, tc.id)
		}
	}
	if _, err := businesskey.New("orderid", "4 2", businesskey.ScopeNone, rnd()); !errors.Is(err, businesskey.ErrInvalid) {
		t.Errorf("New with a bad value under ScopeNone: err = %v", err)
	}
}

func TestScopeValid(t *testing.T) {
	for _, s := range []businesskey.Scope{businesskey.ScopeActive, businesskey.ScopeForever, businesskey.ScopeNone} {
		if !s.Valid() {
			t.Errorf("%q is not valid", s)
		}
	}
	for _, s := range []businesskey.Scope{"", "Active", "never"} {
		if s.Valid() {
			t.Errorf("%q is valid", s)
		}
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		id         string
		key, value string
		want       []string
	}{
		{"orderid::1234", "orderid", "1234", nil},
		{"orderid::" + uuidLower, "orderid", uuidLower, nil},
		{"orderid::1234::deadbeef", "orderid", "1234", nil},
		{"", "", "", []string{"not of the form key::value"}},
		{"orderid", "", "", []string{`"orderid"`, "not of the form key::value"}},
		{"orderid:1234", "", "", []string{"not of the form key::value"}},
		{"orderid::1234::dead::beef", "", "", []string{"not of the form key::value"}},
		{"::1234", "", "", []string{"key name is empty"}},
		{"orderid::", "", "", []string{"value is empty"}},
		{"OrderID::1234", "", "", []string{"'O'", "position 0"}},
		{"orderid::12 34", "", "", []string{"' '", "position 2"}},
		{"order id::1234", "", "", []string{"' '", "position 5"}},
		{"orderid::" + strings.ToUpper(uuidLower), "orderid", strings.ToUpper(uuidLower), nil},
		{"orderid::ORD-42", "orderid", "ORD-42", nil},
		{"orderid::a b", "", "", []string{"' '", "position 1"}},
		// "::" inside a value cannot be told from a suffix unless the
		// suffix is checked: it must be eight lower-case hex digits.
		{"orderid::a::b", "", "", []string{"suffix", `"b"`}},
		{"orderid::1234::", "", "", []string{"suffix", `""`}},
		{"orderid::1234::DEADBEEF", "", "", []string{"suffix", `"DEADBEEF"`}},
		{"orderid::1234::deadbeef0", "", "", []string{"suffix"}},
	}
	for _, tc := range cases {
		key, value, err := businesskey.Parse(tc.id)
		checkErr(t, fmt.Sprintf("Parse(%q)", tc.id), err, tc.want)
		if key != tc.key || value != tc.value {
			t.Errorf("Parse(%q) = %q, %q, want %q, %q", tc.id, key, value, tc.key, tc.value)
		}
	}
}

// Build, New and Parse agree: what New makes, Parse takes apart.
func TestRoundTrip(t *testing.T) {
	for _, scope := range []businesskey.Scope{businesskey.ScopeActive, businesskey.ScopeForever, businesskey.ScopeNone} {
		for _, value := range []string{"1", "abc123", uuidLower} {
			id, err := businesskey.New("invoice", value, scope, nil)
			if err != nil {
				t.Fatal(err)
			}
			k, v, err := businesskey.Parse(id)
			if err != nil || k != "invoice" || v != value {
				t.Errorf("Parse(New(invoice, %q, %s)) = %q, %q, %v", value, scope, k, v, err)
			}
		}
	}
}

func Example() {
	id, err := businesskey.Build("orderid", "1234")
	fmt.Println(id, err)

	// ScopeNone adds a random suffix so that ids stay distinct; the reader
	// is crypto/rand when nil.
	id, _ = businesskey.New("orderid", "1234", businesskey.ScopeNone, bytes.NewReader([]byte{0x9f, 0x86, 0xd0, 0x81}))
	fmt.Println(id)

	key, value, _ := businesskey.Parse(id)
	fmt.Println(key, value)

	_, err = businesskey.Build("orderid", "A/1")
	fmt.Println(err)
	// Output:
	// orderid::1234 <nil>
	// orderid::1234::9f86d081
	// orderid 1234
	// invalid business key: value "A/1" has '/' at position 1; use only letters, digits, '.', '_' and '-'
}

// FuzzParse: Parse never panics, and what it accepts Build rebuilds.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"orderid::1234", "orderid::1234::deadbeef", "orderid::" + uuidLower, "a::b::c::d", "", "::", "Ö::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		key, value, err := businesskey.Parse(id)
		if err != nil {
			if !errors.Is(err, businesskey.ErrInvalid) {
				t.Fatalf("Parse(%q): %v does not wrap ErrInvalid", id, err)
			}
			return
		}
		built, err := businesskey.Build(key, value)
		if err != nil || !strings.HasPrefix(id, built) {
			t.Fatalf("Parse(%q) = %q, %q but Build gives %q, %v", id, key, value, built, err)
		}
	})
}
