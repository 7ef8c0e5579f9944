package hephtype

import "encoding/json"

// The kinds of runs that the store keeps as KindFlow runs: KindOf tells
// them apart by the reserved metadata the runtime writes.
const (
	KindJob      RunKind = "job"      // a job: a run of a job kind's one-step flow
	KindDocument RunKind = "document" // a run of a stored document (a flow compiled from it)
)

// Reserved run metadata keys, written by the runtime, never by a caller or
// a flow.
const (
	// MetaDocument holds the stored document a run is pinned to.
	MetaDocument = "document"
	// MetaJob marks a job's run (JSON true).
	MetaJob = "job"
)

// KindOf is a run's kind as every surface names it (the CLI, the API's
// "kind", the dashboard, the docs): flow, workflow, document or job. kind
// and metadata are the stored run's (a job or a document run is stored as
// KindFlow, with MetaJob or MetaDocument in its metadata).
func KindOf(kind RunKind, metadata map[string]json.RawMessage) RunKind {
	if kind != "" && kind != KindFlow {
		return kind
	}
	if _, ok := metadata[MetaDocument]; ok {
		return KindDocument
	}
	if _, ok := metadata[MetaJob]; ok {
		return KindJob
	}
	return KindFlow
}
