package cli_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/job"
)

// A job due tomorrow is "scheduled (in 23h)" in ls and show, with its due
// time; ls --status scheduled lists it alone; a bulk operation refuses
// the status it cannot filter by.
func TestScheduledRunsCLI(t *testing.T) {
	t.Parallel()
	c, st := sqliteClient(t)
	type args = struct {
		To string `json:"to"`
	}
	kind := job.MustNew("remind", func(ctx context.Context, j *job.Job[args]) error { return nil }, nil)
	if err := c.RegisterJobs(kind); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	env := serveAPI(t, c, st)
	// Due in 24 hours from before the commands run: they print 23h.
	due := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Second)
	later, err := hephaestus.InsertJob(t.Context(), c, kind, args{To: "later"}, &hephaestus.JobOptions{RunAt: due})
	if err != nil {
		t.Fatal(err)
	}
	now, err := hephaestus.InsertJob(t.Context(), c, kind, args{To: "now"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "result", ok(t, env, "result", now.ID, "--forever"), `completed`)

	ls := ok(t, env, "ls")
	wantLines(t, "ls", ls, `^`+later.ID+`\s.*\sscheduled \(in 23h\)\s`, `^`+now.ID+`\s.*\scompleted\s`)
	if got := ok(t, env, "ls", "--status", "scheduled"); !strings.Contains(got, later.ID) || strings.Contains(got, now.ID) {
		t.Errorf("ls --status scheduled:\n%s\nwant %s alone", got, later.ID)
	}
	wantLines(t, "show", ok(t, env, "show", later.ID), `^status:\s+scheduled \(in 23h\)$`, `^due:\s+`+regexp.QuoteMeta(due.Format(time.RFC3339))+`$`)
	if got := ok(t, env, "show", now.ID); strings.Contains(got, "scheduled") || strings.Contains(got, "due:") {
		t.Errorf("show of the job that ran:\n%s", got)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", "--status", "scheduled,running"}, "--status scheduled: pass it alone, not with other statuses"},
		{[]string{"ls", "--status", "schedulde"}, `--status "schedulde": not a run status; did you mean scheduled?`},
		{[]string{"cancel", "--all-matching", "--status", "scheduled"}, "--status scheduled: this command takes stored statuses only"},
	} {
		code, out, errOut := heph(t, env, tc.args...)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("heph %v: exit %d, stdout %q, stderr %q; want a usage error saying %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
