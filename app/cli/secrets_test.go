package cli_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// secretsServer serves the API (insecure) over a client whose key ring
// is ring, on an SQLite store, and returns the CLI's environment for it.
func secretsServer(t *testing.T, path, ring string) map[string]string {
	t.Helper()
	keys, err := hephaestus.ParseSecretKeys(ring)
	if err != nil {
		t.Fatal(err)
	}
	return serveSQLite(t, path, &hephaestus.Config{SecretKeys: keys}, false)
}

// serveSQLite serves the API (insecure) over a client of cfg on the
// SQLite store at path (started when start is set: it then runs workers
// and sends webhook deliveries), and returns the CLI's environment for
// it.
func serveSQLite(t *testing.T, path string, cfg *hephaestus.Config, start bool) map[string]string {
	t.Helper()
	st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cc := *cfg
	cc.Store = st
	c, err := hephaestus.New(&cc)
	if err != nil {
		t.Fatal(err)
	}
	if start {
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
	}
	return serveAPI(t, c, st)
}

// serveAPI serves the API of c (insecure) until the test ends and
// returns the CLI's environment for it.
func serveAPI(t *testing.T, c *hephaestus.Client, st store.Store) map[string]string {
	t.Helper()
	srv, err := server.New(&server.Config{Client: c, Store: st, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return map[string]string{cli.EnvAddr: hs.URL, cli.EnvInsecure: "1"}
}

func hephIn(t *testing.T, env map[string]string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(t.Context(), args, &cli.Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errOut.String()
}

func ringKey(b byte) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, hephaestus.SecretKeySize))
}

// heph secrets set (stdin, --from-file), ls, rm and rotate against a
// server; no command prints a value.
func TestSecretsCLI(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "heph.db")
	env := secretsServer(t, path, "k1:"+ringKey(1))
	const value = "sk_cli_value_123"

	code, out, errOut := hephIn(t, env, value+"\n", "secrets", "set", "stripe_key")
	if code != 0 || out != "secret stripe_key set (key k1)\n" {
		t.Fatalf("set from stdin: exit %d, %q %q", code, out, errOut)
	}
	file := filepath.Join(t.TempDir(), "pem")
	if err := os.WriteFile(file, []byte("line1\nline2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = hephIn(t, env, "", "secrets", "set", "tls_key", "--from-file", file, "-o", "json")
	var s struct {
		Name  string `json:"name"`
		KeyID string `json:"key_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Name != "tls_key" || s.KeyID != "k1" || strings.Contains(out, "line1") {
		t.Fatalf("set --from-file -o json: exit %d, %q %q", code, out, errOut)
	}
	out = ok(t, env, "secrets", "ls")
	wantLines(t, "ls", out, `^NAME\s+KEY\s+CREATED\s+UPDATED$`, `^stripe_key\s+k1\s`, `^tls_key\s+k1\s`)
	if strings.Contains(out, value) {
		t.Fatalf("ls shows a value:\n%s", out)
	}
	// Bad input: a bad name, an empty value, a value as an argument.
	for _, args := range [][]string{{"secrets", "set", "1bad"}, {"secrets", "set", "empty"}, {"secrets", "set", "a", value}} {
		if code, _, _ := hephIn(t, env, "", args...); code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, cli.ExitUsage)
		}
	}

	// Rotation on a server with a new current key.
	env2 := secretsServer(t, path, "k2:"+ringKey(2)+",k1:"+ringKey(1))
	wantLines(t, "rotate", ok(t, env2, "secrets", "rotate"), `^2 of 2 secrets sealed again; key k2 seals them all$`)
	wantLines(t, "ls after rotate", ok(t, env2, "secrets", "ls"), `^stripe_key\s+k2\s`)
	wantLines(t, "rotate again", ok(t, env2, "secrets", "rotate"), `^0 of 2 secrets`)

	wantLines(t, "rm", ok(t, env2, "secrets", "rm", "tls_key"), `^secret tls_key deleted$`)
	if code, _, errOut := hephIn(t, env2, "", "secrets", "rm", "tls_key"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("rm again: exit %d, %s", code, errOut)
	}
}
