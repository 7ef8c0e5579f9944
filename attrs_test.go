package hephaestus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/job"
)

// Search attributes on each backend: set at start (a typo or a value of
// the wrong type is refused, naming the attribute), upserted by step code
// with the step's result (a typo fails the step, naming it), read back with
// the run and filtered by ListOptions.Where.
func TestSearchAttributes(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			b := flow.New("attrs.order").SearchAttribute("amount", flow.AttrInt).
				SearchAttribute("region", flow.AttrKeywordList).SearchAttribute("updated", flow.AttrTime).
				SearchAttribute("stage", flow.AttrKeyword)
			flow.Step(b, "ship", func(ctx context.Context, in int) (int, error) {
				if in < 0 {
					return 0, flow.SetSearchAttributes(ctx, map[string]any{"stgae": "x"})
				}
				return in, flow.SetSearchAttributes(ctx, map[string]any{"stage": "shipped", "amount": in * 2})
			}, flow.Retry(flow.RetryPolicy{MaxAttempts: 1}))
			c := startClient(t, ctx, &heph.Config{Store: open(t), Logger: quietLogger()},
				func(c *heph.Client) error { return c.Register(b.MustBuild()) })

			_, err := c.StartRun(ctx, "attrs.order", 1, &heph.StartOptions{SearchAttributes: map[string]any{"amout": 1}})
			if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), `did you mean "amount"`) {
				t.Fatalf("a typo at start: %v", err)
			}
			_, err = c.StartRun(ctx, "attrs.order", 1, &heph.StartOptions{SearchAttributes: map[string]any{"amount": "many"}})
			if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), "amount") {
				t.Fatalf("a string for an int: %v", err)
			}
			day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			var ids []string
			for i, in := range []int{40, 150, -1} {
				r, err := c.StartRun(ctx, "attrs.order", in, &heph.StartOptions{SearchAttributes: map[string]any{
					"amount": in, "region": []string{"eu", []string{"us", "apac", "eu"}[i]}, "updated": day.Add(time.Duration(i-1) * time.Hour)}})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.ID)
			}
			for _, id := range ids {
				if _, err := c.WaitRun(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			bad, err := c.GetRun(ctx, ids[2])
			if err != nil || bad.Status != hephtype.StatusFailed || !strings.Contains(bad.Error, `"stgae" is not declared`) {
				t.Fatalf("the step with a typo: %v %+v", err, bad)
			}
			got, err := c.GetRun(ctx, ids[1])
			if err != nil {
				t.Fatal(err)
			}
			if got.SearchAttributes["stage"] != "shipped" || got.SearchAttributes["amount"] != int64(300) {
				t.Fatalf("attributes after the step: %#v", got.SearchAttributes)
			}
			for _, tc := range []struct {
				where string
				want  []string
			}{
				{"amount > 100", []string{ids[1]}},
				{"stage = shipped", []string{ids[1], ids[0]}},
				{"region in [us, apac]", []string{ids[1], ids[0]}},
				{"updated < 2026-11-01", []string{ids[0]}},
				{"amount between 0 and 100 and region = eu", []string{ids[0]}},
			} {
				l, err := c.ListRuns(ctx, &heph.ListOptions{Where: tc.where})
				if err != nil {
					t.Fatalf("where %s: %v", tc.where, err)
				}
				var gotIDs []string
				for _, r := range l.Runs {
					gotIDs = append(gotIDs, r.ID)
				}
				if strings.Join(gotIDs, ",") != strings.Join(tc.want, ",") {
					t.Errorf("where %s: %v, want %v", tc.where, gotIDs, tc.want)
				}
			}
			if _, err := c.ListRuns(ctx, &heph.ListOptions{Where: "amout > 1"}); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), `did you mean "amount"`) {
				t.Fatalf("a typo in where: %v", err)
			}
		})
	}
}

// A job kind declares search attributes: an insert sets them, the job's
// code upserts them with its result, lists filter by them (each backend).
func TestJobSearchAttributes(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			kind := job.MustNew("attrs.mail", func(ctx context.Context, j *job.Job[int]) error {
				return flow.SetSearchAttributes(ctx, map[string]any{"sent": true})
			}, &job.Options[int]{SearchAttributes: map[string]flow.AttrType{"tenant": flow.AttrKeyword, "sent": flow.AttrBool}})
			c := startClient(t, ctx, &heph.Config{Store: open(t), Logger: quietLogger()},
				func(c *heph.Client) error { return c.RegisterJobs(kind) })
			if _, err := heph.InsertJob(ctx, c, kind, 1, &heph.JobOptions{SearchAttributes: map[string]any{"tenat": "a"}}); !errors.Is(err, heph.ErrInvalidInput) {
				t.Fatalf("a typo: %v", err)
			}
			var ids []string
			for _, tenant := range []string{"acme", "globex"} {
				j, err := heph.InsertJob(ctx, c, kind, 1, &heph.JobOptions{SearchAttributes: map[string]any{"tenant": tenant}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.WaitRun(ctx, j.ID); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, j.ID)
			}
			l, err := c.ListRuns(ctx, &heph.ListOptions{Flow: "attrs.mail", Where: "tenant = acme and sent = true"})
			if err != nil || len(l.Runs) != 1 || l.Runs[0].ID != ids[0] {
				t.Fatalf("where: %v %+v", err, l)
			}
		})
	}
}
