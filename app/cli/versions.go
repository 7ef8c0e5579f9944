package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/internal/versionrule"
)

func newVersions(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:     "versions <name>",
		Aliases: []string{"version"},
		Short:   "Show a definition's versions, their runs and its version rule; set rules, retire and delete versions",
		Long: "versions shows the versions of a flow, job kind or document: each version's state (active,\n" +
			"retired, deleted), its runs (active and finished), the version rule that chooses the version\n" +
			"of new runs, and the latest version a start without rule takes. Its subcommands set and\n" +
			"clear the rule, retire a version (new starts on it are refused, runs in flight continue),\n" +
			"unretire it, and delete it (retired and hidden; its runs stay readable).",
		Example: `  heph versions billing
  heph versions rule set billing --split 1=90,2=10
  heph versions retire billing 1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Versions, *apiclient.Response, error) {
				return api.Versions(ctx, args[0], all)
			}, printVersions)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "list deleted versions too")
	rule := &cobra.Command{Use: "rule", Short: "Set or clear a definition's version rule"}
	rule.AddCommand(versionRuleSet(g), &cobra.Command{
		Use:     "clear <name>",
		Short:   "Clear the version rule: new runs take the latest version not retired",
		Example: `  heph versions rule clear billing`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return oneCall(cmd.Context(), g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, error) {
				return api.ClearVersionRule(ctx, args[0])
			}, "version rule of %s cleared", args[0])
		},
	})
	cmd.AddCommand(rule, versionState(g, "retire", "Retire a version: new starts on it are refused, runs in flight continue", "retired"),
		versionState(g, "unretire", "Make a retired version active again", "active again"),
		versionState(g, "delete", "Delete a version: retired and hidden from the listing; its runs stay readable", "deleted"))
	return cmd
}

func printVersions(w io.Writer, vs *apiclient.Versions) error {
	rule := "none (the latest version not retired)"
	if vs.Rule != nil {
		rule = describeRule(vs.Rule)
	}
	if _, err := fmt.Fprintf(w, "%s: rule %s; latest %d\n", vs.Name, rule, vs.Latest); err != nil {
		return err
	}
	tw := newTable(w, "VERSION", "STATE", "ACTIVE RUNS", "FINISHED RUNS", "CHANGED", "BY")
	for _, d := range vs.Versions {
		var changed any
		if d.ChangedAt != nil {
			changed = *d.ChangedAt
		}
		row(tw, d.Version, d.State, d.ActiveRuns, d.FinishedRuns, changed, d.ChangedBy)
	}
	return tw.Flush()
}

// describeRule says a rule in one line, as the library's
// VersionRule.String does.
func describeRule(r *apiclient.VersionRule) string { return (*versionrule.Rule)(r).String() }

func versionRuleSet(g *globals) *cobra.Command {
	var (
		pinned          int
		split, field, m string
		def             int
	)
	cmd := &cobra.Command{
		Use:   "set <name>",
		Short: "Set the version rule: --pinned N, --split V=W,..., or --field PATH --map VALUE=V,... --default V",
		Long: "set chooses how new runs of a definition get their version (a start that names a version\n" +
			"keeps it):\n" +
			"  --pinned N                     every start gets version N;\n" +
			"  --split 1=90,2=10              a percentage split (weights summing to 100), by a stable\n" +
			"                                 hash of the run id (or business value);\n" +
			"  --field plan --map enterprise=3 --default 2\n" +
			"                                 the input's value at a dotted path chooses; others get the default.",
		Example: `  heph versions rule set billing --pinned 2
  heph versions rule set billing --split 1=90,2=10
  heph versions rule set billing --field customer.plan --map enterprise=3,pro=3 --default 2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := ruleFromFlags(cmd, pinned, split, field, m, def)
			if err != nil {
				return err
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.VersionRule, *apiclient.Response, error) {
				return api.SetVersionRule(ctx, args[0], r)
			}, func(w io.Writer, got *apiclient.VersionRule) error {
				_, err := fmt.Fprintf(w, "version rule of %s: %s\n", args[0], describeRule(got))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&pinned, "pinned", 0, "pin every start to this version")
	f.StringVar(&split, "split", "", "a percentage split: VERSION=WEIGHT,... summing to 100")
	f.StringVar(&field, "field", "", "the dotted path into the input that chooses the version")
	f.StringVar(&m, "map", "", "with --field: VALUE=VERSION,...")
	f.IntVar(&def, "default", 0, "with --field: the version of other values")
	return cmd
}

// ruleFromFlags builds the rule the flags of "rule set" give; exactly
// one of --pinned, --split and --field.
func ruleFromFlags(cmd *cobra.Command, pinned int, split, field, m string, def int) (*apiclient.VersionRule, error) {
	fl := cmd.Flags()
	n := 0
	for _, name := range []string{"pinned", "split", "field"} {
		if fl.Changed(name) {
			n++
		}
	}
	if n != 1 {
		return nil, usagef("give exactly one of --pinned, --split and --field")
	}
	if !fl.Changed("field") && (fl.Changed("map") || fl.Changed("default")) {
		return nil, usagef("--map and --default go with --field")
	}
	switch {
	case fl.Changed("pinned"):
		return &apiclient.VersionRule{Type: "pinned", Version: pinned}, nil
	case fl.Changed("split"):
		pairs, err := parsePairs("--split", split)
		if err != nil {
			return nil, err
		}
		r := &apiclient.VersionRule{Type: "percentage", Split: map[int]int{}}
		for k, w := range pairs {
			v, err := strconv.Atoi(k)
			if err != nil {
				return nil, usagef("--split: %q is not a version", k)
			}
			r.Split[v] = w
		}
		return r, nil
	}
	pairs, err := parsePairs("--map", m)
	if err != nil {
		return nil, err
	}
	return &apiclient.VersionRule{Type: "field", Field: field, Map: pairs, Default: def}, nil
}

// parsePairs reads KEY=INT,KEY=INT.
func parsePairs(flag, s string) (map[string]int, error) {
	out := map[string]int{}
	if s == "" {
		return out, nil
	}
	for p := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(p, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			return nil, usagef("%s: %q is not KEY=NUMBER", flag, p)
		}
		if _, dup := out[k]; dup {
			return nil, usagef("%s: %q is given twice", flag, k)
		}
		out[k] = n
	}
	return out, nil
}

// versionState is "versions retire|unretire|delete <name> <version>".
func versionState(g *globals, op, short, done string) *cobra.Command {
	return &cobra.Command{
		Use:     op + " <name> <version>",
		Short:   short,
		Example: "  heph versions " + op + " billing 1",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := strconv.Atoi(args[1])
			if err != nil || v < 1 {
				return usagef("version %q is not a positive integer", args[1])
			}
			return oneCall(cmd.Context(), g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, error) {
				return api.SetVersionState(ctx, args[0], v, op)
			}, "%s version %d %s", args[0], v, done)
		},
	}
}
