package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// backfillChunks is how many requests a backfill is split into, so that
// its progress shows.
const backfillChunks = 10

func newSchedules(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schedules",
		Aliases: []string{"schedule", "sched"},
		Short:   "List, create, change and run schedules (no subcommand: list them)",
	}
	ls := schedulesList(g)
	cmd.RunE = ls.RunE // heph schedules lists them
	cmd.AddCommand(
		ls, schedulesShow(g), schedulesCreate(g, false), schedulesCreate(g, true), schedulesDelete(g),
		scheduleAction(g, "pause", "Pause a schedule: it fires no tick until resumed"),
		scheduleAction(g, "resume", "Resume a paused schedule"),
		scheduleAction(g, "trigger", "Start a run of a schedule's target now"),
		schedulesBackfill(g), schedulesNext(g), schedulesRuns(g),
	)
	return cmd
}

func schedulesList(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the schedules",
		Example: `  heph schedules ls`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := g.api()
			if err != nil {
				return err
			}
			list, resp, many, err := allPages(cmd.Context(), g, api.Schedules)
			if err != nil {
				return err
			}
			if g.json() && many {
				return g.emitValue(map[string]any{"schedules": list, "next": ""}, nil)
			}
			return g.emit(resp, func(w io.Writer) error {
				tw := newTable(w, "ID", "TARGET", "TIMING", "ZONE", "OVERLAP", "PAUSED", "NEXT FIRE", "LAST RUN")
				for _, s := range list {
					row(tw, s.ID, s.TargetKind+" "+s.TargetName, timing(&s), s.TimeZone, s.Overlap, s.Paused, s.NextFire, s.LastRunID)
				}
				return tw.Flush()
			})
		},
	}
}

func timing(s *apiclient.Schedule) string {
	if s.Cron != "" {
		return s.Cron
	}
	if s.Every != "" {
		return "every " + s.Every
	}
	return ""
}

func schedulesShow(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "show <id>",
		Short:   "Show a schedule",
		Example: `  heph schedules show nightly-digest`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Schedule, *apiclient.Response, error) {
				return api.GetSchedule(ctx, args[0])
			}, printSchedule)
		},
	}
}

func printSchedule(w io.Writer, s *apiclient.Schedule) error {
	catchUp := ""
	if c := s.CatchUp; c != nil {
		catchUp = fmt.Sprintf("%d ticks", c.Ticks)
		if c.Within != "" {
			catchUp += ", within " + c.Within
		}
	}
	return kv(w, "id", s.ID, "target", s.TargetKind+" "+s.TargetName, "timing", timing(s), "anchor", s.Anchor,
		"time zone", s.TimeZone, "jitter", s.Jitter, "overlap", s.Overlap, "catch up", catchUp,
		"input", compactJSON(s.Input), "paused", s.Paused, "declared", s.Declared,
		"next fire", s.NextFire, "last tick", s.LastTick, "last run", s.LastRunID,
		"version", s.Version, "created", s.CreatedAt, "updated", s.UpdatedAt)
}

// scheduleFlags are the fields of a schedule the create and update
// commands set.
type scheduleFlags struct {
	target, name, cron, every, anchor, zone, jitter, overlap, input, within, file string
	ticks                                                                         int
	paused                                                                        bool
}

func (f *scheduleFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.target, "target", "flow", "what a tick starts: flow, workflow, document or job")
	fl.StringVar(&f.name, "name", "", "the name of the flow, workflow, document or job kind")
	fl.StringVar(&f.cron, "cron", "", "a cron expression (5 or 6 fields, or @daily, @every 1h...)")
	fl.StringVar(&f.every, "every", "", "a fixed interval in whole seconds (e.g. 15m), instead of --cron")
	fl.StringVar(&f.anchor, "anchor", "", "with --every: the time the ticks are aligned to (RFC 3339)")
	fl.StringVar(&f.zone, "time-zone", "", "the IANA time zone --cron is read in (default UTC)")
	fl.StringVar(&f.jitter, "jitter", "", "delay each tick's run by up to this duration")
	fl.StringVar(&f.overlap, "overlap", "", "when the previous run is still going: skip (default), buffer_one, allow_all or cancel_previous")
	fl.IntVar(&f.ticks, "catch-up-ticks", -1, "run at most this many of the ticks missed while no server ran (default 1)")
	fl.StringVar(&f.within, "catch-up-within", "", "run only the missed ticks due within this span")
	fl.StringVar(&f.input, "input", "", "the input of every run: JSON text, @file or -")
	fl.BoolVar(&f.paused, "paused", false, "create or leave the schedule paused")
	fl.StringVar(&f.file, "file", "", "the schedule as a JSON file of the API (flags override its fields)")
}

// apply sets the fields whose flags were given on body.
func (f *scheduleFlags) apply(cmd *cobra.Command, env *Env, body map[string]any) error {
	ch := cmd.Flags().Changed
	set := func(flag, key string, v any) {
		if ch(flag) {
			body[key] = v
		}
	}
	set("target", "target_kind", f.target)
	set("name", "target_name", f.name)
	set("cron", "cron", f.cron)
	set("every", "every", f.every)
	set("anchor", "anchor", f.anchor)
	set("time-zone", "time_zone", f.zone)
	set("jitter", "jitter", f.jitter)
	set("overlap", "overlap", f.overlap)
	set("paused", "paused", f.paused)
	for _, d := range []struct{ flag, v string }{{"every", f.every}, {"jitter", f.jitter}, {"catch-up-within", f.within}} {
		if ch(d.flag) {
			if _, err := time.ParseDuration(d.v); err != nil {
				return usagef("--%s %q: not a duration", d.flag, d.v)
			}
		}
	}
	if ch("cron") && ch("every") {
		return usagef("give --cron or --every, not both")
	}
	if ch("cron") {
		delete(body, "every")
	}
	if ch("every") {
		delete(body, "cron")
	}
	if ch("catch-up-ticks") || ch("catch-up-within") {
		c := map[string]any{}
		if f.ticks >= 0 {
			c["ticks"] = f.ticks
		}
		if f.within != "" {
			c["within"] = f.within
		}
		body["catch_up"] = c
	}
	if ch("input") {
		in, err := readPayload(env, "--input", f.input)
		if err != nil {
			return err
		}
		body["input"] = in
	}
	return nil
}

// scheduleSettings are the fields of a schedule that POST and PUT take;
// the others (next fire, version...) are the server's.
var scheduleSettings = []string{"id", "target_kind", "target_name", "cron", "every", "anchor", "time_zone", "jitter", "overlap", "catch_up", "input", "paused"}

func schedulesCreate(g *globals, update bool) *cobra.Command {
	var f scheduleFlags
	use, short, example := "create <id>", "Create a schedule", `  heph schedules create nightly --name digest --cron "0 3 * * *" --time-zone Europe/Paris
  heph schedules create poll --target job --name poll --every 5m --input '{"feed": "news"}'`
	if update {
		use, short, example = "update <id>", "Change a schedule's fields (those given)", `  heph schedules update nightly --cron "0 4 * * *"`
	}
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if f.file != "" {
				b, err := readPayload(g.env, "--file", "@"+f.file)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(b, &body); err != nil {
					return usagef("--file %s: want a JSON object: %v", f.file, err)
				}
			}
			api, err := g.api()
			if err != nil {
				return err
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			defer cancel()
			if update && f.file == "" {
				// Start from the stored schedule's settings: PUT
				// replaces them all.
				_, resp, err := api.GetSchedule(ctx, args[0])
				if err != nil {
					return err
				}
				var stored map[string]json.RawMessage
				if err := json.Unmarshal(resp.Body, &stored); err != nil {
					return fmt.Errorf("decode schedule: %w", err)
				}
				for _, k := range scheduleSettings {
					if v, ok := stored[k]; ok {
						body[k] = v
					}
				}
			}
			if err := f.apply(cmd, g.env, body); err != nil {
				return err
			}
			body["id"] = args[0]
			if !update && body["target_name"] == nil {
				return usagef("--name is required: the flow, workflow, document or job kind to start")
			}
			if !update && body["cron"] == nil && body["every"] == nil {
				return usagef("give --cron or --every")
			}
			b, err := json.Marshal(body)
			if err != nil {
				return err
			}
			var s *apiclient.Schedule
			var resp *apiclient.Response
			if update {
				s, resp, err = api.UpdateSchedule(ctx, args[0], b)
			} else {
				s, resp, err = api.CreateSchedule(ctx, b)
			}
			if err != nil {
				return err
			}
			return g.emit(resp, func(w io.Writer) error { return printSchedule(w, s) })
		},
	}
	f.register(cmd)
	return cmd
}

func schedulesDelete(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete <id>",
		Aliases: []string{"rm"},
		Short:   "Delete a schedule (its runs stay)",
		Example: `  heph schedules delete nightly`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return oneCall(cmd.Context(), g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, error) {
				return api.DeleteSchedule(ctx, args[0])
			}, "schedule %s deleted", args[0])
		},
	}
}

func scheduleAction(g *globals, action, short string) *cobra.Command {
	past := map[string]string{"pause": "paused", "resume": "resumed", "trigger": "triggered"}[action]
	return &cobra.Command{
		Use:     action + " <id>",
		Short:   short,
		Example: fmt.Sprintf("  heph schedules %s nightly", action),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, *apiclient.Response, error) {
				resp, err := api.ScheduleAction(ctx, args[0], action)
				return resp, resp, err
			}, func(w io.Writer, resp *apiclient.Response) error {
				var run struct {
					ID string `json:"id"`
				}
				if action == "trigger" && json.Unmarshal(resp.Body, &run) == nil && run.ID != "" {
					_, err := fmt.Fprintf(w, "schedule %s triggered: run %s\n", args[0], run.ID)
					return err
				}
				_, err := fmt.Fprintf(w, "schedule %s %s\n", args[0], past)
				return err
			})
		},
	}
}

func schedulesBackfill(g *globals) *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "backfill <id> --from T --to T",
		Short: "Start the runs of a schedule's ticks in a past span",
		Long: "backfill starts a run for every tick of the schedule in [--from, --to], whatever its\n" +
			"overlap policy. It is idempotent: a tick that has a run is not started again. The span\n" +
			"is sent in parts, with a progress bar.",
		Example: `  heph schedules backfill nightly --from 2025-01-01 --to 2025-01-31`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := time.Now()
			f, err := parseTime("--from", from, now)
			if err != nil {
				return err
			}
			t, err := parseTime("--to", to, now)
			if err != nil {
				return err
			}
			if f == nil || t == nil {
				return usagef("--from and --to are required")
			}
			if t.Before(*f) {
				return usagef("--to %s is before --from %s", t.Format(time.RFC3339), f.Format(time.RFC3339))
			}
			api, err := g.api()
			if err != nil {
				return err
			}
			ids, err := backfill(cmd.Context(), g, api, args[0], *f, *t)
			if err != nil {
				return err
			}
			return g.emitValue(map[string][]string{"run_ids": nonNil(ids)}, func(w io.Writer) error {
				fmt.Fprintf(w, "schedule %s: %d runs for the ticks from %s to %s\n", args[0], len(ids), f.UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339))
				for _, id := range ids {
					fmt.Fprintln(w, id)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the first tick's earliest time: RFC 3339, a date, or a duration ago")
	cmd.Flags().StringVar(&to, "to", "", "the last tick's latest time: RFC 3339, a date, or a duration ago")
	return cmd
}

// backfill sends the span in parts, with a progress bar, and returns the
// run ids, oldest first, each once.
func backfill(ctx context.Context, g *globals, api *apiclient.Client, id string, from, to time.Time) ([]string, error) {
	parts := backfillChunks
	step := to.Sub(from) / time.Duration(parts)
	if step < time.Second {
		parts, step = 1, to.Sub(from)
	}
	bar := g.newProgress(ctx, "backfill")
	var ids []string
	seen := map[string]bool{}
	for i := range parts {
		a := from.Add(time.Duration(i) * step)
		b := a.Add(step)
		if i == parts-1 {
			b = to
		}
		rctx, cancel := g.reqCtx(ctx, 0)
		got, _, err := api.Backfill(rctx, id, a, b)
		cancel()
		if err != nil {
			bar.Finish(false)
			return nil, err
		}
		for _, r := range got {
			if !seen[r] {
				seen[r] = true
				ids = append(ids, r)
			}
		}
		bar.Set(i+1, parts)
	}
	bar.Finish(true)
	return ids, nil
}

func schedulesNext(g *globals) *cobra.Command {
	var n int
	cmd := &cobra.Command{
		Use:     "next <id>",
		Short:   "Print when a schedule's next ticks fire",
		Example: `  heph schedules next nightly -n 5`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n <= 0 {
				return usagef("-n must be positive, got %d", n)
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]time.Time, *apiclient.Response, error) {
				return api.NextFires(ctx, args[0], n)
			}, func(w io.Writer, times []time.Time) error {
				for _, t := range times {
					fmt.Fprintln(w, t.UTC().Format(time.RFC3339))
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVarP(&n, "count", "n", 5, "how many fire times")
	return cmd
}

func schedulesRuns(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:     "runs <id>",
		Short:   "List a schedule's ticks and the runs they started, newest first",
		Example: `  heph schedules runs nightly --limit 10`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usagef("--limit must not be negative, got %d", limit)
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.ScheduleRun, *apiclient.Response, error) {
				return api.ScheduleRuns(ctx, args[0], limit)
			}, func(w io.Writer, runs []apiclient.ScheduleRun) error {
				tw := newTable(w, "TICK", "OUTCOME", "RUN", "STATUS", "ERROR")
				for _, r := range runs {
					row(tw, r.Tick, r.Outcome, r.RunID, r.Status, truncate(r.Error, 60))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "how many (default the server's)")
	return cmd
}
