package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Every route the server registers is in the OpenAPI document, with the
// same method, and every operation of the document is a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	s, err := New(&Config{Client: nil, Store: nil, Insecure: true})
	if err == nil || s != nil {
		t.Fatal("New without a client succeeded")
	}
	s = &Server{}
	s.register()
	var routes []string
	for _, rt := range s.routes {
		routes = append(routes, rt.method+" "+rt.path)
	}
	slices.Sort(documented)
	slices.Sort(routes)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("the route %s is not in openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("openapi.json documents %s, which the server has no route for", d)
		}
	}
	if len(routes) != len(slices.Compact(slices.Clone(routes))) {
		t.Errorf("a route is registered twice: %v", routes)
	}
}

// The checker the harness uses refuses what it should: a response body
// that does not match its schema, a status the operation does not
// declare with a non-problem body, a request with an unknown field.
func TestOpenAPICheckerRefuses(t *testing.T) {
	v, err := openAPIValidator()
	if err != nil {
		t.Fatal(err)
	}
	oasMu.Lock()
	defer oasMu.Unlock()
	get, _ := http.NewRequest(http.MethodGet, "http://x/api/v1/runs/abc", nil)
	response := func(status int, ct, body string) *http.Response {
		return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(strings.NewReader(body)), Request: get}
	}
	if ok, _ := v.ValidateHttpResponse(get, response(200, "application/json", `{"id": "abc"}`)); ok {
		t.Error("a run without its required fields passes")
	}
	if ok, _ := v.ValidateHttpResponse(get, response(404, "application/problem+json", `{"title": "x"}`)); ok {
		t.Error("a problem without type and status passes")
	}
	if ok, errs := v.ValidateHttpResponse(get, response(404, "application/problem+json", `{"type": "https://hephaestus.dev/problems/not-found", "title": "Not Found", "status": 404}`)); !ok {
		t.Errorf("a good problem is refused:%s", describe(errs))
	}
	post, _ := http.NewRequest(http.MethodPost, "http://x/api/v1/runs", bytes.NewReader([]byte(`{"name": "a", "colour": 1}`)))
	post.Header.Set("Content-Type", "application/json")
	if ok, _ := v.ValidateHttpRequest(post); ok {
		t.Error("a start with an unknown field passes")
	}
}
