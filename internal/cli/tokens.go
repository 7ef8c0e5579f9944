package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/apiclient"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

var tokenRoles = []string{"admin", "worker", "read"}

func newTokens(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "tokens",
		Aliases: []string{"token"},
		Short:   "List, create and revoke API tokens",
		Long: "tokens manages the server's bearer tokens (an admin token is needed). The first admin\n" +
			"token is made without a server, straight in the store:\n\n" +
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
			api, err := g.api()
			if err != nil {
				return err
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			defer cancel()
			ts, resp, err := api.Tokens(ctx)
			if err != nil {
				return err
			}
			return g.emit(resp, func(w io.Writer) error { return tokenTable(w, ts) })
		},
	}
	revoke := &cobra.Command{
		Use:     "revoke <id>",
		Short:   "Revoke a token: it is refused from now on",
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
	tw := newTable(w, "ID", "NAME", "ROLE", "CREATED", "LAST USED", "REVOKED")
	for _, t := range ts {
		row(tw, t.ID, t.Name, t.Role, t.CreatedAt, t.LastUsedAt, t.RevokedAt)
	}
	return tw.Flush()
}

func tokensCreate(g *globals) *cobra.Command {
	var (
		role string
		db   dbFlags
	)
	cmd := &cobra.Command{
		Use:   "create <name>",
		Short: "Create a token and print its secret (shown this once)",
		Long: "create makes a token of a role: admin (everything), worker (the worker protocol and\n" +
			"reading runs) or read (every GET). Through the server by default; with --sqlite or\n" +
			"--postgres straight in the store, to make the first admin token.",
		Example: `  heph tokens create ci --role read
  heph tokens create admin --role admin --sqlite heph.db`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(tokenRoles, role) {
				return usagef("--role must be admin, worker or read, got %q", role)
			}
			fl := cmd.Flags()
			var (
				t    *apiclient.Token
				resp *apiclient.Response
				err  error
			)
			if fl.Changed("sqlite") || fl.Changed("postgres") {
				t, err = bootstrapToken(cmd, &db, args[0], role)
			} else {
				api, aerr := g.api()
				if aerr != nil {
					return aerr
				}
				ctx, cancel := g.reqCtx(cmd.Context(), 0)
				defer cancel()
				t, resp, err = api.CreateToken(ctx, args[0], role)
			}
			if err != nil {
				return err
			}
			print := func(w io.Writer) error {
				fmt.Fprintf(w, "token %s: role %s, id %s\n", t.Name, t.Role, t.ID)
				fmt.Fprintf(w, "secret (shown once): %s\n", t.Secret)
				return nil
			}
			if resp == nil {
				return g.emitValue(t, print)
			}
			return g.emit(resp, print)
		},
	}
	cmd.Flags().StringVar(&role, "role", "read", "admin, worker or read")
	fl := cmd.Flags()
	fl.StringVar(&db.postgres, "postgres", "", "create the token in this PostgreSQL database, without a server")
	fl.StringVar(&db.schema, "schema", "heph", "PostgreSQL schema of the store")
	fl.StringVar(&db.sqlite, "sqlite", "", "create the token in this SQLite file, without a server")
	return cmd
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
			api, err := g.api()
			if err != nil {
				return err
			}
			ctx, cancel := g.reqCtx(cmd.Context(), 0)
			defer cancel()
			page, resp, err := api.Audit(ctx, limit, cursor)
			if err != nil {
				return err
			}
			err = g.emit(resp, func(w io.Writer) error {
				tw := newTable(w, "ID", "AT", "ACTOR", "ROLE", "ACTION", "TARGET", "STATUS", "CALL")
				for _, e := range page.Entries {
					row(tw, e.ID, e.At, e.Actor, e.Role, e.Action, e.Target, e.Status, e.Method+" "+e.Path)
				}
				return tw.Flush()
			})
			if err == nil && page.Next != "" && !g.json() {
				fmt.Fprintf(g.env.Stderr, "more: heph audit --cursor %s\n", page.Next)
			}
			return err
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "entries per page (default the server's, 100)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page's cursor")
	return cmd
}

// bootstrapToken creates a token straight in the store (migrated first,
// as the store does when it opens), for the first admin token of a
// server.
func bootstrapToken(cmd *cobra.Command, db *dbFlags, name, role string) (*apiclient.Token, error) {
	ctx := cmd.Context()
	fl := cmd.Flags()
	var (
		st  store.Store
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
	acc, ok := st.(store.Access)
	if !ok {
		return nil, errors.New("the store keeps no tokens")
	}
	t, secret, err := server.NewToken(ctx, acc, name, role, time.Now())
	switch {
	case errors.Is(err, store.ErrTokenExists):
		return nil, &exitError{code: ExitConflict, msg: fmt.Sprintf("create token: an active token is named %q: revoke it first", name)}
	case errors.Is(err, hephtype.ErrInvalidInput):
		return nil, usagef("%v", err)
	case err != nil:
		return nil, fmt.Errorf("create token: %w", err)
	}
	return &apiclient.Token{ID: t.ID, Name: t.Name, Role: t.Role, Secret: secret, CreatedAt: t.CreatedAt}, nil
}
