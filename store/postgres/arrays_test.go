package postgres

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// arrayCases are arguments of each slice type arrayArgs converts, with the
// array type they are sent as.
func arrayCases() []struct {
	oid uint32
	arg any
} {
	s1, s2 := "héllo", ""
	t1 := time.Date(2026, 11, 29, 17, 3, 4, 123456789, time.FixedZone("x", -7*3600))
	t2 := time.Date(1999, 1, 2, 3, 4, 5, 0, time.UTC)
	return []struct {
		oid uint32
		arg any
	}{
		{pgtype.TextArrayOID, []string{"a", "", "run-1", "ünïcode \"quoted\" {x}"}},
		{pgtype.TextArrayOID, []string{}},
		{pgtype.TextArrayOID, []string(nil)},
		{pgtype.TextArrayOID, []*string{&s1, nil, &s2}},
		{pgtype.TextArrayOID, []*string{nil}},
		{pgtype.TextArrayOID, []*string(nil)},
		{pgtype.Int8ArrayOID, []int64{0, -1, 1 << 40, -9223372036854775808}},
		{pgtype.Int8ArrayOID, []int64(nil)},
		{pgtype.Int4ArrayOID, []int32{0, 7, -2147483648, 2147483647}},
		{pgtype.Int8ArrayOID, []int32{5, -5}},
		{pgtype.TimestamptzArrayOID, []time.Time{t1, t2, {}}},
		{pgtype.TimestamptzArrayOID, []time.Time{}},
		{pgtype.TimestamptzArrayOID, []*time.Time{&t1, nil, &t2}},
		{pgtype.TimestamptzArrayOID, []*time.Time(nil)},
	}
}

// TestArrayArgsEncodeTheSameBytes: the element-pointer arrays encode
// exactly what pgx encodes for the plain slices, NULLs included.
func TestArrayArgsEncodeTheSameBytes(t *testing.T) {
	m := pgtype.NewMap()
	for i, c := range arrayCases() {
		t.Run(fmt.Sprintf("%d_%T", i, c.arg), func(t *testing.T) {
			conv := arrayArgs([]any{c.arg})[0]
			if fmt.Sprintf("%T", conv) == fmt.Sprintf("%T", c.arg) {
				t.Fatalf("%T was not converted", c.arg)
			}
			for _, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
				want, err := m.Encode(c.oid, format, c.arg, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := m.Encode(c.oid, format, conv, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
					t.Errorf("format %d: got %q, want %q", format, got, want)
				}
			}
		})
	}
}

// TestArrayArgsLeaveTheRest: other arguments pass as they are, and the
// caller's slice is not changed.
func TestArrayArgsLeaveTheRest(t *testing.T) {
	in := []any{"x", int64(3), []byte("b"), [][]byte{[]byte("c")}, []string{"a"}}
	out := arrayArgs(in)
	if _, ok := in[4].([]string); !ok {
		t.Fatalf("the caller's argument became %T", in[4])
	}
	if _, ok := out[4].(textArray); !ok {
		t.Fatalf("out[4] is %T", out[4])
	}
	for i := range 4 {
		if fmt.Sprint(out[i]) != fmt.Sprint(in[i]) {
			t.Errorf("argument %d changed: %v", i, out[i])
		}
	}
}

// TestArrayArgsAllocations: encoding a 100-element array allocates per
// array, not per element (pgx's plain-slice path allocates per element).
func TestArrayArgsAllocations(t *testing.T) {
	m := pgtype.NewMap()
	strs, ints := make([]string, 100), make([]int64, 100)
	times, ptrs := make([]time.Time, 100), make([]*string, 100)
	for i := range strs {
		strs[i], ints[i], times[i] = fmt.Sprint("run-", i), int64(1000+i), time.Unix(int64(i), 0)
		ptrs[i] = &strs[i]
	}
	buf := make([]byte, 0, 1<<16)
	for _, c := range []struct {
		oid uint32
		arg any
	}{{pgtype.TextArrayOID, strs}, {pgtype.Int8ArrayOID, ints}, {pgtype.TimestamptzArrayOID, times}, {pgtype.TextArrayOID, ptrs}} {
		conv := arrayArgs([]any{c.arg})[0]
		count := func(v any) float64 {
			return testing.AllocsPerRun(20, func() {
				if _, err := m.Encode(c.oid, pgtype.BinaryFormatCode, v, buf[:0]); err != nil {
					t.Fatal(err)
				}
			})
		}
		plain, pointers := count(c.arg), count(conv)
		t.Logf("%T: %v allocations per encode, plain slice %v", c.arg, pointers, plain)
		if pointers > 4 || plain < 100 {
			t.Errorf("%T: %v allocations per encode, plain slice %v", c.arg, pointers, plain)
		}
	}
}
