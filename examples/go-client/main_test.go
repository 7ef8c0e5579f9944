package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/demo"
	"github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// The example program against a real server on SQLite with the example
// definitions (as heph server --examples) and an operator token: the
// order ships, the repeated start names the same run, the history is the
// run's; a token the server did not issue is refused.
func TestGoClientProgram(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c, err := heph.New(&heph.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Register(ctx, c, flowdoc.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(&server.Config{Client: c, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Stop()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	})
	_, _, tok, err := server.NewToken(ctx, st, &server.TokenParams{Principal: "shop", Role: server.RoleOperator}, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(wctx, hs.URL, tok, "o-42", &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	started := regexp.MustCompile(`started run (\S+) \(created true\)`).FindStringSubmatch(text)
	if started == nil {
		t.Fatalf("no new run in the output:\n%s", text)
	}
	for _, want := range []string{
		"calling as shop (role operator)",
		"shipped in 1 parcels, tracking TRK-o-42-",
		"the same start again: run " + started[1] + " (created false)",
		"run_completed",
		"ship_order",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q:\n%s", want, text)
		}
	}

	out.Reset()
	if err := run(wctx, hs.URL, "heph_forged", "o-43", &out); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("a forged token: %v, want a 401\n%s", err, out.String())
	}
}
