package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/demo"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
)

// -screenshots writes the screenshots that docs/dashboard.md and the
// README show: go test ./dashboard -run TestScreenshots -screenshots
var writeShots = flag.Bool("screenshots", false, "write the dashboard's screenshots into docs/images")

// demoEnv is a server with the example definitions and the example runs
// that heph server seeds on a fresh store, once they have settled.
func demoEnv(t *testing.T) (*env, []string) {
	t.Helper()
	e := newEnv(t, false, func(ctx context.Context, c *heph.Client) error {
		reg := flowdoc.NewRegistry()
		if err := demo.Register(ctx, c, reg); err != nil {
			return err
		}
		return c.RegisterDocuments(ctx, reg)
	})
	ids, err := demo.Seed(context.Background(), e.client)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the seeded runs reach the outcomes the seed promises.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		counts := map[string]int{}
		page, err := e.client.ListRuns(context.Background(), &heph.ListOptions{Tags: []string{demo.Tag}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Runs {
			counts[r.Flow+"/"+string(r.Status)]++
		}
		settled := true
		for _, o := range demo.Expected() {
			if counts[o.Name+"/"+string(o.Status)] != o.Count {
				settled = false
			}
		}
		if settled {
			return e, ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the example runs did not settle in two minutes: %v", counts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestScreenshots renders the pages of a server with the example runs in
// Chromium, checks each screenshot is a real picture, and with
// -screenshots writes them for the documentation.
func TestScreenshots(t *testing.T) {
	e, _ := demoEnv(t)
	b := newBrowser(t)
	b.login(e.url, e.admin)
	// height, when set, is the window's for that shot (the run page: its
	// DAG and its timeline).
	shots := []struct {
		file, path, wait string
		height           int64
		before           func()
	}{
		{"dashboard-runs.png", "/", "table.runs", 0, nil},
		{"dashboard-run.png", "/runs/" + e.runOf(demo.OrderFlow, heph.StatusFailed), "#run-timeline svg", 1240, nil},
		{"dashboard-workflow.png", "/runs/" + e.runOf(demo.Onboarding, heph.StatusCompleted), "#run-timeline svg", 1240, nil},
		{"dashboard-approvals.png", "/approvals", "table.approvals", 0, nil},
		{"dashboard-overview.png", "/overview", "main h1", 0, nil},
		{"dashboard-definitions.png", "/definitions/" + demo.ExpenseDoc, "main h1", 0, nil},
		{"dashboard-queues.png", "/queues", "main h1", 0, nil},
		{"dashboard-schedules.png", "/schedules", "main h1", 0, nil},
		{"dashboard-workers.png", "/workers", "main h1", 700, nil},
		// Last, as it cancels the email job that is due tomorrow.
		{"dashboard-operations.png", "/operations", `tr[data-status="completed"]`, 700, func() {
			e.cancelAllMatching(map[string]any{"workflow": demo.EmailJob, "statuses": []string{"running"}})
		}},
	}
	for _, s := range shots {
		if s.before != nil {
			s.before()
		}
		if s.height > 0 {
			b.run("resize the window", chromedp.EmulateViewport(1400, s.height))
		}
		b.open(e.url + s.path)
		var buf []byte
		b.run("screenshot "+s.path, chromedp.WaitReady(s.wait, chromedp.ByQuery), chromedp.CaptureScreenshot(&buf))
		b.noErrors(s.path)
		img, err := png.Decode(bytes.NewReader(buf))
		if err != nil {
			t.Fatalf("%s: the screenshot is not a PNG: %v", s.path, err)
		}
		if r := img.Bounds(); r.Dx() < 1000 || r.Dy() < 600 {
			t.Errorf("%s: a %dx%d screenshot", s.path, r.Dx(), r.Dy())
		}
		if *writeShots {
			if err := os.WriteFile(filepath.Join("..", "docs", "images", s.file), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Every page the dashboard links to loads with 200 and no console error,
// as an admin and as a reader: the test follows every same-site link of
// the pages (the navigation, each run, each definition …) from the runs
// list of a server with the example runs.
func TestEveryPageLoads(t *testing.T) {
	e, _ := demoEnv(t)
	_, _, reader, err := server.NewToken(context.Background(), e.store.(store.Admin), &server.TokenParams{Principal: "viewer", Role: server.RoleRead}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []struct{ name, token string }{{"admin", e.admin}, {"reader", reader}} {
		t.Run(who.name, func(t *testing.T) {
			b := newBrowser(t)
			b.login(e.url, who.token)
			seen := map[string]bool{}
			queue := []string{"/"}
			for len(queue) > 0 && len(seen) < 200 {
				p := queue[0]
				queue = queue[1:]
				if seen[p] {
					continue
				}
				seen[p] = true
				res, err := chromedp.RunResponse(b.ctx, chromedp.Navigate(e.url+p))
				if err != nil {
					t.Fatalf("open %s: %v", p, err)
				}
				if res.Status != http.StatusOK {
					t.Errorf("%s: %d", p, res.Status)
					b.noErrors(p + " (the failed load)")
					continue
				}
				b.run("wait for "+p, chromedp.WaitReady("main#main", chromedp.ByQuery))
				b.noErrors(p)
				if who.name == "reader" {
					// A reader may ask queries (the API admits the role), and
					// validate documents; nothing else.
					if n := b.count(`button[data-api]:not([data-api*="/queries/"]):not([data-api$="/documents/validate"])`); n > 0 {
						var ids []string
						b.eval(`Array.from(document.querySelectorAll("button[data-api]")).map(b => b.dataset.api)`, &ids)
						t.Errorf("%s shows a reader %d action buttons: %v", p, n, ids)
					}
				}
				var links []string
				b.eval(`Array.from(document.querySelectorAll("a[href]")).map(a => a.getAttribute("href"))`, &links)
				for _, l := range links {
					u, err := url.Parse(l)
					if err != nil || u.Host != "" || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "/api/") ||
						strings.HasPrefix(u.Path, "/assets/") || u.Path == "/login" {
						continue
					}
					if !seen[u.RequestURI()] {
						queue = append(queue, u.RequestURI())
					}
				}
			}
			t.Logf("%d pages loaded", len(seen))
			for _, want := range []string{"/", "/events"} {
				if !seen[want] {
					t.Errorf("no link led to %s", want)
				}
			}
		})
	}
}

// runOf finds the first seeded run of a definition in a status.
func (e *env) runOf(name string, status heph.RunStatus) string {
	e.t.Helper()
	page, err := e.client.ListRuns(context.Background(), &heph.ListOptions{Flow: name, Statuses: []heph.RunStatus{status}, Limit: 1})
	if err != nil || len(page.Runs) == 0 {
		e.t.Fatalf("no %s run of %s: %v", status, name, err)
	}
	return page.Runs[0].ID
}

// cancelAllMatching creates a bulk cancel through the API, as an admin,
// and waits (up to a minute) until it has completed.
func (e *env) cancelAllMatching(filter map[string]any) {
	e.t.Helper()
	body, err := json.Marshal(map[string]any{"action": "cancel", "filter": filter, "reason": "not needed"})
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.url+"/api/v1/operations", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	var op server.Operation
	err = json.NewDecoder(res.Body).Decode(&op)
	_ = res.Body.Close()
	if err != nil || res.StatusCode != http.StatusAccepted {
		e.t.Fatalf("create the operation: %d %v", res.StatusCode, err)
	}
	deadline := time.Now().Add(time.Minute)
	for op.Status != "completed" {
		if time.Now().After(deadline) {
			e.t.Fatalf("the operation is %s after a minute", op.Status)
		}
		time.Sleep(50 * time.Millisecond)
		res, err := httpGet(e.url+"/api/v1/operations/"+op.ID, e.admin)
		if err != nil {
			e.t.Fatal(err)
		}
		err = json.NewDecoder(res.Body).Decode(&op)
		_ = res.Body.Close()
		if err != nil {
			e.t.Fatal(err)
		}
	}
}
