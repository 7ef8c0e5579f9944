package cli_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/flow"
)

// syncBuffer is a buffer written by the command and read by the test.
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

// heph logs prints a run's records; --follow, started before the step
// logs anything, prints the records written after it started and ends
// with the run.
func TestLogsCLIFollow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, st := sqliteClient(t)
	release := make(chan struct{})
	b := flow.New("chatty")
	flow.Step(b, "talk", func(ctx context.Context, in string) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		flow.Logger(ctx).Info("first", "n", 1)
		flow.Logger(ctx).Warn("second", "token", "s3cr3t")
		return in, nil
	})
	if err := c.Register(b.MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	env := serveAPI(t, c, st)
	r, err := c.StartRun(ctx, "chatty", "x", nil)
	if err != nil {
		t.Fatal(err)
	}

	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"logs", r.ID, "--follow"}, &cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }})
	}()
	for !strings.HasPrefix(out.String(), "SEQ") { // the command has started
		if ctx.Err() != nil {
			t.Fatal("heph logs --follow printed no header")
		}
		time.Sleep(time.Millisecond) // polling for the output, not timing it
	}
	close(release)
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("heph logs --follow: exit %d, %s", code, errOut.String())
		}
	case <-ctx.Done():
		t.Fatal("heph logs --follow did not end with the run")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^1\s+\S+\s+talk\s+1\s+INFO\s+first\s+\{"n":1\}$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^2\s+\S+\s+talk\s+1\s+WARN\s+second\s+\{"token":"\[redacted\]"\}$`).MatchString(lines[2]) {
		t.Fatalf("follow printed:\n%s", out.String())
	}

	code, jsonOut, _ := heph(t, env, "logs", r.ID, "--level", "warn", "-o", "json")
	if code != 0 || !strings.Contains(jsonOut, `"message": "second"`) || strings.Contains(jsonOut, `"first"`) {
		t.Fatalf("logs --level warn -o json: %d %s", code, jsonOut)
	}
	if code, _, errText := heph(t, env, "logs", r.ID, "--attempt", "-1"); code == 0 || !strings.Contains(errText, "--attempt") {
		t.Fatalf("a negative attempt: %d %s", code, errText)
	}
}
