package cli_test

import (
	"crypto/sha256"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const payloadDoc = `name: held
steps:
  hold:
    wait: {events: [ok]}
    on: {ok: done}
`

// payloadMark is the value the runs carry.
const payloadMark = "CliSeCrEt-51d2"

// heph server with payload keys (HEPH_PAYLOAD_KEYS, --payload-compress)
// shows runs' payloads as they were given to an admin, "encrypted" to a
// reader, and the SQLite file (with its write-ahead log) holds none of
// them; the same runs on a server without
// keys (the control) leave them in the file.
func TestPayloadKeysSQLite(t *testing.T) {
	t.Parallel()
	key := sha256.Sum256([]byte("cli payload key"))
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		encrypt bool
	}{
		{"keys", []string{"HEPH_PAYLOAD_KEYS=k1:" + base64.StdEncoding.EncodeToString(key[:])}, []string{"--payload-compress"}, true},
		{"plain", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "heph.db")
			nobody := &client{t: t, url: "http://127.0.0.1:1"}
			var admin, reader struct{ Token string }
			nobody.json(&admin, "tokens", "create", "root", "--role", "admin", "--sqlite", db)
			nobody.json(&reader, "tokens", "create", "rita", "--role", "read", "--sqlite", db)
			srv := startServer(t, tc.env, append([]string{"--sqlite", db}, tc.args...)...)
			c := srv.client(t, admin.Token)
			c.ok("documents", "put", writeFile(t, t.TempDir(), "held.yaml", payloadDoc))
			var r run
			c.json(&r, "start", "held", "--kind", "document", "--input", `{"note": "`+payloadMark+`-input"}`)
			waitStep(c, r.ID, "hold", "waiting")
			c.ok("resume", r.ID, "ok", "--payload", `{"by": "`+payloadMark+`-resume"}`)
			waitStatus(c, r.ID, "completed")
			shown := c.ok("show", r.ID, "-o", "json").stdout
			if !strings.Contains(shown, payloadMark+"-input") {
				t.Fatalf("show does not give the input back:\n%s", shown)
			}
			// A reader is shown the run, and "encrypted" in place of its
			// payloads when the server encrypts them.
			seen := srv.client(t, reader.Token).ok("show", r.ID, "-o", "json").stdout
			if !strings.Contains(seen, `"completed"`) || strings.Contains(seen, payloadMark) != !tc.encrypt || strings.Contains(seen, `"encrypted": true`) != tc.encrypt {
				t.Fatalf("heph show as a reader:\n%s", seen)
			}
			var raw strings.Builder
			for _, f := range []string{db, db + "-wal"} {
				b, err := os.ReadFile(f)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				raw.Write(b)
			}
			n := strings.Count(raw.String(), payloadMark)
			switch {
			case tc.encrypt && n > 0:
				t.Fatalf("the database file holds the mark %d times", n)
			case !tc.encrypt && n == 0:
				t.Fatal("without keys the database file does not hold the mark: the test does not see the payloads")
			}
		})
	}
}

// A server refuses payload keys it cannot use, naming the variable.
func TestPayloadKeysRefused(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(hephBin, "server", "--addr", "127.0.0.1:0", "--sqlite", filepath.Join(t.TempDir(), "heph.db"))
	cmd.Env = append(baseEnv(), "HEPH_PAYLOAD_KEYS=k1:bm90IGEga2V5", "HEPH_INSECURE=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	code, errOut := cmd.ProcessState.ExitCode(), stderr.String()
	if err == nil || code != exitUsage || !strings.Contains(errOut, "HEPH_PAYLOAD_KEYS") {
		t.Fatalf("exit %d, %q; want a usage error naming HEPH_PAYLOAD_KEYS", code, errOut)
	}
}
