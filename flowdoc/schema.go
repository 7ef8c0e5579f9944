package flowdoc

import _ "embed"

// Schema is the JSON Schema of flow documents, for editors: a document
// names it with "$schema". Compile checks more than the schema can (step
// names, actions, templates, conditions, the graph).
//
//go:embed schema.json
var Schema []byte

// SchemaID is the schema's $id.
const SchemaID = "https://hephaestus-go.dev/schemas/flowdoc.json"
