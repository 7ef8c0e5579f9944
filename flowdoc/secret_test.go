package flowdoc_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/secrets"
)

// A secret reference is checked when the document is compiled: a
// well-formed name, and only in the HTTP action's url and headers.
func TestSecretRefValidation(t *testing.T) {
	srv, _ := httpServer(t)
	reg := httpRegistry(t, srv, 30*time.Second)
	ok := "name: s\nsteps:\n  call:\n    action: http\n    args: {url: \"{{input.base}}/x?k={{secret.api_key}}\", headers: {Authorization: \"Bearer {{ secret.api_key }}\"}}\n    done: true\n"
	if _, err := flowdoc.Load("s.yaml", []byte(ok), reg); err != nil {
		t.Fatalf("url and header secrets refused: %v", err)
	}
	for _, tc := range []struct{ name, args, path, want string }{
		{"in the body", `{url: "{{input.base}}", body: {k: "{{secret.api_key}}"}}`, "steps.call.args.body.k", `step "call" cannot read a secret in steps.call.args.body.k`},
		{"as the method", `{url: "{{input.base}}", method: "{{secret.m}}"}`, "steps.call.args.method", `cannot read a secret`},
		{"bad name", `{url: "{{secret.1abc}}"}`, "steps.call.args.url", `{{secret.1abc}}: "1abc" is not a secret name`},
		{"no name", `{url: "{{secret}}"}`, "steps.call.args.url", "write secret.<name>"},
		{"a field of it", `{url: "{{secret.a.b}}"}`, "steps.call.args.url", "write secret.<name>"},
	} {
		doc := "name: s\nsteps:\n  call:\n    action: http\n    args: " + tc.args + "\n    done: true\n"
		_, err := flowdoc.Load("s.yaml", []byte(doc), reg)
		errs := flowdoc.Errors(err)
		if len(errs) == 0 || errs[0].Path != tc.path || !strings.Contains(errs[0].Message, tc.want) {
			t.Errorf("%s: %v, want an error at %s with %q", tc.name, err, tc.path, tc.want)
		}
	}
	// Another action: refused, naming step and field.
	doc := "name: s\nsteps:\n  a:\n    action: echo\n    args: {q: \"{{secret.api_key}}\"}\n    done: true\n"
	_, err := flowdoc.Load("s.yaml", []byte(doc), reg)
	if errs := flowdoc.Errors(err); len(errs) != 1 || errs[0].Path != "steps.a.args.q" || !strings.Contains(errs[0].Message, `step "a" cannot read a secret`) {
		t.Errorf("secret in another action: %v", err)
	}
	// A remote action too, even one named like the HTTP action.
	remote := flowdoc.NewRegistry()
	remote.SetFallback(flowdoc.RemoteAction)
	doc = "name: s\nsteps:\n  a:\n    action: http\n    args: {url: \"{{secret.api_key}}\"}\n    done: true\n"
	if _, err := flowdoc.Load("s.yaml", []byte(doc), remote); err == nil || !strings.Contains(err.Error(), "cannot read a secret") {
		t.Errorf("secret in a remote action: %v", err)
	}
}

type fixedSecrets map[string]string

func (f fixedSecrets) SecretValue(_ context.Context, name string) (string, error) {
	v, ok := f[name]
	if !ok {
		return "", secrets.ErrNotFound
	}
	return v, nil
}

// The HTTP action sends the value in the URL and a header; its output
// and its errors have it replaced by [secret:NAME], and nothing else the
// run keeps holds it. An unknown secret fails the step at once.
func TestSecretRefRun(t *testing.T) {
	const value = "sk_live_<&\"x"
	var got atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("/echo/{k}", func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.PathValue("k") + "|" + r.Header.Get("Authorization"))
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		_ = json.NewEncoder(w).Encode(map[string]any{"path": r.URL.String(), "auth": r.Header.Get("Authorization")})
	})
	mux.HandleFunc("/fail/{k}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("bad key " + r.PathValue("k")))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	reg := tools(t)
	u, _ := url.Parse(srv.URL)
	if err := flowdoc.RegisterHTTP(reg, "http", &flowdoc.HTTPConfig{AllowedHosts: []string{u.Host}}); err != nil {
		t.Fatal(err)
	}
	ctx := secrets.WithResolver(context.Background(), fixedSecrets{"api_key": value})
	run := func(path, name string) *hephtest.FlowRun {
		t.Helper()
		doc := "name: s\nsteps:\n  call:\n    action: http\n    args: {url: \"{{input.base}}/" + path + "/{{secret." + name + "}}\", headers: {Authorization: \"Bearer {{secret." + name + "}}\"}}\n    retry: {max_attempts: 3}\n    done: true\n"
		f, err := flowdoc.Load("s.yaml", []byte(doc), reg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := hephtest.RunFlow(ctx, f, map[string]string{"base": srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := run("echo", "api_key")
	if r.Status() != hephtype.StatusCompleted {
		t.Fatalf("run %s: %s", r.Status(), r.Err())
	}
	if g, _ := got.Load().(string); g != value+"|Bearer "+value {
		t.Fatalf("the server received %q", g)
	}
	st, _ := r.Step("call")
	if strings.Contains(string(st.Output), "sk_live") || !strings.Contains(string(st.Output), "[secret:api_key]") {
		t.Errorf("output %s: want the value redacted", st.Output)
	}
	var res flowdoc.HTTPResult
	if err := json.Unmarshal(st.Output, &res); err != nil || res.Headers["x-echo"] != "Bearer [secret:api_key]" {
		t.Errorf("redacted output is not the result: %v %+v", err, res)
	}

	r = run("fail", "api_key")
	if r.Status() != hephtype.StatusFailed || strings.Contains(r.Err(), "sk_live") || !strings.Contains(r.Err(), "/fail/[secret:api_key]") || !strings.Contains(r.Err(), "bad key [secret:api_key]") {
		t.Errorf("failed run %s: %s; want the URL and body redacted", r.Status(), r.Err())
	}

	r = run("echo", "missing")
	if r.Status() != hephtype.StatusFailed || r.Calls["call"] != 1 || !strings.Contains(r.Err(), `secret "missing" is not stored`) {
		t.Errorf("unknown secret: run %s after %d calls: %s", r.Status(), r.Calls["call"], r.Err())
	}

	// Without a resolver (no key ring): a clear failure, not retried.
	f, _ := flowdoc.Load("s.yaml", []byte("name: s\nsteps:\n  call:\n    action: http\n    args: {url: \"{{input.base}}/echo/{{secret.api_key}}\"}\n    retry: {max_attempts: 3}\n    done: true\n"), reg)
	r, err := hephtest.RunFlow(context.Background(), f, map[string]string{"base": srv.URL})
	if err != nil || r.Status() != hephtype.StatusFailed || r.Calls["call"] != 1 || !strings.Contains(r.Err(), "secrets are not configured") {
		t.Errorf("no resolver: %v, run %s after %d calls: %s", err, r.Status(), r.Calls["call"], r.Err())
	}
}
