package cli_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hephaestus-go/hephaestus/store"
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
			var admin, reader, auditor struct{ Token string }
			nobody.json(&admin, "tokens", "create", "root", "--role", "admin", "--sqlite", db)
			nobody.json(&reader, "tokens", "create", "rita", "--role", "read", "--sqlite", db)
			nobody.json(&auditor, "tokens", "create", "audrey", "--role", "read", "--payloads", "allow", "--sqlite", db)
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
			// A read token granted the payload permission sees them.
			if seen := srv.client(t, auditor.Token).ok("show", r.ID, "-o", "json").stdout; !strings.Contains(seen, payloadMark+"-input") {
				t.Fatalf("heph show as a reader granted payloads:\n%s", seen)
			}
			raw := sqliteBytes(t, db)
			n := strings.Count(raw, payloadMark)
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

// heph payloads reencode after a rotation: a run written with k1 is
// re-encrypted with k2, then a server that holds only k2 shows it and
// runs it to its end.
func TestPayloadReencodeSQLite(t *testing.T) {
	t.Parallel()
	key := func(id string) string {
		sum := sha256.Sum256([]byte("cli payload key " + id))
		return id + ":" + base64.StdEncoding.EncodeToString(sum[:])
	}
	db := filepath.Join(t.TempDir(), "heph.db")
	srv := startServer(t, []string{"HEPH_INSECURE=true", "HEPH_PAYLOAD_KEYS=" + key("k1")}, "--sqlite", db)
	c := srv.client(t, "")
	c.ok("documents", "put", writeFile(t, t.TempDir(), "held.yaml", payloadDoc))
	var r run
	c.json(&r, "start", "held", "--kind", "document", "--input", `{"note": "`+payloadMark+`-input"}`)
	waitStep(c, r.ID, "hold", "waiting")
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log())
	}

	reencode := func(env ...string) (int, string, string) {
		cmd := exec.Command(hephBin, "payloads", "reencode", "--sqlite", db, "-o", "json")
		cmd.Env = append(baseEnv(), env...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run()
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	// Without k1 it cannot read what k1 wrote: it fails naming k1.
	if code, _, errOut := reencode("HEPH_PAYLOAD_KEYS=" + key("k2")); code == 0 || !strings.Contains(errOut, `payload key not found`) || !strings.Contains(errOut, `k1`) {
		t.Fatalf("reencode without k1: exit %d, %s", code, errOut)
	}
	code, out, errOut := reencode("HEPH_PAYLOAD_KEYS="+key("k1")+","+key("k2"), "HEPH_PAYLOAD_WRITE_KEY=k2")
	if code != 0 {
		t.Fatalf("reencode: exit %d: %s", code, errOut)
	}
	var tables []struct {
		Table         string
		Rows, Changed int
	}
	if err := json.Unmarshal([]byte(out), &tables); err != nil || len(tables) != len(store.PayloadTables) || tables[0].Table != "runs" || tables[0].Changed == 0 {
		t.Fatalf("reencode printed %s (%v)", out, err)
	}
	// Again: nothing left to change.
	if code, out, _ := reencode("HEPH_PAYLOAD_KEYS="+key("k1")+","+key("k2"), "HEPH_PAYLOAD_WRITE_KEY=k2"); code != 0 || strings.Contains(out, `"changed": 1`) || !strings.Contains(out, `"changed": 0`) {
		t.Fatalf("a second reencode: exit %d, %s", code, out)
	}

	srv2 := startServer(t, []string{"HEPH_INSECURE=true", "HEPH_PAYLOAD_KEYS=" + key("k2")}, "--sqlite", db)
	c2 := srv2.client(t, "")
	if shown := c2.ok("show", r.ID, "-o", "json").stdout; !strings.Contains(shown, payloadMark+"-input") {
		t.Fatalf("a server with k2 only shows:\n%s", shown)
	}
	c2.ok("resume", r.ID, "ok")
	waitStatus(c2, r.ID, "completed")
}

// heph server --payload-blobs: a large input goes to the blob directory
// (the SQLite file holds a reference, not the value), reads back whole
// through the API; heph payloads sweep keeps the referenced blobs and
// deletes an orphan.
func TestPayloadBlobsSQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "heph.db")
	blobs := t.TempDir()
	url := "file://" + blobs + "?create_dir=true"
	srv := startServer(t, []string{"HEPH_INSECURE=true", "HEPH_PAYLOAD_BLOBS=" + url}, "--sqlite", db, "--payload-offload-above", "1024")
	c := srv.client(t, "")
	c.ok("documents", "put", writeFile(t, t.TempDir(), "held.yaml", payloadDoc))
	big := strings.Repeat(payloadMark+" ", 500)
	var r run
	c.json(&r, "start", "held", "--kind", "document", "--input", `{"note": "`+big+`"}`)
	waitStep(c, r.ID, "hold", "waiting")
	if shown := c.ok("show", r.ID, "-o", "json").stdout; !strings.Contains(shown, big) {
		t.Fatalf("show does not give the large input back whole:\n%.300s", shown)
	}
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log())
	}
	raw := sqliteBytes(t, db)
	if strings.Contains(raw, payloadMark) || !strings.Contains(raw, `"$heph":"blob/1"`) {
		t.Fatal("the database file holds the large value, or no blob reference")
	}
	files := func() []string {
		var out []string
		_ = filepath.WalkDir(blobs, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".attrs") {
				out = append(out, p)
			}
			return nil
		})
		return out
	}
	kept := files()
	if len(kept) == 0 {
		t.Fatal("no blob written")
	}
	orphan := filepath.Join(blobs, "heph", "sha256", strings.Repeat("ab", 32))
	if err := os.WriteFile(orphan, []byte(`"orphan"`), 0o600); err != nil {
		t.Fatal(err)
	}
	sweep := exec.Command(hephBin, "payloads", "sweep", "--sqlite", db, "--payload-blobs", url, "--grace", "1ns", "-o", "json")
	sweep.Env = baseEnv()
	out, err := sweep.Output()
	var res struct{ Blobs, Old, Deleted int }
	// Deleted: the orphan, and the blobs of tasks done (their rows are
	// gone); kept: those of the run's input and history.
	if err != nil || json.Unmarshal(out, &res) != nil || res.Deleted < 1 || res.Blobs != len(kept)+1 {
		t.Fatalf("sweep: %v, %s: want the orphan deleted of %d blobs", err, out, len(kept)+1)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("the orphan is still there: %v", err)
	}
	if left := files(); len(left) == 0 || len(left) != len(kept)+1-res.Deleted {
		t.Fatalf("blobs left %v after %d deleted", left, res.Deleted)
	}
	// What the rows refer to is still there: the run reads back whole
	// and goes on.
	srv = startServer(t, []string{"HEPH_INSECURE=true", "HEPH_PAYLOAD_BLOBS=" + url}, "--sqlite", db, "--payload-offload-above", "1024")
	c = srv.client(t, "")
	if shown := c.ok("show", r.ID, "-o", "json").stdout; !strings.Contains(shown, big) {
		t.Fatalf("show after the sweep does not give the large input back:\n%.300s", shown)
	}
	c.ok("resume", r.ID, "ok")
	waitStatus(c, r.ID, "completed")
}

// sqliteBytes is the content of a SQLite database file and its
// write-ahead log.
func sqliteBytes(t *testing.T, db string) string {
	t.Helper()
	var raw strings.Builder
	for _, f := range []string{db, db + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		raw.Write(b)
	}
	return raw.String()
}
