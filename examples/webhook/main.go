// Command webhook reacts to GitHub pushes: it serves a GitHub webhook
// endpoint, POST /hooks/github, whose deliveries are verified with the
// shared secret and stored as github.push events, and a trigger starts
// the deploy flow for every push to main.
//
//	go run ./examples/webhook [-db webhook.db] [-serve 127.0.0.1:8080]
//
// Without -serve it plays GitHub itself: it sends a signed push to main,
// the same delivery again (GitHub redelivers after a timeout), a push to
// a feature branch and a forged delivery, prints what each got and the
// deploy runs, and exits. With -serve it keeps serving: point a GitHub
// webhook (content type application/json, secret
// $GITHUB_WEBHOOK_SECRET) at http://HOST/hooks/github.
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// demoSecret is the secret when $GITHUB_WEBHOOK_SECRET is not set.
const demoSecret = "example-webhook-secret"

// Deploy is the deploy flow's input, mapped from the push by the trigger.
type Deploy struct {
	Commit string `json:"commit"`
	By     string `json:"by"`
}

func deployFlow() *flow.Flow {
	b := flow.New("deploy")
	flow.Step(b, "deploy", func(ctx context.Context, in Deploy) (string, error) {
		return fmt.Sprintf("deployed %.7s (pushed by %s)", in.Commit, in.By), nil
	})
	return b.MustBuild()
}

// deployOnPush starts the deploy flow for each push to main: its
// filter and input are CEL over the event, whose data is GitHub's body.
var deployOnPush = &heph.Trigger{
	Name: "deploy-on-push", Event: "github.push",
	Target: heph.TargetFlow, TargetName: "deploy",
	Filter: `event.data.ref == "refs/heads/main"`,
	Input:  `{"commit": event.data.after, "by": event.data.pusher.name}`,
}

func main() {
	db := flag.String("db", "webhook.db", "SQLite database file")
	serve := flag.String("serve", "", "keep serving on this address instead of playing GitHub")
	flag.Parse()
	secret := os.Getenv("GITHUB_WEBHOOK_SECRET")
	if secret == "" {
		secret = demoSecret
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *db, secret, *serve); err != nil {
		log.Fatal(err)
	}
}

// run starts the client and the server; it plays GitHub when addr is "".
func run(ctx context.Context, path, secret, addr string) error {
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer st.Close()
	quiet := slog.New(slog.DiscardHandler)
	c, err := heph.New(&heph.Config{Store: st, Logger: quiet})
	if err != nil {
		return err
	}
	if err := c.Register(deployFlow()); err != nil {
		return err
	}
	if err := c.DeclareTriggers(ctx, deployOnPush); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = c.Stop(context.WithoutCancel(ctx)) }()
	srv, err := server.New(&server.Config{Client: c, Store: st, Logger: quiet,
		Hooks: []server.Hook{{Name: "github", Scheme: server.HookSchemeGitHub, Secret: secret}}})
	if err != nil {
		return err
	}
	keep := addr != ""
	if !keep {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	url := "http://" + ln.Addr().String() + "/hooks/github"
	if keep {
		fmt.Println("serving GitHub deliveries at", url)
		<-ctx.Done()
		return nil
	}
	return playGitHub(ctx, c, url, secret)
}

// playGitHub sends what GitHub would, and prints the deploy runs.
func playGitHub(ctx context.Context, c *heph.Client, url, secret string) error {
	main := `{"ref":"refs/heads/main","after":"59b20b8d5c6ff8d09518454d4dd8b7b30f095ab5","pusher":{"name":"ada"}}`
	feature := `{"ref":"refs/heads/feature","after":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c","pusher":{"name":"bob"}}`
	for _, d := range []struct{ what, delivery, body, key string }{
		{"push to main", "d-1", main, secret},
		{"the same delivery again", "d-1", main, secret},
		{"push to feature", "d-2", feature, secret},
		{"forged push to main", "d-3", main, "not-the-secret"},
	} {
		status, err := deliver(ctx, url, d.delivery, d.body, d.key)
		if err != nil {
			return err
		}
		fmt.Printf("%-24s -> %d %s\n", d.what, status, http.StatusText(status))
	}
	f, err := firing(ctx, c, "github:d-1")
	if err != nil {
		return err
	}
	r, err := c.WaitRun(ctx, f.RunID)
	if err != nil {
		return err
	}
	fmt.Printf("push to main: run %s %s %s\n", r.ID, r.Status, r.Output)
	if f, err = firing(ctx, c, "github:d-2"); err != nil {
		return err
	}
	fmt.Printf("push to feature: %s by the trigger's filter\n", f.Status)
	return nil
}

// firing waits until the trigger has handled the event (the client's
// trigger loop claims its firing shortly after it is stored).
func firing(ctx context.Context, c *heph.Client, eventID string) (*heph.TriggerFiring, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		fs, err := c.EventFirings(ctx, eventID)
		if err != nil {
			return nil, err
		}
		if len(fs) != 1 {
			return nil, fmt.Errorf("event %s has %d firings, want 1", eventID, len(fs))
		}
		if fs[0].Status != heph.FiringPending {
			return fs[0], nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("event %s: the trigger has not handled it: %w", eventID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// deliver posts body as GitHub does: signed with key, X-GitHub-Event push.
func deliver(ctx context.Context, url, delivery, body, key string) (int, error) {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(body))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	return res.StatusCode, res.Body.Close()
}
