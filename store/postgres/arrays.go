package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The store sends its batches as arrays, one per column (unnest). pgx
// encodes a []string, []int64 or []time.Time through pgtype.FlatArray,
// whose Index boxes each element in an interface: an allocation per
// element, and for []*string one more where the pointer is dereferenced.
// A change's pipeline carries some forty arrays, so that was about a
// quarter of the allocations of a job (BenchmarkCapacity's goallocs/unit,
// docs/benchmarks.md). The types below give pgx a pointer to each element
// instead, which an interface holds without allocating, and which the
// element's codec encodes through its valuer interface. They encode the
// same bytes: an array whose slice is nil is NULL, a nil element of a
// []*string or []*time.Time is a NULL element.

// describes tells whether a connection sends its statements' parameters
// with the types the server described (pgx's cached statement and
// describe modes), which the types below need: in the modes that infer a
// parameter's type from its Go type (QueryExecModeExec, under
// Config.TransactionPooling, and the simple protocol, which a caller's
// own transaction may use) pgx does not know them, so the plain slices
// are sent there.
func describes(c *pgx.ConnConfig) bool {
	switch c.DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeDescribeExec:
		return true
	}
	return false
}

// arrayArgs is args with the slices of the types above in their
// element-pointer forms (a copy: args is left as it is).
func arrayArgs(args []any) []any {
	args = append([]any(nil), args...)
	for i, a := range args {
		switch v := a.(type) {
		case []string:
			args[i] = textArray(v)
		case []*string:
			args[i] = nullTextArray(v)
		case []int64:
			args[i] = int8Array(v)
		case []int32:
			args[i] = int4Array(v)
		case []time.Time:
			args[i] = timeArray(v)
		case []*time.Time:
			args[i] = nullTimeArray(v)
		}
	}
	return args
}

// dims is a one-dimensional array's dimensions, nil (NULL) for a nil
// slice.
func dims(isNil bool, n int) []pgtype.ArrayDimension {
	if isNil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(n), LowerBound: 1}}
}

type textElem string

func (e *textElem) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*e), Valid: true}, nil
}

type textArray []string

func (a textArray) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a textArray) Index(i int) any                     { return (*textElem)(&a[i]) }
func (a textArray) IndexType() any                      { return (*textElem)(nil) }

type nullTextArray []*string

func (a nullTextArray) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a nullTextArray) Index(i int) any                     { return (*textElem)(a[i]) }
func (a nullTextArray) IndexType() any                      { return (*textElem)(nil) }

type int8Elem int64

func (e *int8Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*e), Valid: true}, nil
}

type int8Array []int64

func (a int8Array) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a int8Array) Index(i int) any                     { return (*int8Elem)(&a[i]) }
func (a int8Array) IndexType() any                      { return (*int8Elem)(nil) }

type int4Elem int32

func (e *int4Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*e), Valid: true}, nil
}

type int4Array []int32

func (a int4Array) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a int4Array) Index(i int) any                     { return (*int4Elem)(&a[i]) }
func (a int4Array) IndexType() any                      { return (*int4Elem)(nil) }

type timeElem time.Time

func (e *timeElem) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: time.Time(*e), Valid: true}, nil
}

type timeArray []time.Time

func (a timeArray) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a timeArray) Index(i int) any                     { return (*timeElem)(&a[i]) }
func (a timeArray) IndexType() any                      { return (*timeElem)(nil) }

type nullTimeArray []*time.Time

func (a nullTimeArray) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a nullTimeArray) Index(i int) any                     { return (*timeElem)(a[i]) }
func (a nullTimeArray) IndexType() any                      { return (*timeElem)(nil) }
