package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// wait is the deadline of anything the tests wait for: generous, for a
// loaded machine.
const wait = 60 * time.Second

// baseEnv is the environment of every heph process: the system's path and
// home, and nothing of the caller's HEPH_* variables but HEPH_EXAMPLES=false,
// so that a server seeds no example run unless a test asks for them.
func baseEnv() []string {
	env := []string{"HEPH_EXAMPLES=false"}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "SYSTEMROOT"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// server is a running heph server.
type server struct {
	url   string
	cmd   *exec.Cmd
	mu    sync.Mutex
	logs  bytes.Buffer  // its standard error after the first line
	read  chan struct{} // closed once standard error is closed
	done  chan error    // the process's exit, once
	exit  error
	ended bool
}

var listening = regexp.MustCompile(`^heph: listening on (http://\S+)$`)

// startServer runs heph server with args (and env, KEY=VALUE) on a free
// loopback port, and waits until it listens. It is stopped with SIGTERM
// when the test ends, and must exit 0.
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	return startServerIn(t, "", env, args...)
}

// startServerIn is startServer in a working directory ("" for the
// test's).
func startServerIn(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(hephBin, append([]string{"server", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(baseEnv(), env...)
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, read: make(chan struct{}), done: make(chan error, 1)}
	first := make(chan string, 1)
	go func() {
		defer close(s.read)
		sc := bufio.NewScanner(stderr)
		line := 0
		for sc.Scan() {
			if line++; line == 1 {
				first <- sc.Text()
				continue
			}
			s.mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
		if line == 0 {
			close(first)
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-s.read
		s.done <- cmd.Wait()
	}()
	select {
	case l, ok := <-first:
		m := listening.FindStringSubmatch(l)
		if !ok || m == nil {
			err := s.wait(t)
			t.Fatalf("heph server %v: first line %q, exit %v, then:\n%s", args, l, err, s.log())
		}
		s.url = m[1]
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		err := s.wait(t)
		t.Fatalf("heph server %v: not listening after %v (exit %v):\n%s", args, wait, err, s.log())
	}
	t.Cleanup(func() {
		if s.stop(t, syscall.SIGTERM) != nil {
			t.Errorf("heph server %v did not stop cleanly: %v\n%s", args, s.exit, s.log())
		}
	})
	return s
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// wait waits for the process to end and returns how it ended.
func (s *server) wait(t *testing.T) error {
	t.Helper()
	if s.ended {
		return s.exit
	}
	select {
	case s.exit = <-s.done:
	case <-time.After(wait):
		_ = s.cmd.Process.Kill()
		s.exit = <-s.done
		t.Errorf("heph server did not end within %v; killed", wait)
	}
	s.ended = true
	return s.exit
}

// stop sends sig and waits for the process to end.
func (s *server) stop(t *testing.T, sig os.Signal) error {
	t.Helper()
	if !s.ended {
		_ = s.cmd.Process.Signal(sig)
	}
	return s.wait(t)
}

// result is what a heph command did.
type result struct {
	args           []string
	code           int
	stdout, stderr string
}

func (r *result) String() string {
	return fmt.Sprintf("heph %s: exit %d\nstdout:\n%sstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// client runs heph commands against a server with a token.
type client struct {
	t     *testing.T
	url   string
	token string
	stdin string
}

func (s *server) client(t *testing.T, token string) *client {
	return &client{t: t, url: s.url, token: token}
}

// run runs heph with args and returns what it did.
func (c *client) run(args ...string) *result {
	c.t.Helper()
	r, err := c.exec(args...)
	if err != nil {
		c.t.Fatalf("heph %v: %v", args, err)
	}
	return r
}

// exec runs heph with args; it may run outside the test's goroutine.
func (c *client) exec(args ...string) (*result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, hephBin, args...)
	cmd.Env = append(baseEnv(), "HEPH_ADDR="+c.url)
	if c.token != "" {
		cmd.Env = append(cmd.Env, "HEPH_TOKEN="+c.token)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errOut, strings.NewReader(c.stdin)
	err := cmd.Run()
	r := &result{args: args, stdout: out.String(), stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		return nil, err
	}
	return r, nil
}

// ok runs heph and fails the test unless it exits 0.
func (c *client) ok(args ...string) *result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("%s", r)
	}
	return r
}

// fails runs heph and fails the test unless it exits code with stderr
// holding msg.
func (c *client) fails(code int, msg string, args ...string) *result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != code || !strings.Contains(r.stderr, msg) {
		c.t.Fatalf("want exit %d and %q in stderr; %s", code, msg, r)
	}
	return r
}

// json runs heph with -o json, which must succeed, and decodes its output
// into v.
func (c *client) json(v any, args ...string) {
	c.t.Helper()
	r := c.ok(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		c.t.Fatalf("decode the output of %v: %v\n%s", args, err, r.stdout)
	}
}

// lines checks that out matches every pattern (multi-line mode).
func lines(t *testing.T, r *result, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)` + p).MatchString(r.stdout) {
			t.Errorf("output does not match %q; %s", p, r)
		}
	}
}

// eventually runs fn until it returns true or the deadline passes.
func eventually(t *testing.T, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
