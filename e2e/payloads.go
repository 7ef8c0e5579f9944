package e2e

// Payloads through a codec (Config.PayloadCodec): every kind of payload
// a run stores reaches the database encoded, and reads back as it was.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// secretMark is the value the payloads carry; a dump of the database
// must not hold it when payloads are encrypted.
const secretMark = "SeCrEt-7f3a9c"

// The workflow of the payload test: an activity whose first attempt
// records heartbeat details and fails, whose second returns them; then
// updates (with a named query over the published state) until a signal.
var (
	secretAdd   = workflow.NewUpdate[string, string]("secret_add")
	secretClose = workflow.NewSignal[string]("secret_close")
	secretFind  = workflow.NewQuery[string, string]("secret_find")
	secretEcho  = workflow.NewActivity("secret.echo", func(ctx context.Context, in string) (string, error) {
		if d, ok, err := workflow.HeartbeatDetails[string](ctx); err != nil || ok {
			return d + "|" + in, err
		}
		workflow.RecordHeartbeat(ctx, in+"-heartbeat")
		// Long enough for a heartbeat or two to store the details.
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
		return "", errors.New("the first attempt fails after its heartbeat")
	})
	secretEchoRetried = secretEcho.WithOptions(workflow.ActivityOptions{RetryPolicy: flow.RetryPolicy{MaxAttempts: 2, InitialBackoff: 10 * time.Millisecond}})
	secretBox         = workflow.New("secret_box", func(ctx workflow.Context, in string) ([]string, error) {
		echoed, err := secretEchoRetried.Execute(ctx, in)
		if err != nil {
			return nil, err
		}
		items := []string{echoed}
		workflow.Publish(ctx, items)
		return workflow.Phase(ctx, items,
			workflow.HandleUpdate(secretAdd, func(ctx workflow.Context, item string, s []string) (workflow.Reply[[]string, string], error) {
				s = append(s, item)
				workflow.Publish(ctx, s)
				return workflow.Respond(s, "added "+item), nil
			}),
			workflow.HandleSignal(secretClose, func(ctx workflow.Context, last string, s []string) workflow.Next[[]string] {
				return workflow.Stop(append(s, last))
			}),
		)
	}).Declare(secretAdd, secretClose)
)

func init() {
	workflow.HandleQuery(secretBox, secretFind, func(s []string, sub string) (string, error) {
		for _, it := range s {
			if strings.Contains(it, sub) {
				return "found " + it, nil
			}
		}
		return "", nil
	})
}

// secretFlow passes the mark from step to step and waits for an event
// whose payload holds it.
func secretFlow() *flow.Flow {
	fb := flow.New("secret_flow")
	flow.Step(fb, "first", func(ctx context.Context, in string) (string, error) { return in + "-first", nil })
	flow.EventStep(fb, "approve", func(ctx context.Context, in string) (flow.Result[string], error) {
		return flow.Wait[string](), nil
	}, flow.Events("approved"), flow.Waits(0))
	flow.Step(fb, "last", func(ctx context.Context, in string) (string, error) {
		first, err := flow.Output[string](ctx, "first")
		if err != nil {
			return "", err
		}
		by, err := flow.Output[map[string]string](ctx, "approve")
		return first + "+" + by["by"], err
	})
	fb.Start("first").Edge("first", "ok", "approve").Edge("approve", "approved", "last").Edge("last", "ok", flow.Done)
	return fb.MustBuild()
}

// secretWaitFlow waits for the event secret.note whose data's note is
// the input's (the mark, then "-wait"), and returns the event's id and note.
func secretWaitFlow(c *heph.Client) *flow.Flow {
	fb := flow.New("secret_wait").Start("await")
	flow.EventStep(fb, "await", func(ctx context.Context, in string) (flow.Result[any], error) {
		err := c.AwaitEvent(ctx, "secret.note", &heph.AwaitEventOptions{Match: "event.data.note == input.note", Input: map[string]string{"note": in + "-wait"}})
		if err != nil {
			return flow.Result[any]{}, flow.NonRetryable(err)
		}
		return flow.Wait[any](), nil
	}, flow.Events(heph.EventReceived), flow.Waits(0))
	flow.Step(fb, "got", func(ctx context.Context, in any) (string, error) {
		e, err := flow.Output[heph.EventRecord](ctx, "await")
		if err != nil {
			return "", err
		}
		var data struct{ Note string }
		err = json.Unmarshal(e.Data, &data)
		return e.ID + " " + data.Note, err
	})
	fb.Edge("await", heph.EventReceived, "got").Edge("got", "ok", flow.Done)
	return fb.MustBuild()
}

type secretJob struct {
	Note string `json:"note"`
}

// PayloadChain returns a chain for tests: zstd from 1 byte, then AES-GCM
// with the keys named (each id's secret derives from the id) and write
// as the write key.
func PayloadChain(t testing.TB, write string, keys ...string) *codec.Chain {
	t.Helper()
	return PayloadChainFrom(t, 1, write, keys...)
}

// PayloadChainFrom is PayloadChain with zstd from minSize bytes (0: the
// default, 1 KiB).
func PayloadChainFrom(t testing.TB, minSize int, write string, keys ...string) *codec.Chain {
	t.Helper()
	var ks []codec.Key
	for _, id := range keys {
		secret := sha256.Sum256([]byte("payload key " + id))
		ks = append(ks, codec.Key{ID: id, Secret: secret[:]})
	}
	ring, err := codec.NewKeyring(&codec.KeyringConfig{Keys: ks, WriteKey: write})
	if err != nil {
		t.Fatal(err)
	}
	z, err := codec.NewZstd(&codec.ZstdConfig{MinSize: minSize})
	if err != nil {
		t.Fatal(err)
	}
	a, err := codec.NewAESGCM(ring)
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.NewChain(&codec.ChainConfig{Codecs: []codec.Codec{z, a}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// RunPayloads runs the payload tests on b, whose Dump must be set.
func RunPayloads(t *testing.T, b Backend) {
	runAll(t, b, []subtest{
		{"EncryptedAtRest", func(t *testing.T, b Backend) { testPayloadsAtRest(t, b, true) }},
		{"PlainControl", func(t *testing.T, b Backend) { testPayloadsAtRest(t, b, false) }},
		{"Rotation", testPayloadRotation},
	})
}

// testPayloadsAtRest runs a flow, a workflow (activity with heartbeat
// details and a retry, an update, a named query, a signal, published
// state), a job and a schedule, all carrying the mark, and reads every
// result back; then it dumps the database: with a codec the mark is
// nowhere, without one (the control, which shows the dump sees the
// payloads) it is there.
func testPayloadsAtRest(t *testing.T, b Backend, encrypt bool) {
	if b.Dump == nil {
		t.Fatalf("backend %s has no Dump", b.Name)
	}
	ctx := ctxT(t)
	jobDone := make(chan string, 1)
	kind := job.MustNew("secret_job", func(ctx context.Context, j *job.Job[secretJob]) error {
		select {
		case jobDone <- j.Args.Note:
		default:
		}
		return nil
	}, nil)
	mod := func(cfg *heph.Config) {
		if encrypt {
			cfg.PayloadCodec = PayloadChain(t, "k1", "k1")
		}
		cfg.HeartbeatInterval = 50 * time.Millisecond
	}
	e := newWfEnv(t, b, mod, wfs(secretBox), secretEcho)
	if err := e.c.Register(secretFlow(), secretWaitFlow(e.c)); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RegisterJobs(kind); err != nil {
		t.Fatal(err)
	}

	// The flow.
	fr, err := e.c.StartRun(ctx, "secret_flow", secretMark, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(fr.ID, heph.StatusWaiting)
	if err := e.c.ResumeRun(ctx, fr.ID, "approved", &heph.ResumeOptions{Payload: map[string]string{"by": secretMark + "-by"}}); err != nil {
		t.Fatal(err)
	}
	done, err := e.c.WaitRun(ctx, fr.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, done, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"last":"`+secretMark+`-first+`+secretMark+`-by"}`)

	secretWait(t, ctx, e.c)

	// The workflow.
	wr, err := heph.StartWorkflow(ctx, e.c, secretBox, secretMark+"-in", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Updates are taken once the activity is done (the phase).
	waitFor(t, "the workflow to publish its items", func() bool {
		found, err := wr.Query(ctx, "secret_find", secretMark+"-in")
		return err == nil && strings.HasPrefix(string(found), `"found`)
	})
	reply, err := wr.Update(ctx, "secret_add", secretMark+"-update", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, reply, `"added `+secretMark+`-update"`)
	found, err := wr.Query(ctx, "secret_find", secretMark+"-upd")
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, found, `"found `+secretMark+`-update"`)
	if err := wr.Signal(ctx, "secret_close", secretMark+"-signal"); err != nil {
		t.Fatal(err)
	}
	out, err := wr.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{secretMark + "-in-heartbeat|" + secretMark + "-in", secretMark + "-update", secretMark + "-signal"}
	if strings.Join(out, ",") != strings.Join(want, ",") {
		t.Fatalf("workflow output %q, want %q", out, want)
	}

	// A job, and a schedule (paused: it keeps its input, starts nothing).
	if _, err := heph.InsertJob(ctx, e.c, kind, secretJob{Note: secretMark + "-job"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case note := <-jobDone:
		if note != secretMark+"-job" {
			t.Fatalf("job args read back as %q", note)
		}
	case <-ctx.Done():
		t.Fatal("the job did not run")
	}
	sc, err := e.c.CreateSchedule(ctx, &heph.Schedule{ID: "secret", Target: heph.TargetFlow, TargetName: "secret_flow", Every: time.Hour, Input: secretMark + "-schedule", Paused: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.c.GetSchedule(ctx, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := got.Input.(json.RawMessage); string(in) != `"`+secretMark+`-schedule"` {
		t.Fatalf("schedule input read back as %s", in)
	}

	// What the database holds.
	dump := b.Dump(t, e.st)
	if n := strings.Count(dump, secretMark); encrypt && n > 0 {
		i := strings.Index(dump, secretMark)
		t.Fatalf("the database holds the mark %d times, encrypted; first at: %s", n, dump[max(0, i-300):min(len(dump), i+100)])
	} else if !encrypt && n < 8 {
		t.Fatalf("the database holds the mark %d times without a codec: the dump does not see the payloads", n)
	}
	for _, kind := range []string{"-first", "-by", "-in-heartbeat", "-update", "-signal", "-job", "-schedule", "-wait", "-other"} {
		if !encrypt && !strings.Contains(dump, secretMark+kind) && !strings.Contains(dump, kind+secretMark) {
			t.Errorf("without a codec, the database does not hold the payload %q: the workload does not store it", kind)
		}
	}
	if encrypt && !strings.Contains(dump, `"$heph"`) {
		t.Fatal("the database holds no envelope")
	}
}

// secretWait runs secret_wait: an event wait whose match reads its input
// and the event's data, both carrying the mark. The event that does not
// match is passed over, the one that does resumes the step.
func secretWait(t *testing.T, ctx context.Context, c *heph.Client) {
	wait, err := c.StartRun(ctx, "secret_wait", secretMark, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the event wait", func() bool {
		ws, err := c.EventWaits(ctx, wait.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(ws) == 1
	})
	for _, ev := range []struct{ id, note string }{{"secret-other", secretMark + "-other"}, {"secret-match", secretMark + "-wait"}} {
		if _, err := c.SendEvent(ctx, "secret.note", map[string]string{"note": ev.note}, &heph.SendEventOptions{ID: ev.id}); err != nil {
			t.Fatal(err)
		}
	}
	wantCompletedWith(ctx, t, c, wait.ID, `{"got":"secret-match `+secretMark+`-wait"}`)
}

// testPayloadRotation: runs written with key k1 read after k2 became the
// write key (k1 kept for reading); without k1 they fail to read, naming
// the key.
func testPayloadRotation(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	ctx := ctxT(t)
	c1 := startClient(t, st, func(cfg *heph.Config) { cfg.PayloadCodec = PayloadChain(t, "k1", "k1") }, secretFlow())
	fr, err := c1.StartRun(ctx, "secret_flow", secretMark, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the flow to wait", func() bool {
		r, err := c1.GetRun(ctx, fr.ID)
		return err == nil && r.Status == heph.StatusWaiting
	})
	// Under k1 too: a run's event wait (its input) and an event in a
	// debounced trigger's open group (the input mapped from it).
	if err := c1.Register(secretWaitFlow(c1)); err != nil {
		t.Fatal(err)
	}
	wr, err := c1.StartRun(ctx, "secret_wait", secretMark, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.DeclareTriggers(ctx, &heph.Trigger{Name: "secret_debounce", Event: "secret.grouped", Target: heph.TargetFlow,
		TargetName: "secret_flow", Input: "event.data.note", Debounce: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.SendEvent(ctx, "secret.grouped", map[string]string{"note": secretMark + "-group"}, &heph.SendEventOptions{ID: "secret-grouped"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the event wait and the group", func() bool {
		ws, err := c1.EventWaits(ctx, wr.ID)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := c1.EventFirings(ctx, "secret-grouped")
		if err != nil {
			t.Fatal(err)
		}
		return len(ws) == 1 && len(fs) == 1 && fs[0].Status == heph.FiringGrouped
	})
	stopClient(c1)
	_ = st.Close()

	// Only k2: the run's payloads do not read.
	st2 := reopen(t)
	c2, err := heph.New(&heph.Config{Store: st2, PayloadCodec: PayloadChain(t, "k2", "k2"), Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.GetRun(ctx, fr.ID); !errors.Is(err, codec.ErrKeyNotFound) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("reading a run written with k1 holding only k2: %v, want ErrKeyNotFound naming k1", err)
	}

	// k2 writes, k1 reads: the run goes on and completes.
	c3 := startClient(t, st2, func(cfg *heph.Config) { cfg.PayloadCodec = PayloadChain(t, "k2", "k1", "k2") }, secretFlow())
	if err := c3.ResumeRun(ctx, fr.ID, "approved", &heph.ResumeOptions{Payload: map[string]string{"by": "k2"}}); err != nil {
		t.Fatal(err)
	}
	wantCompletedWith(ctx, t, c3, fr.ID, `{"last":"`+secretMark+`-first+k2"}`)
	dump := b.Dump(t, st2)
	if !strings.Contains(dump, `"k1"`) || !strings.Contains(dump, `"k2"`) {
		t.Fatal("the database does not hold envelopes of both keys")
	}

	// Re-encode: then k1 is in no envelope, and k2 alone reads the run.
	tables, err := c3.ReencodePayloads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for _, d := range tables {
		changed += d.Changed
	}
	if changed == 0 || len(tables) != len(store.PayloadTables) {
		t.Fatalf("reencode: %+v", tables)
	}
	if dump := b.Dump(t, st2); strings.Contains(dump, `"k1"`) {
		i := strings.Index(dump, `"k1"`)
		t.Fatalf("after reencode the database holds an envelope of k1: %s", dump[max(0, i-200):min(len(dump), i+50)])
	}
	c4, err := heph.New(&heph.Config{Store: st2, PayloadCodec: PayloadChain(t, "k2", "k2"), Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	r4, err := c4.GetRun(ctx, fr.ID)
	if err != nil || string(r4.Input) != `"`+secretMark+`"` {
		t.Fatalf("read with k2 only after reencode: %v, %v", r4, err)
	}
	if _, err := c4.History(ctx, fr.ID); err != nil {
		t.Fatalf("history with k2 only after reencode: %v", err)
	}
	if ws, err := c4.EventWaits(ctx, wr.ID); err != nil || len(ws) != 1 {
		t.Fatalf("event waits with k2 only after reencode: %v, %v", ws, err)
	}
}
