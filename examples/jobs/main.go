// Command jobs runs background jobs on the embedded SQLite store: typed
// kinds of jobs, a unique job, a delayed job, a job that snoozes once, a
// job that cancels itself, a job inserted in the same transaction as the
// application's own row, thumbnails limited to one at a time per tenant
// (a concurrency key), and a digest job inserted every second by a
// schedule.
//
//	go run ./examples/jobs [-db jobs.db]
//
// It inserts its jobs, waits until each has finished, prints them and
// exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// Email is the argument of a send_email job.
type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// Thumbnail is the argument of a thumbnail job.
type Thumbnail struct {
	Tenant string `json:"tenant"`
	Image  string `json:"image"`
	Size   int    `json:"size"`
}

// sent counts the emails "sent", busy makes the cat's thumbnail snooze
// once (the image store is busy, try again shortly), and digests counts
// the digests the schedule inserted.
var sent, busy, digests atomic.Int32

// perTenant tracks the thumbnails running per tenant, and the most ever
// seen at once: the queue allows one per tenant, in every process.
var perTenant = struct {
	sync.Mutex
	now map[string]int
	max int
}{now: map[string]int{}}

// SendEmail sends an email; the same email (equal arguments) is sent at
// most once per hour, however often it is inserted.
var SendEmail = job.MustNew("send_email", func(ctx context.Context, j *job.Job[Email]) error {
	sent.Add(1)
	fmt.Printf("  email to %s: %q (attempt %d)\n", j.Args.To, j.Args.Subject, j.Attempt)
	return nil
}, &job.Options[Email]{
	MaxAttempts: 5,
	Timeout:     10 * time.Second,
	Unique:      &job.Unique{ByArgs: true, Period: time.Hour},
})

// MakeThumbnail resizes an image; it snoozes once when the image store is
// busy (a snooze counts no attempt), and cancels itself for a size it
// cannot make (no retry).
var MakeThumbnail = job.MustNew("thumbnail", func(ctx context.Context, j *job.Job[Thumbnail]) error {
	if j.Args.Size <= 0 {
		return job.Cancel("size " + strconv.Itoa(j.Args.Size) + " is not a size")
	}
	if j.Args.Image == "cat.png" && busy.Add(1) == 1 {
		fmt.Printf("  thumbnail of %s: image store busy, snoozing\n", j.Args.Image)
		return job.Snooze(200 * time.Millisecond)
	}
	perTenant.Lock()
	perTenant.now[j.Args.Tenant]++
	perTenant.max = max(perTenant.max, perTenant.now[j.Args.Tenant])
	perTenant.Unlock()
	time.Sleep(20 * time.Millisecond) // resizing
	perTenant.Lock()
	perTenant.now[j.Args.Tenant]--
	perTenant.Unlock()
	fmt.Printf("  thumbnail of %s for %s at %dpx (attempt %d)\n", j.Args.Image, j.Args.Tenant, j.Args.Size, j.Attempt)
	return nil
}, &job.Options[Thumbnail]{
	Queue: "images", Priority: 1, Timeout: 30 * time.Second,
	// The tenant is the concurrency key: SetQueue below allows one
	// thumbnail at a time per tenant, and rotates between tenants.
	ConcurrencyKey: func(t Thumbnail) string { return t.Tenant },
})

// Digest sends the digest of the day so far; its schedule inserts one
// every second (a real program would say "0 18 * * *" and a time zone).
var Digest = job.MustNew("digest", func(ctx context.Context, j *job.Job[string]) error {
	digests.Add(1)
	return nil
}, &job.Options[string]{
	Schedules: []job.Schedule{{ID: "digest", Every: time.Second, Input: "team@example.com"}},
})

func main() {
	db := flag.String("db", "jobs.db", "SQLite file")
	flag.Parse()
	if err := run(*db); err != nil {
		log.Fatal(err)
	}
}

// run inserts the example's jobs into the SQLite file at path, runs them
// and the schedule, and prints what happened.
func run(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{
		Store:  st,
		Queues: map[string]int{"default": 4, "images": 2},
		// SQLite has no notifications: a job inserted in a transaction of
		// the application's is found by the workers' poll.
		PollInterval: 200 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	if err := c.RegisterJobs(SendEmail, MakeThumbnail, Digest); err != nil {
		return err
	}
	// Flow control is stored in the database: every process that shares
	// it claims at most one thumbnail per tenant at a time.
	if err := c.SetQueue(ctx, "images", heph.QueueOptions{MaxRunningPerKey: 1}); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = c.Stop(context.Background()) }()
	// The run before this one paused the schedule at its end (a pause
	// made at run time outlives redeploys): resume it.
	if err := c.ResumeSchedule(ctx, "digest"); err != nil {
		return err
	}

	jobs, err := insertJobs(ctx, c)
	if err != nil {
		return err
	}
	confirm, err := insertOrder(ctx, c, st)
	if err != nil {
		return err
	}
	jobs = append(jobs, confirm)

	fmt.Println("running")
	for _, j := range jobs {
		if _, err := c.WaitRun(ctx, j.ID); err != nil {
			return err
		}
	}
	fmt.Println("done")
	for _, j := range jobs {
		got, err := c.GetJob(ctx, j.ID)
		if err != nil {
			return err
		}
		dup := ""
		if j.Duplicate {
			dup = " (duplicate of an earlier insert)"
		}
		fmt.Printf("  %-10s %s %-9s attempt %d %s%s\n", got.Kind, got.ID[len(got.ID)-8:], got.Status, got.Attempt, got.Error, dup)
	}
	// On a fresh file three emails go out; run again within the hour and
	// the welcome email is the earlier run's job.
	fmt.Printf("%d emails sent; at most %d thumbnail(s) ran at once for a tenant\n", sent.Load(), perTenant.max)

	return showSchedule(ctx, c)
}

// insertJobs inserts the emails and the thumbnails.
func insertJobs(ctx context.Context, c *heph.Client) ([]*heph.Job, error) {
	var jobs []*heph.Job
	add := func(j *heph.Job, err error) error {
		if err != nil {
			return err
		}
		jobs = append(jobs, j)
		return nil
	}
	welcome := Email{To: "ada@example.com", Subject: "Welcome"}
	fmt.Println("inserting jobs")
	if err := add(heph.InsertJob(ctx, c, SendEmail, welcome, nil)); err != nil {
		return nil, err
	}
	// The same email again: the existing job comes back, nothing is sent
	// twice.
	if err := add(heph.InsertJob(ctx, c, SendEmail, welcome, nil)); err != nil {
		return nil, err
	}
	if err := add(heph.InsertJob(ctx, c, SendEmail, Email{To: "bob@example.com", Subject: "Reminder"},
		&heph.JobOptions{RunAfter: 300 * time.Millisecond})); err != nil {
		return nil, err
	}
	thumbs, err := heph.InsertJobs(ctx, c, MakeThumbnail, []heph.JobInsert[Thumbnail]{
		{Args: Thumbnail{Tenant: "acme", Image: "cat.png", Size: 128}, Options: &heph.JobOptions{Priority: 10}},
		{Args: Thumbnail{Tenant: "acme", Image: "dog.png", Size: 0}},
		{Args: Thumbnail{Tenant: "acme", Image: "owl.png", Size: 64}},
		{Args: Thumbnail{Tenant: "acme", Image: "fox.png", Size: 64}},
		{Args: Thumbnail{Tenant: "globex", Image: "logo.png", Size: 64}},
		{Args: Thumbnail{Tenant: "globex", Image: "banner.png", Size: 64}},
	})
	if err != nil {
		return nil, err
	}
	return append(jobs, thumbs...), nil
}

// insertOrder stores an order and inserts its confirmation email, in one
// transaction of the application's: both or neither.
func insertOrder(ctx context.Context, c *heph.Client, st *sqlite.Store) (*heph.Job, error) {
	order := "order-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, customer TEXT)"); err != nil {
		return nil, errors.Join(err, tx.Rollback())
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, customer) VALUES (?, ?)", order, "ada"); err != nil {
		return nil, errors.Join(err, tx.Rollback())
	}
	confirm, err := heph.InsertJobTx(ctx, c, tx, SendEmail, Email{To: "ada@example.com", Subject: "Your " + order}, nil)
	if err != nil {
		return nil, errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return confirm, nil
}

// showSchedule waits for the schedule's first digest, shows its next
// ticks and its last runs, and pauses it.
func showSchedule(ctx context.Context, c *heph.Client) error {
	for digests.Load() == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("no digest inserted by the schedule: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	next, err := c.NextFireTimes(ctx, "digest", 3)
	if err != nil {
		return err
	}
	fmt.Printf("schedule digest: next ticks %s, %s, %s\n", next[0].Format(time.TimeOnly), next[1].Format(time.TimeOnly), next[2].Format(time.TimeOnly))
	last, err := c.ScheduleRuns(ctx, "digest", 3)
	if err != nil {
		return err
	}
	for _, r := range last {
		fmt.Printf("  tick %s: %s %s\n", r.Tick.Format(time.TimeOnly), r.Outcome, r.RunID)
	}
	// Pausing keeps the schedule and its state; no tick fires until
	// ResumeSchedule.
	return c.PauseSchedule(ctx, "digest")
}
