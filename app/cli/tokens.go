package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

func newTokens(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "tokens",
		Aliases: []string{"token"},
		Short:   "List, create and revoke API tokens",
		Long: "tokens manages the server's bearer tokens (an admin token is needed). Every token belongs\n" +
			"to a principal (heph principals). The first admin token is made without a server, straight\n" +
			"in the store:\n\n" +
			"  heph tokens create admin --role admin --sqlite heph.db\n" +
			"  heph tokens create admin --role admin --postgres postgres://...",
	}
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the tokens (never their secrets)",
		Example: `  heph tokens ls`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.Token, *apiclient.Response, error) {
				return api.Tokens(ctx)
			}, tokenTable)
		},
	}
	revoke := &cobra.Command{
		Use:     "revoke <id>",
		Short:   "Revoke a token: it is refused from now on, and its sessions end",
		Example: `  heph tokens revoke 0195f1c2-...`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return oneCall(cmd.Context(), g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, error) {
				return api.RevokeToken(ctx, args[0])
			}, "token %s revoked", args[0])
		},
	}
	cmd.AddCommand(ls, tokensCreate(g), revoke)
	return cmd
}

func tokenTable(w io.Writer, ts []apiclient.Token) error {
	tw := newTable(w, "ID", "NAME", "PRINCIPAL", "ROLE", "LIMITS", "CREATED", "LAST USED", "REVOKED")
	for _, t := range ts {
		row(tw, t.ID, t.Name, t.Principal, t.Role, tokenLimits(&t), t.CreatedAt, t.LastUsedAt, t.RevokedAt)
	}
	return tw.Flush()
}

// tokenLimits describes a token's options ("-" without).
func tokenLimits(t *apiclient.Token) string {
	var out []string
	if len(t.Queues) > 0 {
		out = append(out, "queues="+strings.Join(t.Queues, ","))
	}
	if len(t.Handlers) > 0 {
		out = append(out, "handlers="+strings.Join(t.Handlers, ","))
	}
	if t.ActAs {
		out = append(out, "act-as")
	}
	if t.Payloads != "" {
		out = append(out, "payloads="+t.Payloads)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, " ")
}

func tokensCreate(g *globals) *cobra.Command {
	var (
		role, user     string
		payloads       string
		service, actAs bool
		groups, queues []string
		handlers       []string
		db             dbFlags
	)
	cmd := &cobra.Command{
		Use:   "create [name] [--user <principal>]",
		Short: "Create a token for a principal and print its secret (shown this once)",
		Long: "create makes a token of a role for a principal: --user names it (the token's name by\n" +
			"default; the token is named after the principal when no name is given). A principal that\n" +
			"does not exist is created: a user, or a service with --service, with the --groups given.\n" +
			"For an existing principal, --groups replaces its groups; without --groups they stay.\n\n" +
			"Roles: admin (everything), operator (start, cancel, retry, signal, update and resume runs,\n" +
			"bulk operations, schedules and queues), approver (decide the approval gates assigned to the\n" +
			"principal or its groups, and read them), worker (the worker protocol; --queues and\n" +
			"--handlers limit its claims) or read (every read). --act-as lets an admin or operator token\n" +
			"start runs on behalf of a user (the start's on_behalf_of). On a server that encrypts\n" +
			"payloads, reading them is a permission of its own: every role but read has it, and\n" +
			"--payloads allow grants it to a token (a read token that may see inputs and outputs),\n" +
			"--payloads deny withholds it (an operator token that must not).\n\n" +
			"Through the server by default; with --sqlite or --postgres straight in the store, to make\n" +
			"the first admin token.",
		Example: `  heph tokens create --user alice --groups finance --role approver
  heph tokens create ci --role read
  heph tokens create auditor --role read --payloads allow
  heph tokens create py-worker --service --role worker --queues payments --handlers charge,refund
  heph tokens create admin --role admin --sqlite heph.db`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(server.Roles, role) {
				return usagef("--role must be one of %s, got %q", strings.Join(server.Roles, ", "), role)
			}
			if !slices.Contains(server.PayloadGrants, payloads) {
				return usagef("--payloads must be %s or %s, got %q", server.PayloadsAllow, server.PayloadsDeny, payloads)
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			if name == "" && user == "" {
				return usagef("name the token or its principal: heph tokens create <name> or --user <name>")
			}
			fl := cmd.Flags()
			p := &server.TokenParams{Name: name, Principal: user, Service: service, Role: role,
				Options: store.TokenOptions{Queues: queues, Handlers: handlers, ActAs: actAs, Payloads: payloads}}
			if fl.Changed("groups") {
				p.Groups, p.SetGroups = groups, true
				if p.Groups == nil {
					p.Groups = []string{}
				}
			}
			var (
				t    *apiclient.Token
				resp *apiclient.Response
				err  error
			)
			if fl.Changed("sqlite") || fl.Changed("postgres") {
				t, err = bootstrapToken(cmd, &db, p)
			} else {
				api, aerr := g.api()
				if aerr != nil {
					return aerr
				}
				ctx, cancel := g.reqCtx(cmd.Context(), 0)
				defer cancel()
				cp := &apiclient.CreateTokenParams{Principal: user, Name: name, Role: role, Queues: queues, Handlers: handlers, ActAs: actAs, Payloads: payloads}
				if service {
					cp.Kind = "service"
				}
				if p.SetGroups {
					cp.Groups = &p.Groups
				}
				t, resp, err = api.CreateToken(ctx, cp)
			}
			if err != nil {
				return err
			}
			print := func(w io.Writer) error {
				fmt.Fprintf(w, "token %s: principal %s (%s, groups %s), role %s, id %s\n", t.Name, t.Principal, t.Kind, groupList(t.Groups), t.Role, t.ID)
				fmt.Fprintf(w, "secret (shown once): %s\n", t.Secret)
				return nil
			}
			if resp == nil {
				return g.emitValue(t, print)
			}
			return g.emit(resp, print)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&role, "role", "read", strings.Join(server.Roles, ", "))
	fl.StringVar(&user, "user", "", "the principal the token belongs to (created when missing); defaults to the token's name")
	fl.BoolVar(&service, "service", false, "a new principal is a service, not a user")
	fl.StringSliceVar(&groups, "groups", nil, "the principal's groups (comma-separated); replaces an existing principal's groups")
	fl.StringSliceVar(&queues, "queues", nil, "worker tokens: claim only from these queues")
	fl.StringSliceVar(&handlers, "handlers", nil, "worker tokens: claim only these actions and activities")
	fl.BoolVar(&actAs, "act-as", false, "admin and operator tokens: may start runs on behalf of a user (on_behalf_of)")
	fl.StringVar(&payloads, "payloads", "", "allow or deny reading payloads on a server that encrypts them (default: the role's; every role but read)")
	fl.StringVar(&db.postgres, "postgres", "", "create the token in this PostgreSQL database, without a server")
	fl.StringVar(&db.schema, "schema", "heph", "PostgreSQL schema of the store")
	fl.StringVar(&db.sqlite, "sqlite", "", "create the token in this SQLite file, without a server")
	return cmd
}

// groupList shows groups ("none" without).
func groupList(groups []string) string {
	if len(groups) == 0 {
		return "none"
	}
	return strings.Join(groups, ",")
}

func newPrincipals(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "principals",
		Aliases: []string{"principal"},
		Short:   "List principals, set their groups, disable them",
		Long: "principals manages who calls the API (an admin token is needed): users and services,\n" +
			"each with a unique name and groups. heph tokens create --user makes them.",
	}
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the principals, disabled ones too",
		Example: `  heph principals ls`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.Principal, *apiclient.Response, error) {
				return api.Principals(ctx)
			}, func(w io.Writer, ps []apiclient.Principal) error {
				tw := newTable(w, "NAME", "KIND", "GROUPS", "CREATED", "DISABLED")
				for _, p := range ps {
					row(tw, p.Name, p.Kind, groupList(p.Groups), p.CreatedAt, p.DisabledAt)
				}
				return tw.Flush()
			})
		},
	}
	setGroups := &cobra.Command{
		Use:     "set-groups <name> [group,...]",
		Short:   "Replace a principal's groups (none: no groups)",
		Example: `  heph principals set-groups alice finance,ops`,
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			groups := []string{}
			if len(args) == 2 && args[1] != "" {
				groups = strings.Split(args[1], ",")
			}
			return principalCall(cmd, g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Principal, *apiclient.Response, error) {
				return api.SetGroups(ctx, args[0], groups)
			}, "principal %s: groups %s")
		},
	}
	disable := &cobra.Command{
		Use:     "disable <name>",
		Short:   "Disable a principal: revoke its tokens and end its sessions",
		Example: `  heph principals disable alice`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return principalCall(cmd, g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Principal, *apiclient.Response, error) {
				return api.DisablePrincipal(ctx, args[0])
			}, "principal %s disabled (groups %s); its tokens are revoked and its sessions ended")
		},
	}
	cmd.AddCommand(ls, setGroups, disable)
	return cmd
}

// principalCall runs a call that answers with a principal, and prints it
// with format (its name and groups).
func principalCall(cmd *cobra.Command, g *globals, fn func(ctx context.Context, api *apiclient.Client) (*apiclient.Principal, *apiclient.Response, error), format string) error {
	return call(cmd.Context(), g, 0, fn, func(w io.Writer, p *apiclient.Principal) error {
		_, err := fmt.Fprintf(w, format+"\n", p.Name, groupList(p.Groups))
		return err
	})
}

func newAudit(g *globals) *cobra.Command {
	var (
		limit  int
		cursor string
	)
	cmd := &cobra.Command{
		Use:     "audit",
		Short:   "List the audit log of mutating calls, newest first",
		Example: `  heph audit --limit 50`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usagef("--limit must not be negative, got %d", limit)
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.AuditPage, *apiclient.Response, error) {
				return api.Audit(ctx, limit, cursor)
			}, func(w io.Writer, page *apiclient.AuditPage) error {
				tw := newTable(w, "ID", "AT", "ACTOR", "ROLE", "ACTION", "TARGET", "STATUS", "CALL")
				for _, e := range page.Entries {
					row(tw, e.ID, e.At, e.Actor, e.Role, e.Action, e.Target, e.Status, e.Method+" "+e.Path)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				// Tables only: with -o json the page's next field has the
				// cursor.
				if page.Next != "" {
					fmt.Fprintf(g.env.Stderr, "more: heph audit --cursor %s\n", page.Next)
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "entries per page (default the server's, 100)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page's cursor")
	return cmd
}

// adminStore is a backend's store: the engine's seam and the admin seam
// (both backends implement both).
type adminStore interface {
	store.Store
	store.Admin
}

// bootstrapToken creates a token straight in the store (migrated first,
// as the store does when it opens), for the first admin token of a
// server.
func bootstrapToken(cmd *cobra.Command, db *dbFlags, p *server.TokenParams) (*apiclient.Token, error) {
	ctx := cmd.Context()
	fl := cmd.Flags()
	var (
		st  adminStore
		err error
	)
	switch {
	case fl.Changed("sqlite") && fl.Changed("postgres"):
		return nil, usagef("give --postgres or --sqlite, not both")
	case fl.Changed("sqlite"):
		if fl.Changed("schema") {
			return nil, usagef("--schema is for PostgreSQL; SQLite has none")
		}
		st, err = sqlite.Open(ctx, &sqlite.Config{Path: db.sqlite})
	default:
		st, err = postgres.Open(ctx, &postgres.Config{DSN: db.postgres, Schema: db.schema})
	}
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	t, pr, secret, err := server.NewToken(ctx, st, p, time.Now())
	switch {
	case errors.Is(err, store.ErrTokenExists):
		return nil, &exitError{code: ExitConflict, msg: fmt.Sprintf("create token: an active token is named %q: revoke it first, or name the token", p.Name)}
	case errors.Is(err, store.ErrPrincipalDisabled):
		return nil, &exitError{code: ExitConflict, msg: fmt.Sprintf("create token: the principal %q is disabled", p.Principal)}
	case errors.Is(err, hephtype.ErrInvalidInput):
		return nil, usagef("%v", err)
	case err != nil:
		return nil, fmt.Errorf("create token: %w", err)
	}
	return &apiclient.Token{ID: t.ID, Name: t.Name, Principal: t.Principal, Role: t.Role, Queues: t.Options.Queues, Handlers: t.Options.Handlers,
		ActAs: t.Options.ActAs, Secret: secret, CreatedAt: t.CreatedAt, Groups: pr.Groups, Kind: pr.Kind}, nil
}
