package cli_test

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

var secretRE = regexp.MustCompile(`secret \(shown once\): (heph_[A-Za-z0-9_-]{43})\n`)

// checkBootstrap creates tokens with args (the store's flags) and checks
// them in the store open returns.
func checkBootstrap(t *testing.T, open func() store.Store, args ...string) {
	t.Helper()
	out := ok(t, nil, append([]string{"tokens", "create", "root", "--role", "admin"}, args...)...)
	m := secretRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("tokens create printed no secret:\n%s", out)
	}
	out = ok(t, nil, append([]string{"tokens", "create", "ci", "--role", "read", "-o", "json"}, args...)...)
	var made struct{ ID, Name, Role, Token string }
	if err := json.Unmarshal([]byte(out), &made); err != nil || made.Name != "ci" || made.Role != "read" || !strings.HasPrefix(made.Token, server.TokenPrefix) {
		t.Fatalf("tokens create -o json: %v\n%s", err, out)
	}
	// A second active token of one name: a conflict.
	code, _, errOut := heph(t, nil, append([]string{"tokens", "create", "root", "--role", "admin"}, args...)...)
	if code != cli.ExitConflict || !strings.Contains(errOut, `named "root"`) {
		t.Fatalf("a second root token: exit %d, %s", code, errOut)
	}

	st := open()
	defer st.Close()
	acc := st.(store.Admin)
	tok, err := acc.TokenByHash(t.Context(), store.HashToken(m[1]))
	if err != nil || tok.Name != "root" || tok.Role != "admin" || !tok.Active() {
		t.Fatalf("the root token in the store: %+v, %v", tok, err)
	}
	list, err := acc.ListTokens(t.Context())
	if err != nil || len(list) != 2 || list[1].ID != made.ID {
		t.Fatalf("tokens in the store: %+v, %v", list, err)
	}
}

func TestTokensBootstrapSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "heph.db") // made and migrated by the command
	checkBootstrap(t, func() store.Store {
		st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, "--sqlite", path)
	for _, args := range [][]string{
		{"--sqlite", path, "--postgres", "postgres://x/y"},
		{"--sqlite", path, "--schema", "s"},
		{"--sqlite", path, "--role", "god"},
	} {
		if code, _, _ := heph(t, nil, append([]string{"tokens", "create", "x"}, args...)...); code != cli.ExitUsage {
			t.Errorf("tokens create %v: exit %d, want 2", args, code)
		}
	}
}

func TestTokensBootstrapPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	checkBootstrap(t, func() store.Store {
		st, err := postgres.Open(t.Context(), &postgres.Config{DSN: dsn, Schema: "tok"})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, "--postgres", dsn, "--schema", "tok")
}

func TestServerRefuses(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "heph.db")
	for _, tc := range []struct {
		env  map[string]string
		args []string
		code int
		msg  string
	}{
		{nil, []string{"--insecure", "--addr", "0.0.0.0:7070"}, 2, "only on a loopback address"},
		{nil, []string{"--insecure", "--addr", ":7070"}, 2, "only on a loopback address"},
		{map[string]string{cli.EnvInsecure: "1", cli.EnvAddr: "http://192.0.2.1:7070"}, nil, 2, `not "192.0.2.1"`},
		{map[string]string{cli.EnvInsecure: "maybe"}, nil, 2, "HEPH_INSECURE"},
		{map[string]string{"HEPH_EXAMPLES": "sometimes"}, nil, 2, `$HEPH_EXAMPLES="sometimes": want true or false`},
		// --dev serves without tokens: loopback only, naming the way out.
		{nil, []string{"--dev", "--addr", "0.0.0.0:7070"}, 2, `--dev serves without tokens: only on a loopback address (127.0.0.1, ::1, localhost), not "0.0.0.0"; to serve "0.0.0.0:7070", drop --dev and make a token with heph tokens create admin --role admin --sqlite heph.db`},
		{map[string]string{cli.EnvAddr: "http://192.0.2.1:7070"}, []string{"--dev"}, 2, `--dev serves without tokens: only on a loopback address`},
		{nil, []string{"--addr", "nowhere"}, 2, "want host:port"},
		{nil, []string{"--addr", "127.0.0.1:99999"}, 2, "bad port"},
		{nil, []string{"--workers", "0"}, 2, "--workers"},
		{nil, []string{"--log-level", "loud"}, 2, "--log-level"},
		{nil, []string{"--sqlite", db, "--postgres", "postgres://x/y"}, 2, "not both"},
		{nil, []string{"--sqlite", db, "--transaction-pooling"}, 2, "--transaction-pooling and --postgres-direct go with --postgres"},
		{nil, []string{"--postgres", "postgres://x/y", "--postgres-direct", "postgres://x/y"}, 2, "--postgres-direct is for --transaction-pooling"},
		{map[string]string{"HEPH_TRANSACTION_POOLING": "perhaps"}, nil, 2, `$HEPH_TRANSACTION_POOLING="perhaps": want true or false`},
		// No token and a non-loopback address: refused, naming the fix.
		{nil, []string{"--sqlite", db, "--addr", "0.0.0.0:0"}, 1, "heph tokens create admin --role admin --sqlite " + db},
	} {
		code, _, errOut := heph(t, tc.env, append([]string{"server"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("heph server %v (env %v): exit %d, %q; want %d and %q", tc.args, tc.env, code, errOut, tc.code, tc.msg)
		}
	}
}
