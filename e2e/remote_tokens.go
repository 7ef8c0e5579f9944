package e2e

// Task tokens are capabilities: a token that ClaimRemote did not hand out
// for the task's current claim, or one used by another identity than the
// one that claimed, is refused and writes nothing; the attempt's times
// are the server's, not the token's.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// tokenParts reads what a version 2 token holds: the task's id, the
// claim's fence and the secret. It fails the test if the token holds
// anything else (no run, no times).
func tokenParts(t *testing.T, tok string) (taskID, fence int64, secret []byte) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) == 0 || b[0] != 2 {
		t.Fatalf("token %q is not a version 2 token (%v)", tok, err)
	}
	b = b[1:]
	id, n := binary.Varint(b)
	b = b[n:]
	fence, m := binary.Varint(b)
	b = b[m:]
	if n <= 0 || m <= 0 || len(b) != 32 {
		t.Fatalf("token %q: want the task id, the fence and a 32-byte secret, nothing more", tok)
	}
	return id, fence, b
}

// makeToken builds a version 2 token as a forger would.
func makeToken(taskID, fence int64, secret []byte) string {
	b := []byte{2}
	b = binary.AppendVarint(b, taskID)
	b = binary.AppendVarint(b, fence)
	return base64.RawURLEncoding.EncodeToString(append(b, secret...))
}

// oldToken builds a token of the format of older servers (version 1: no
// secret; the claim's times and run in the token).
func oldToken(taskID, fence int64, runID string, claimed time.Time) string {
	b := []byte{1}
	for _, v := range []int64{taskID, fence, claimed.UnixMicro(), time.Hour.Microseconds(), time.Minute.Microseconds()} {
		b = binary.AppendVarint(b, v)
	}
	return base64.RawURLEncoding.EncodeToString(append(b, runID...))
}

func randomSecret() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}

// refusedEverywhere checks that heartbeat, complete and fail with tok, as
// ctx's caller, are each refused with want.
func refusedEverywhere(t *testing.T, ctx context.Context, c *heph.Client, what, tok string, want error) {
	t.Helper()
	if _, err := c.HeartbeatRemote(ctx, tok, json.RawMessage(`{"evil":1}`)); !errors.Is(err, want) {
		t.Errorf("%s: heartbeat: %v, want %v", what, err, want)
	}
	if err := c.CompleteRemote(ctx, tok, json.RawMessage(`"intruder"`)); !errors.Is(err, want) {
		t.Errorf("%s: complete: %v, want %v", what, err, want)
	}
	if err := c.FailRemote(ctx, tok, "intruder", false, nil); !errors.Is(err, want) {
		t.Errorf("%s: fail: %v, want %v", what, err, want)
	}
}

// unchanged checks that nothing was written for a run and its task: the
// history has its length, the run still runs, the task keeps its claim.
func (e *env) unchanged(what, runID string, hlen int, taskID int64, owner string, fence int64) {
	e.t.Helper()
	if h := e.history(runID); len(h) != hlen {
		e.t.Fatalf("%s: run %s has %d history entries, had %d: %v", what, runID, len(h), hlen, entries(h))
	}
	r, err := e.c.GetRun(ctxT(e.t), runID)
	if err != nil {
		e.t.Fatal(err)
	}
	wantStatus(e.t, r, heph.StatusRunning)
	tk, err := e.st.GetTask(ctxT(e.t), taskID)
	if err != nil {
		e.t.Fatalf("%s: task %d: %v", what, taskID, err)
	}
	if tk.Owner != owner || tk.Token != fence || tk.Details != nil {
		e.t.Fatalf("%s: task %d is held by %q (claim %d, details %s); want %q (claim %d) and no details", what, taskID, tk.Owner, tk.Token, tk.Details, owner, fence)
	}
}

// Forged, edited, another identity's, and old-format tokens are refused
// and write nothing; the holder completes afterwards.
func testRemoteTokens(t *testing.T, b Backend) {
	other := flow.New("remote-tok-other")
	flow.Remote(other, "work", "other", flow.Timeout(time.Hour))
	e := newEnv(t, b, nil, remoteOnly("remote-tok"), other.MustBuild())
	ctx := ctxT(t)
	asAlice, asBob := heph.WithRemoteCaller(ctx, "alice"), heph.WithRemoteCaller(ctx, "bob")
	r, err := e.c.StartRun(ctx, "remote-tok", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	alice := newRemoteWorker(t, e.c, "a", []string{"work"}, nil)
	alice.claim.Principal = "alice"
	tk := alice.next()
	id, fence, secret := tokenParts(t, tk.Token)

	// A task nobody claimed, of another run.
	r2, err := e.c.StartRun(ctx, "remote-tok-other", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	stranded, err := e.st.StrandedTasks(ctx, &store.StrandedParams{Queue: "default", ReadyBefore: time.Now().Add(time.Hour), Now: time.Now()})
	if err != nil || len(stranded) != 1 || stranded[0].RunID != r2.ID {
		t.Fatalf("the unclaimed task of run %s: %v, %v", r2.ID, stranded, err)
	}
	id2 := stranded[0].ID
	h1, h2 := len(e.history(r.ID)), len(e.history(r2.ID))

	// The third character from the end: every bit of it is significant
	// (the last may hold padding bits a decoder ignores, so editing it can
	// give the same bytes).
	edited := []byte(tk.Token)
	if i := len(edited) - 3; edited[i] == 'A' {
		edited[i] = 'B'
	} else {
		edited[i] = 'A'
	}
	flipped := bytes.Clone(secret)
	flipped[0] ^= 1
	for _, c := range []struct {
		what string
		ctx  context.Context
		tok  string
		want error
	}{
		{"a token forged for a task never claimed", asAlice, makeToken(id2, 1, randomSecret()), heph.ErrTokenRefused},
		{"a token forged for the claimed task", asAlice, makeToken(id, fence, randomSecret()), heph.ErrTokenRefused},
		{"a token naming a claim not made yet", asAlice, makeToken(id, fence+1, secret), heph.ErrTokenRefused},
		{"an edited token", asAlice, string(edited), heph.ErrTokenRefused},
		{"a token with one bit of its secret changed", asAlice, makeToken(id, fence, flipped), heph.ErrTokenRefused},
		{"another identity's token", asBob, tk.Token, heph.ErrTokenRefused},
		{"a token used by a caller in the process", ctx, tk.Token, heph.ErrTokenRefused},
		{"an old-format token", asAlice, oldToken(id, fence, r.ID, time.Now()), heph.ErrInvalidToken},
	} {
		refusedEverywhere(t, c.ctx, e.c, c.what, c.tok, c.want)
		e.unchanged(c.what, r.ID, h1, id, "a", fence)
		if len(e.history(r2.ID)) != h2 {
			t.Fatalf("%s: run %s changed", c.what, r2.ID)
		}
	}
	// A stolen token is told by nothing from a made-up one.
	errStolen := e.c.CompleteRemote(asBob, tk.Token, nil)
	errForged := e.c.CompleteRemote(asAlice, makeToken(id, fence, randomSecret()), nil)
	if errStolen.Error() != errForged.Error() {
		t.Errorf("a stolen token's error %q differs from a forged one's %q", errStolen, errForged)
	}
	if err := e.c.CompleteRemote(asAlice, oldToken(id, fence, r.ID, time.Now()), nil); !strings.Contains(err.Error(), "older server; claim the task again") {
		t.Errorf("an old-format token's error %q does not say to claim again", err)
	}

	// The holder is unaffected.
	if cancelled, err := e.c.HeartbeatRemote(asAlice, tk.Token, json.RawMessage(`{"page":3}`)); err != nil || cancelled {
		t.Fatalf("the holder's heartbeat: %v, %v", cancelled, err)
	}
	if err := e.c.CompleteRemote(asAlice, tk.Token, json.RawMessage(`"from alice"`)); err != nil {
		t.Fatalf("the holder's completion: %v", err)
	}
	got := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, got.Output, `{"work":"from alice"}`)
	if n := count(e.history(r.ID), hephtype.EventStepCompleted, "work"); n != 1 {
		t.Fatalf("work completed %d times", n)
	}
	// Its token is spent: a second use is a lost task, as before.
	if err := e.c.CompleteRemote(asAlice, tk.Token, json.RawMessage(`"again"`)); !errors.Is(err, heph.ErrTaskLost) {
		t.Fatalf("a second completion: %v, want ErrTaskLost", err)
	}
}

// An earlier claim's token, once the task was claimed again, is lost
// whoever uses it; the new holder completes.
func testRemoteTokenReplay(t *testing.T, b Backend) {
	fc := clock.NewFake(time.Now())
	e := newEnv(t, b, func(c *heph.Config) { c.Clock = fc }, remoteOnly("remote-replay"))
	ctx := ctxT(t)
	asAlice, asBob := heph.WithRemoteCaller(ctx, "alice"), heph.WithRemoteCaller(ctx, "bob")
	r, err := e.c.StartRun(ctx, "remote-replay", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	alice := newRemoteWorker(t, e.c, "a", []string{"work"}, nil)
	alice.claim.Principal, alice.claim.Lease = "alice", time.Minute
	first := alice.next()
	fc.Advance(2 * time.Minute) // alice's lease ends without a heartbeat
	bob := newRemoteWorker(t, e.c, "b", []string{"work"}, nil)
	bob.claim.Principal, bob.claim.Lease = "bob", time.Hour
	second := bob.next()
	id, fence, _ := tokenParts(t, second.Token)
	if first.Token == second.Token {
		t.Fatal("the second claim got the first one's token")
	}
	hlen := len(e.history(r.ID))
	refusedEverywhere(t, asAlice, e.c, "the earlier claim's token", first.Token, heph.ErrTaskLost)
	refusedEverywhere(t, asBob, e.c, "the earlier claim's token used by the new holder", first.Token, heph.ErrTaskLost)
	refusedEverywhere(t, asAlice, e.c, "the new claim's token used by the earlier holder", second.Token, heph.ErrTokenRefused)
	e.unchanged("replays", r.ID, hlen, id, "b", fence)
	if err := e.c.CompleteRemote(asBob, second.Token, json.RawMessage(`"from bob"`)); err != nil {
		t.Fatalf("the new holder's completion: %v", err)
	}
	got := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, got.Output, `{"work":"from bob"}`)
}

// The attempt's deadline is the one the server recorded at the claim: a
// token carries no time to edit, an edited one is invalid, and a
// completion after the deadline is a timeout.
func testRemoteServerDeadline(t *testing.T, b Backend) {
	fc := clock.NewFake(time.Now())
	e := newEnv(t, b, func(c *heph.Config) { c.Clock = fc }, remoteOnly("remote-dl", flow.Timeout(time.Minute),
		flow.Retry(flow.RetryPolicy{MaxAttempts: 1})))
	ctx := heph.WithRemoteCaller(ctxT(t), "alice")
	r, err := e.c.StartRun(ctx, "remote-dl", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newRemoteWorker(t, e.c, "a", []string{"work"}, nil)
	w.claim.Principal, w.claim.Lease = "alice", time.Hour
	tk := w.next()
	id, fence, secret := tokenParts(t, tk.Token) // and nothing else: no times
	fc.Advance(2 * time.Minute)
	hlen := len(e.history(r.ID))
	// Whatever is changed in a token, it is invalid, and writes nothing:
	// not even the timeout.
	for i := range len(secret) {
		s := bytes.Clone(secret)
		s[i] ^= 0x80
		if err := e.c.CompleteRemote(ctx, makeToken(id, fence, s), json.RawMessage(`"late"`)); !errors.Is(err, heph.ErrTokenRefused) {
			t.Fatalf("a token with byte %d of its secret changed: %v, want ErrTokenRefused", i, err)
		}
	}
	e.unchanged("edited tokens past the deadline", r.ID, hlen, id, "a", fence)
	if err := e.c.CompleteRemote(ctx, tk.Token, json.RawMessage(`"late"`)); !errors.Is(err, heph.ErrTaskLost) {
		t.Fatalf("completion past the deadline: %v; want ErrTaskLost", err)
	}
	got := e.waitStatus(r.ID, heph.StatusFailed)
	if !strings.Contains(got.Error, "timed out after 1m0s") {
		t.Fatalf("run error %q does not tell the timeout", got.Error)
	}
	if n := count(e.history(r.ID), hephtype.EventStepCompleted, "work"); n != 0 {
		t.Fatalf("the late output was recorded (%d completions)", n)
	}
}
