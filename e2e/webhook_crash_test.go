package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// webhookEnvDSN makes this binary the process that the webhook crash test
// kills mid-delivery.
const webhookEnvDSN = "HEPH_WEBHOOK_CHILD_DSN"

func webhookCrashFlow() *flow.Flow {
	b := flow.New("wh.crash")
	flow.Step(b, "work", func(ctx context.Context, in string) (string, error) { return in + "!", nil })
	return b.Start("work").Edge("work", flow.EventOK, flow.Done).MustBuild()
}

// webhookChild runs a client that completes one run and sends its
// webhook delivery, then waits to be killed.
func webhookChild(dsn string) error {
	ctx := context.Background()
	st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn})
	if err != nil {
		return err
	}
	c, err := heph.New(&heph.Config{Store: st, WorkerID: "child", PollInterval: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	if err := c.Register(webhookCrashFlow()); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	r, err := c.StartRun(ctx, "wh.crash", "x", nil)
	if err != nil {
		return err
	}
	fmt.Printf("started %s\n", r.ID)
	select {} // until SIGKILL
}

// A server process killed (SIGKILL) while a receiver holds its webhook
// request loses nothing: the delivery stays leased to the dead process,
// unrecorded, and another process sends it, with the same id and a valid
// signature, once the lease has ended.
func TestWebhookDeliverySurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := pgtest.DSN(t)
	st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	var (
		mu     sync.Mutex
		secret string
		ids    []string
		clk    *clock.Fake
	)
	first := make(chan struct{})
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		ids = append(ids, r.Header.Get(heph.WebhookIDHeader))
		n, now := len(ids), time.Now()
		if clk != nil {
			now = clk.Now()
		}
		err := heph.VerifyWebhook(secret, r.Header, body, now, 10*time.Minute)
		mu.Unlock()
		if err != nil {
			t.Errorf("request %d: %v", n, err)
		}
		if n == 1 {
			close(first)
			<-r.Context().Done() // held until the sender dies
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()

	admin, err := heph.New(&heph.Config{Store: st, Webhooks: heph.WebhookConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	w, s, err := admin.CreateWebhook(ctx, &heph.NewWebhook{URL: rcv.URL, Events: []string{heph.WebhookRunCompleted}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	secret = s
	mu.Unlock()

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), webhookEnvDSN+"="+dsn)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	runID, ok := strings.CutPrefix(strings.TrimSpace(line), "started ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		t.Fatalf("child said %q, %v", line, err)
	}
	select {
	case <-first:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		t.Fatal("the child never sent the delivery")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	list, err := admin.WebhookDeliveries(ctx, w.ID, nil)
	if err != nil || len(list) != 1 || list[0].Status != "pending" || list[0].Attempts != 0 || list[0].RunID != runID {
		t.Fatalf("after the kill: %+v, %v; want one pending delivery of run %s, no attempt recorded", list, err, runID)
	}
	// Another process, whose clock is past the dead one's lease.
	mu.Lock()
	clk = clock.NewFake(time.Now().Add(5 * time.Minute))
	mu.Unlock()
	other, err := heph.New(&heph.Config{Store: st, Clock: clk, WorkerID: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Stop(context.Background()) }()
	for {
		list, err = other.WebhookDeliveries(ctx, w.ID, &heph.WebhookDeliveryFilter{Status: "delivered"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the delivery was never sent again")
		}
		clk.Advance(time.Second)
		time.Sleep(5 * time.Millisecond) // polling for the state, not timing it
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != ids[1] || ids[0] != list[0].ID || list[0].Attempts != 1 {
		t.Errorf("requests with ids %v; delivery %+v", ids, list[0])
	}
}
