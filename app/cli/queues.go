package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

func newQueues(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "queues",
		Aliases: []string{"queue"},
		Short:   "Show queues and set their flow control (no subcommand: list them)",
	}
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the queues with their depth and oldest ready task",
		Example: `  heph queues ls`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.Queue, *apiclient.Response, error) {
				return api.Queues(ctx)
			}, func(w io.Writer, qs []apiclient.Queue) error {
				tw := newTable(w, "NAME", "PAUSED", "READY", "SCHEDULED", "LEASED", "RUNNING", "OLDEST READY", "LIMITS")
				for _, q := range qs {
					row(tw, q.Name, q.Paused, q.Ready, q.Scheduled, q.Leased, q.Running, q.OldestReadyAge, limits(&q.Options))
				}
				return tw.Flush()
			})
		},
	}
	show := &cobra.Command{
		Use:     "show <name>",
		Short:   "Show a queue",
		Example: `  heph queues show default`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Queue, *apiclient.Response, error) {
				return api.GetQueue(ctx, args[0])
			}, printQueue)
		},
	}
	cmd.AddCommand(ls, show, queuesSet(g), queuePause(g, true), queuePause(g, false))
	cmd.RunE = ls.RunE // heph queues lists them
	return cmd
}

func printQueue(w io.Writer, q *apiclient.Queue) error {
	return kv(w, "queue", q.Name, "paused", q.Paused, "ready", q.Ready, "scheduled", q.Scheduled,
		"leased", q.Leased, "running", q.Running, "oldest ready", q.OldestReadyAge, "limits", limits(&q.Options))
}

// limits describes a queue's flow control in one line.
func limits(o *apiclient.QueueOptions) string {
	var parts []string
	if o.MaxRunning > 0 {
		parts = append(parts, fmt.Sprintf("max %d", o.MaxRunning))
	}
	if o.MaxRunningPerKey > 0 {
		parts = append(parts, fmt.Sprintf("max %d per key", o.MaxRunningPerKey))
	}
	if r := o.Rate; r != nil && r.Limit > 0 {
		parts = append(parts, fmt.Sprintf("rate %d/%s", r.Limit, r.Period))
	}
	if r := o.KeyRate; r != nil && r.Limit > 0 {
		parts = append(parts, fmt.Sprintf("rate %d/%s per key", r.Limit, r.Period))
	}
	if o.Fair {
		parts = append(parts, "fair")
	}
	if len(o.Weights) > 0 {
		parts = append(parts, fmt.Sprintf("%d weights", len(o.Weights)))
	}
	return strings.Join(parts, ", ")
}

func queuesSet(g *globals) *cobra.Command {
	var (
		opts          apiclient.QueueOptions
		rate, keyRate string
		weights       []string
	)
	cmd := &cobra.Command{
		Use:   "set <name>",
		Short: "Set a queue's flow-control limits (every limit; those not given are removed)",
		Example: `  heph queues set default --max-running 50 --max-per-key 5 --rate 100/1s
  heph queues set email --key-rate 10/1m --fair --weight vip=3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opts.Rate, err = parseRate("--rate", rate); err != nil {
				return err
			}
			if opts.KeyRate, err = parseRate("--key-rate", keyRate); err != nil {
				return err
			}
			ws, err := parseKV("--weight", weights)
			if err != nil {
				return err
			}
			for k, v := range ws {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return usagef("--weight %s=%s: want a whole number from 1", k, v)
				}
				if opts.Weights == nil {
					opts.Weights = map[string]int{}
				}
				opts.Weights[k] = n
			}
			if opts.MaxRunning < 0 || opts.MaxRunningPerKey < 0 {
				return usagef("--max-running and --max-per-key must not be negative")
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Queue, *apiclient.Response, error) {
				return api.SetQueue(ctx, args[0], &opts)
			}, func(w io.Writer, q *apiclient.Queue) error {
				if q.Name == "" {
					_, err := fmt.Fprintf(w, "queue %s: %s\n", args[0], limits(&opts))
					return err
				}
				return printQueue(w, q)
			})
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.MaxRunning, "max-running", 0, "work running at once on the queue, across all processes (0: no limit)")
	fl.IntVar(&opts.MaxRunningPerKey, "max-per-key", 0, "work running at once per concurrency key (0: no limit)")
	fl.StringVar(&rate, "rate", "", "at most N starts per period: N/period, e.g. 100/1s")
	fl.StringVar(&keyRate, "key-rate", "", "at most N starts per period and key: N/period")
	fl.BoolVar(&opts.Fair, "fair", false, "rotate starts between the keys with ready work")
	fl.StringArrayVar(&weights, "weight", nil, "a key's share under rotation: key=N (repeatable)")
	return cmd
}

// parseRate reads N/period.
func parseRate(flag, v string) (*apiclient.RateLimit, error) {
	if v == "" {
		return nil, nil
	}
	n, p, ok := strings.Cut(v, "/")
	limit, err := strconv.Atoi(n)
	if !ok || err != nil || limit < 1 {
		return nil, usagef("%s %q: want N/period, e.g. 100/1s", flag, v)
	}
	if _, err := time.ParseDuration(p); err != nil {
		return nil, usagef("%s %q: the period %q is not a duration", flag, v, p)
	}
	return &apiclient.RateLimit{Limit: limit, Period: p}, nil
}

func queuePause(g *globals, pause bool) *cobra.Command {
	verb, short := "resume", "Resume a paused queue"
	if pause {
		verb, short = "pause", "Pause a queue: no new work of it starts (running work finishes)"
	}
	return &cobra.Command{
		Use:     verb + " <name>",
		Short:   short,
		Example: fmt.Sprintf("  heph queues %s email", verb),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return oneCall(cmd.Context(), g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, error) {
				return api.PauseQueue(ctx, args[0], pause)
			}, "queue %s %sd", args[0], verb)
		},
	}
}

func newWorkers(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "workers",
		Short:   "List the live workers: processes and HTTP workers",
		Example: `  heph workers`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.Worker, *apiclient.Response, error) {
				return api.Workers(ctx)
			}, func(w io.Writer, ws []apiclient.Worker) error {
				tw := newTable(w, "ID", "BUILD", "QUEUES", "HANDLERS", "STARTED", "LAST HEARTBEAT", "EXPIRES")
				for _, wk := range ws {
					row(tw, wk.ID, wk.BuildID, wk.Queues, truncate(strings.Join(wk.Handlers, ","), 60), wk.StartedAt, wk.LastHeartbeat, wk.ExpiresAt)
				}
				return tw.Flush()
			})
		},
	}
}
