package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The role matrix, as a test: every route of the OpenAPI document,
// called with a token of every role and with no credential, is admitted
// (neither 401 nor 403) exactly when the route table says so. An
// approver reads the runs with a gate it may decide: the run's routes
// name ann's gate's run, the others nothing that exists.
func TestRoleMatrix(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		tokens := map[string]string{
			RoleAdmin: e.token("root", RoleAdmin), RoleOperator: e.token("op", RoleOperator), RoleApprover: e.token("ann", RoleApprover),
			RoleWorker: e.token("py", RoleWorker), RoleRead: e.token("viewer", RoleRead), "": "",
		}
		e.api.token = tokens[RoleAdmin]
		var gated Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "approval-ann", "input": map[string]string{"title": "t"}}, http.StatusCreated, &gated)
		e.waitStatus(gated.ID, "waiting")

		var doc struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		if err := json.Unmarshal(openAPI, &doc); err != nil {
			t.Fatal(err)
		}
		routes := map[string]*route{}
		for _, rt := range e.server.routes {
			routes[rt.method+" "+rt.path] = rt
		}
		n := 0
		for path, ops := range doc.Paths {
			for m := range ops {
				method := strings.ToUpper(m)
				rt := routes[method+" "+path]
				if rt == nil {
					continue // not an operation (or TestOpenAPIMatchesRoutes fails)
				}
				id := "nope"
				if method == http.MethodGet && strings.HasPrefix(path, Prefix+"/runs/{id}") {
					id = gated.ID
				}
				url := strings.NewReplacer("{id}", id, "{name}", "nope", "{step}", "review", "{build}", "b1").Replace(path)
				for r, tok := range tokens {
					var body io.Reader
					if method != http.MethodGet && method != http.MethodDelete {
						body = bytes.NewReader([]byte("{}"))
					}
					rq, err := http.NewRequestWithContext(t.Context(), method, e.http.URL+url, body)
					if err != nil {
						t.Fatal(err)
					}
					if tok != "" {
						rq.Header.Set("Authorization", "Bearer "+tok)
					}
					res, err := e.http.Client().Do(rq)
					if err != nil {
						t.Fatal(err)
					}
					var text []byte
					if !rt.stream || res.StatusCode != http.StatusOK { // a stream lasts: its status is the answer
						text, _ = io.ReadAll(res.Body)
					}
					res.Body.Close()
					n++
					admitted := rt.access == accessPublic || (r != "" && rt.access.admits(role(r)))
					refused := res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden
					switch {
					case admitted && refused:
						t.Errorf("%s %s as %q: %d, want it admitted: %s", method, url, r, res.StatusCode, text)
					case !admitted && r == "" && res.StatusCode != http.StatusUnauthorized:
						t.Errorf("%s %s without a credential: %d, want 401: %s", method, url, res.StatusCode, text)
					case !admitted && r != "" && res.StatusCode != http.StatusForbidden:
						t.Errorf("%s %s as %q: %d, want 403: %s", method, url, r, res.StatusCode, text)
					}
				}
			}
		}
		if n < 6*len(routes) {
			t.Errorf("%d calls for %d routes", n, len(routes))
		}
		// The approver reads no other run.
		var other Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "approval", "input": map[string]string{"title": "t"}}, http.StatusCreated, &other)
		e.waitStatus(other.ID, "waiting")
		p := e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/" + other.ID, token: tokens[RoleApprover]}).problem(t, http.StatusForbidden)
		if !strings.Contains(p.Detail, "pending gate it may decide") {
			t.Errorf("an approver reads another run: %+v", p)
		}
	})
}

// docs/security.md holds the role matrix of the route table, and every
// operation of the OpenAPI document says its roles as the table does.
func TestRoleMatrixDocumented(t *testing.T) {
	s := &Server{}
	s.register()
	docs, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	want := s.RoleMatrix()
	if !strings.Contains(string(docs), "### Role matrix\n") || !strings.Contains(string(docs), want) {
		t.Errorf("docs/security.md does not hold the current role matrix under \"### Role matrix\"; it is:\n%s", want)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Description string `json:"description"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	roles := regexp.MustCompile(`^Roles: ([^.]*)\.`)
	for _, rt := range s.routes {
		op := doc.Paths[rt.path][strings.ToLower(rt.method)]
		m := roles.FindStringSubmatch(op.Description)
		if rt.access == accessPublic {
			if m != nil {
				t.Errorf("%s %s is public, but its description says %q", rt.method, rt.path, m[0])
			}
			continue
		}
		if want := rolesText(rt.access); m == nil || m[1] != want {
			t.Errorf("%s %s: the description says %q, want \"Roles: %s.\"", rt.method, rt.path, op.Description, want)
		}
	}
}

// rolesText is how an operation's description names the roles of an
// access set.
func rolesText(a access) string {
	var out []string
	for _, r := range Roles {
		switch {
		case !a.admits(role(r)):
		case role(r) == roleApprover && a&bitOwn != 0:
			out = append(out, r+" (own)")
		default:
			out = append(out, r)
		}
	}
	return strings.Join(out, ", ")
}
