package dashboard_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/dashboard"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// leakValue is the secret's value: letters, digits and '_' only, so
// that no encoding (JSON, HTML, URLs) can disguise it from the search.
const leakValue = "sk_live_4f9Q2leakcheckZ7"

// leakDoc calls the target with the secret in the URL and a header.
const leakDoc = `
name: pay
steps:
  charge:
    action: http
    args:
      url: "{{input.base}}/{{input.path}}/{{secret.api_key}}"
      headers: {Authorization: "Bearer {{secret.api_key}}"}
    done: true
`

// syncBuffer is a log sink safe for the client's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A document's HTTP action sends a secret in a header and the URL; the
// target receives it, and then it is nowhere: not in any row of any
// table, the history, the logs, the spans, the telemetry events, the
// API's answers about the runs (one completed, one failed with the URL
// in its error), nor the dashboard's run pages. On SQLite and PostgreSQL.
func TestSecretNeverLeaks(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) (store.Store, func() []string)
	}{
		{"sqlite", func(t *testing.T) (store.Store, func() []string) {
			st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st, func() []string { return dumpSQLite(t, st.DB()) }
		}},
		{"postgres", func(t *testing.T) (store.Store, func() []string) {
			st, err := postgres.Open(context.Background(), &postgres.Config{DSN: pgtest.DSN(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st, func() []string { return dumpPostgres(t, st) }
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st, dump := b.open(t)
			checkNoLeak(t, st, dump)
		})
	}
}

func checkNoLeak(t *testing.T, st store.Store, dump func() []string) {
	ctx := context.Background()
	var got sync.Map
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.URL.Path, r.Header.Get("Authorization"))
		if strings.HasPrefix(r.URL.Path, "/fail/") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, "refused "+r.URL.Path)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path, "auth": r.Header.Get("Authorization")})
	}))
	t.Cleanup(target.Close)

	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	keys, err := heph.ParseSecretKeys("k1:" + strings.Repeat("QUFB", 10) + "QUE=") // 32 bytes of 'A'
	if err != nil {
		t.Fatal(err)
	}
	c, err := heph.New(&heph.Config{Store: st, Logger: logger, TracerProvider: tp, SecretKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	var evMu sync.Mutex
	var events []string
	unsubscribe := c.Subscribe(func(e heph.Event) {
		evMu.Lock()
		defer evMu.Unlock()
		events = append(events, fmt.Sprintf("%+v", e))
	})
	defer unsubscribe()
	reg := flowdoc.NewRegistry()
	u, _ := url.Parse(target.URL)
	if err := flowdoc.RegisterHTTP(reg, "http", &flowdoc.HTTPConfig{AllowedHosts: []string{u.Host}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetSecret(ctx, "api_key", []byte(leakValue)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDocument(ctx, "pay", heph.DocumentYAML, []byte(leakDoc)); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	api, err := server.New(&server.Config{Client: c, Store: st, Insecure: true, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Stop)
	d, err := dashboard.New(&dashboard.Config{API: api, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(d)
	t.Cleanup(hs.Close)

	fetch := func(method, path string, body any) string {
		t.Helper()
		var rd io.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		}
		req, _ := http.NewRequest(method, hs.URL+path, rd)
		req.Header.Set("Content-Type", "application/json")
		res, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		return string(b)
	}
	var answers []string
	for _, p := range []string{"ok", "fail"} {
		var run struct{ ID string }
		out := fetch(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "document", "name": "pay", "input": map[string]string{"base": target.URL, "path": p}})
		if err := json.Unmarshal([]byte(out), &run); err != nil {
			t.Fatal(err)
		}
		r, err := c.WaitRun(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]heph.RunStatus{"ok": heph.StatusCompleted, "fail": heph.StatusFailed}[p]; r.Status != want {
			t.Fatalf("run %s: %s, want %s", p, r.Status, want)
		}
		auth, _ := got.Load("/" + p + "/" + leakValue)
		if auth != "Bearer "+leakValue {
			t.Fatalf("the target did not receive the secret in the URL and the header of run %s: %v", p, auth)
		}
		for _, q := range []string{"", "/history", "/result", "/state"} {
			answers = append(answers, fetch(http.MethodGet, "/api/v1/runs/"+run.ID+q, nil))
		}
		answers = append(answers, fetch(http.MethodGet, "/runs/"+run.ID, nil))
		h, err := c.History(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(h)
		answers = append(answers, string(j))
	}
	page := fetch(http.MethodGet, "/secrets", nil)
	if !strings.Contains(page, `data-secret="api_key"`) {
		t.Errorf("the secrets page does not list api_key:\n%s", page)
	}
	answers = append(answers, page, fetch(http.MethodGet, "/api/v1/secrets", nil))
	all := strings.Join(answers, "\n")
	// The marker shows where the value was, so the search looked at the
	// output and the error.
	if !strings.Contains(all, "Bearer [secret:api_key]") || !strings.Contains(all, "/fail/[secret:api_key]") {
		t.Fatalf("the answers lack the redaction markers:\n%s", all)
	}
	var spans []string
	for _, s := range exp.GetSpans() {
		text := []string{s.Name, s.Status.Description}
		attrs := func(kvs []attribute.KeyValue) {
			for _, kv := range kvs {
				text = append(text, string(kv.Key)+"="+kv.Value.String())
			}
		}
		attrs(s.Attributes)
		for _, e := range s.Events {
			text = append(text, e.Name)
			attrs(e.Attributes)
		}
		spans = append(spans, strings.Join(text, " "))
	}
	if len(spans) == 0 {
		t.Fatal("no span recorded")
	}
	evMu.Lock()
	evs := strings.Join(events, "\n")
	evMu.Unlock()
	rows := dump()
	for what, text := range map[string]string{
		"the API's answers, the dashboard's run pages and the histories": all,
		"the logs":             logs.String(),
		"the spans":            strings.Join(spans, "\n"),
		"the telemetry events": evs,
		"the store's rows":     strings.Join(rows, "\n"),
	} {
		for _, form := range []string{leakValue, hex.EncodeToString([]byte(leakValue))} {
			if i := strings.Index(strings.ToLower(text), strings.ToLower(form)); i >= 0 {
				t.Errorf("%s hold the secret: …%s…", what, text[max(0, i-200):min(len(text), i+len(form)+50)])
			}
		}
	}
	if !strings.Contains(strings.Join(rows, "\n"), "api_key") {
		t.Error("the dump lacks the secrets table")
	}
}

// dumpSQLite returns every row of every table as text.
func dumpSQLite(t *testing.T, db *sql.DB) []string {
	t.Helper()
	var tables []string
	rows, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'table'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var out []string
	for _, tb := range tables {
		rows, err := db.Query(`SELECT * FROM "` + tb + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			line := tb
			for _, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				line += fmt.Sprintf(" %v", v)
			}
			out = append(out, line)
		}
		rows.Close()
	}
	return out
}

// dumpPostgres returns every row of every table of the store's schema as
// JSON text (bytea as hex).
func dumpPostgres(t *testing.T, st *postgres.Store) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := st.Pool().Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", st.Schema())
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var out []string
	for _, tb := range tables {
		rows, err := st.Pool().Query(ctx, fmt.Sprintf(`SELECT row_to_json(t)::text FROM %q.%q t`, st.Schema(), tb))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			out = append(out, tb+" "+s)
		}
		rows.Close()
	}
	return out
}
