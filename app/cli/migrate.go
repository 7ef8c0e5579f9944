package cli

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/spf13/cobra"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/hephaestus-go/hephaestus/internal/migrate"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// dbFlags name the database a command works on.
type dbFlags struct {
	postgres, schema, sqlite string
}

func (f *dbFlags) register(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.StringVar(&f.postgres, "postgres", "", "PostgreSQL DSN, e.g. postgres://user@host/db (default $"+EnvPostgres+")")
	fl.StringVar(&f.schema, "schema", "heph", "PostgreSQL schema that holds the tables")
	fl.StringVar(&f.sqlite, "sqlite", "", "SQLite database file")
}

// target is a database to migrate.
type target struct {
	desc    string
	files   fs.FS
	dialect migrate.Dialect
	// with runs fn on a connection to the database, under the lock that
	// serializes migrations.
	with func(ctx context.Context, fn func(ctx context.Context, db migrate.DB) error) error
	// read runs fn on a connection that takes no lock and creates
	// nothing: for migrate status.
	read func(ctx context.Context, fn func(ctx context.Context, db migrate.DB) error) error
}

// target resolves the flags: --sqlite, or --postgres (from the
// environment when not given).
func (f *dbFlags) target(cmd *cobra.Command, env *Env, mustExist bool) (*target, error) {
	flags := cmd.Flags()
	dsn := f.postgres
	if !flags.Changed("postgres") && !flags.Changed("sqlite") && env.Getenv != nil {
		dsn = env.Getenv(EnvPostgres)
	}
	switch {
	case flags.Changed("postgres") && flags.Changed("sqlite"):
		return nil, usagef("give --postgres or --sqlite, not both")
	case f.sqlite != "" && flags.Changed("schema"):
		return nil, usagef("--schema is for PostgreSQL; SQLite has none")
	case f.sqlite != "":
		return sqliteTarget(f.sqlite, mustExist)
	case dsn != "":
		cfg := &postgres.Config{DSN: dsn, Schema: f.schema}
		return &target{
			desc: "postgres schema " + f.schema, files: postgres.Migrations(), dialect: migrate.Postgres,
			with: func(ctx context.Context, fn func(ctx context.Context, db migrate.DB) error) error {
				return postgres.WithMigrationLock(ctx, cfg, func(ctx context.Context, conn *sql.Conn) error { return fn(ctx, conn) })
			},
			read: func(ctx context.Context, fn func(ctx context.Context, db migrate.DB) error) (err error) {
				if !schemaName.MatchString(f.schema) {
					return fmt.Errorf("postgres: Config.Schema %q: want a lower-case SQL identifier", f.schema)
				}
				cc, err := pgx.ParseConfig(dsn)
				if err != nil {
					return errors.New("postgres: the DSN cannot be parsed")
				}
				// The schema may not exist: then nothing is applied.
				cc.RuntimeParams["search_path"] = f.schema
				db := stdlib.OpenDB(*cc)
				defer func() {
					if cerr := db.Close(); err == nil {
						err = cerr
					}
				}()
				return fn(ctx, db)
			},
		}, nil
	}
	return nil, usagef("name a database: --postgres DSN (or $%s) or --sqlite PATH", EnvPostgres)
}

func sqliteTarget(path string, mustExist bool) (*target, error) {
	if mustExist {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("sqlite database %s: %w", path, err)
		}
	}
	open := func(params string) func(ctx context.Context, fn func(ctx context.Context, db migrate.DB) error) error {
		return func(ctx context.Context, fn func(ctx context.Context, db migrate.DB) error) (err error) {
			dsn := "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path) + "?" + params
			db, err := sql.Open("sqlite", dsn)
			if err != nil {
				return err
			}
			defer func() {
				if cerr := db.Close(); err == nil {
					err = cerr
				}
			}()
			db.SetMaxOpenConns(1)
			return fn(ctx, db)
		}
	}
	return &target{
		desc: "sqlite " + path, files: sqlite.Migrations(), dialect: migrate.SQLite,
		// BEGIN IMMEDIATE serializes the runner against other processes
		// on the file, as the store does.
		with: open("_txlock=immediate&_busy_timeout=10000"),
		read: open("_busy_timeout=10000"),
	}, nil
}

// schemaName is what a PostgreSQL schema name may be (as the store
// checks it).
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func newMigrate(env *Env) *cobra.Command {
	var db dbFlags
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, revert or show the schema migrations of a database",
		Long: "migrate applies, reverts or shows the embedded schema migrations of a store.\n" +
			"Stores apply pending migrations when they open; this command does it by hand\n" +
			"(PostgreSQL: under the advisory lock the stores take).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	db.register(cmd)

	cmd.AddCommand(newMigrateUp(env, &db), newMigrateDown(env, &db), newMigrateStatus(env, &db))
	return cmd
}

// newMigrateUp is "migrate up".
func newMigrateUp(env *Env, db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := db.target(cmd, env, false)
			if err != nil {
				return err
			}
			var done []int
			err = t.with(cmd.Context(), func(ctx context.Context, conn migrate.DB) (err error) {
				done, err = migrate.Up(ctx, conn, t.files, t.dialect)
				return err
			})
			report(env, t, "applied", done)
			if err != nil {
				return fmt.Errorf("migrate up: %w", err)
			}
			if len(done) == 0 {
				fmt.Fprintf(env.Stdout, "%s: up to date\n", t.desc)
			}
			return nil
		},
	}
}

// newMigrateDown is "migrate down".
func newMigrateDown(env *Env, db *dbFlags) *cobra.Command {
	var (
		steps int
		yes   bool
	)
	down := &cobra.Command{
		Use:   "down",
		Short: "Revert the last migrations (one by default), after a confirmation",
		Long: "down reverts the last migrations, dropping what they created and the data in it.\n" +
			"It asks for a confirmation on a terminal; --yes skips it, and is required when\n" +
			"standard input is not a terminal.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if steps <= 0 {
				return usagef("--steps must be positive, got %d", steps)
			}
			t, err := db.target(cmd, env, true)
			if err != nil {
				return err
			}
			if !yes {
				ok, err := confirm(env, fmt.Sprintf("Revert the last %d migration(s) of %s, dropping their tables and data? [y/N] ", steps, t.desc))
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintln(env.Stderr, "heph: nothing reverted")
					return exitWith(ExitFailure)
				}
			}
			var done []int
			err = t.with(cmd.Context(), func(ctx context.Context, conn migrate.DB) (err error) {
				done, err = migrate.Down(ctx, conn, t.files, t.dialect, steps)
				return err
			})
			report(env, t, "reverted", done)
			if err != nil {
				return fmt.Errorf("migrate down: %w", err)
			}
			if len(done) == 0 {
				fmt.Fprintf(env.Stdout, "%s: nothing to revert\n", t.desc)
			}
			return nil
		},
	}
	down.Flags().IntVar(&steps, "steps", 1, "number of migrations to revert")
	down.Flags().BoolVarP(&yes, "yes", "y", false, "revert without asking")
	return down
}

// newMigrateStatus is "migrate status".
func newMigrateStatus(env *Env, db *dbFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List the migrations and whether each is applied (changes nothing)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := db.target(cmd, env, true)
			if err != nil {
				return err
			}
			var states []migrate.State
			err = t.read(cmd.Context(), func(ctx context.Context, conn migrate.DB) (err error) {
				states, err = migrate.Status(ctx, conn, t.files, t.dialect)
				return err
			})
			if err != nil {
				return fmt.Errorf("migrate status: %w", err)
			}
			fmt.Fprintf(env.Stdout, "%s\n", t.desc)
			w := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tNAME\tSTATE\tAPPLIED AT")
			for _, s := range states {
				state, at := "pending", ""
				switch {
				case s.Unknown:
					state = "unknown (newer than this program)"
				case s.Applied:
					state = "applied"
				}
				if s.Applied {
					at = s.AppliedAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%04d\t%s\t%s\t%s\n", s.Version, s.Name, state, at)
			}
			return w.Flush()
		},
	}
}

// report prints the migrations that ran, by version and name.
func report(env *Env, t *target, verb string, versions []int) {
	ms, _ := migrate.Load(t.files) // names only: without them, versions
	for _, v := range versions {
		name := ""
		for _, m := range ms {
			if m.Version == v {
				name = "_" + m.Name
			}
		}
		fmt.Fprintf(env.Stdout, "%s: %s %04d%s\n", t.desc, verb, v, name)
	}
}

// confirm asks a yes/no question on the terminal. Without a terminal on
// standard input it refuses: a usage error that names --yes.
func confirm(env *Env, question string) (bool, error) {
	if !env.terminal(env.Stdin) {
		return false, usagef("standard input is not a terminal to confirm on: add --yes")
	}
	fmt.Fprint(env.Stderr, question)
	line, err := bufio.NewReader(env.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return false, nil
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}
