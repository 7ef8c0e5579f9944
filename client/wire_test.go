package client_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/client"
	hephserver "github.com/hephaestus-go/hephaestus/server"
)

// The client's JSON types are its own copies of the server's, so that a
// program importing client links none of the engine: each copy must have
// the same JSON fields, of the same kinds, as the type the server sends.
func TestWireTypesMatchTheServer(t *testing.T) {
	for _, p := range []struct{ client, server any }{
		{client.WorkflowBuild{}, hephserver.WorkflowBuild{}},
		{client.DeletedRun{}, hephserver.DeletedRun{}},
		{client.Step{}, hephserver.StepJSON{}},
		{client.StepList{}, hephserver.StepList{}},
		{client.History{}, hephserver.History{}},
		{client.UpdateResult{}, hephserver.UpdateResult{}},
		{client.QueryResult{}, hephserver.QueryResult{}},
		{client.Decision{}, hephserver.Decision{}},
		{client.PendingApproval{}, hephserver.PendingApproval{}},
		{client.Definition{}, hephserver.Definition{}},
		{client.PublishedDefinition{}, hephserver.PublishedDefinition{}},
		{client.DefinitionDetail{}, hephserver.DefinitionDetail{}},
		{client.Worker{}, hephserver.Worker{}},
		{client.Stats{}, hephserver.Stats{}},
		{client.StatsRun{}, hephserver.StatsRun{}},
		{client.Principal{}, hephserver.Principal{}},
		{client.AuditEntry{}, hephserver.AuditEntry{}},
		{client.CreatedWebhook{}, hephserver.CreatedWebhook{}},
		{client.NewWebhook{}, hephserver.NewWebhook{}},
		{client.LogPage{}, heph.LogPage{}},
		{client.Webhook{}, heph.Webhook{}},
		{client.WebhookDelivery{}, heph.WebhookDelivery{}},
		{client.VersionRule{}, heph.VersionRule{}},
	} {
		c, s := reflect.TypeOf(p.client), reflect.TypeOf(p.server)
		if d := sameJSON(c, s, c.Name(), map[[2]reflect.Type]bool{}); d != "" {
			t.Errorf("client.%s and %s differ: %s", c.Name(), s, d)
		}
	}
}

// sameJSON says where the JSON shapes of a and b differ ("" when alike).
func sameJSON(a, b reflect.Type, at string, seen map[[2]reflect.Type]bool) string {
	if seen[[2]reflect.Type{a, b}] {
		return ""
	}
	seen[[2]reflect.Type{a, b}] = true
	if a.Kind() != b.Kind() {
		return at + ": " + a.Kind().String() + " vs " + b.Kind().String()
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return sameJSON(a.Elem(), b.Elem(), at+"[]", seen)
	case reflect.Map:
		if d := sameJSON(a.Key(), b.Key(), at+" key", seen); d != "" {
			return d
		}
		return sameJSON(a.Elem(), b.Elem(), at+" value", seen)
	case reflect.Struct:
		fa, fb := jsonFields(a), jsonFields(b)
		for name, f := range fb {
			g, ok := fa[name]
			if !ok {
				return at + "." + name + ": missing in the client"
			}
			if d := sameJSON(g.Type, f.Type, at+"."+name, seen); d != "" {
				return d
			}
		}
		for name := range fa {
			if _, ok := fb[name]; !ok {
				return at + "." + name + ": not sent by the server"
			}
		}
	}
	return ""
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// The package imports nothing of the module: a Go program that only talks
// to a server links no engine package.
func TestClientImportsNoEnginePackage(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); strings.HasPrefix(p, "github.com/hephaestus-go/hephaestus") {
				t.Errorf("%s imports %s: the client links the engine", f, p)
			}
		}
	}
}
