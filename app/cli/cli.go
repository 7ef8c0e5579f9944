// Package cli is the heph command line: a tree of cobra commands that
// cmd/heph runs. Commands write to the streams of an Env, so tests run
// them in-process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// Env is what commands see of the world.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads environment variables (os.Getenv in the binary).
	Getenv func(key string) string
	// IsTerminal reports whether a stream of the Env (Stdin, Stdout or
	// Stderr) is a terminal. Nil: none is. Confirmation prompts and
	// progress bars need one.
	IsTerminal func(stream any) bool
}

func (e *Env) getenv(key string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(key)
}

func (e *Env) terminal(stream any) bool {
	return e.IsTerminal != nil && stream != nil && e.IsTerminal(stream)
}

// The environment variables the commands read.
const (
	// EnvPostgres is the default of --postgres.
	EnvPostgres = "HEPH_POSTGRES"
	// EnvSQLite is the default of the server's --sqlite.
	EnvSQLite = "HEPH_SQLITE"
	// EnvAddr is the default of --addr: the server's URL for the client
	// commands, the address heph server listens on.
	EnvAddr = "HEPH_ADDR"
	// EnvToken is the default of --token.
	EnvToken = "HEPH_TOKEN"
	// EnvOutput is the default of -o.
	EnvOutput = "HEPH_OUTPUT"
	// EnvInsecure, when "1" or "true", is the server's --insecure.
	EnvInsecure = "HEPH_INSECURE"
)

// The exit codes of heph.
const (
	ExitOK          = 0 // success
	ExitFailure     = 1 // any other failure (the server's problem is printed)
	ExitUsage       = 2 // bad flags or arguments
	ExitNotFound    = 3 // the server answered 404: no such run, schedule, queue...
	ExitConflict    = 4 // the server answered 409: a conflict, a lost lease, a run that cannot take the call
	ExitAuth        = 5 // the server answered 401 or 403: no token, a bad or revoked one, the wrong role
	ExitUnreachable = 6 // no answer from the server
	ExitRunFailed   = 7 // the run ended failed or cancelled (result, start --wait)
	ExitNotFinished = 8 // the run had not ended when the wait ended (result --wait, start --wait)
)

const exitCodesHelp = `Exit codes:
  0  success
  1  failure (the server's problem is printed as "heph: <title>: <detail>")
  2  usage error: bad flags or arguments
  3  not found (the server answered 404)
  4  conflict (409): a lost lease, a call the run cannot take now
  5  unauthorized or forbidden (401, 403): no token, a bad one, the wrong role
  6  server unreachable
  7  the run ended unsuccessfully: failed or cancelled (result, start --wait)
  8  the run had not ended when the wait did (result --wait, start --wait)`

// New returns the root command, heph.
func New(env *Env) *cobra.Command {
	g := &globals{env: env}
	root := &cobra.Command{
		Use:   "heph",
		Short: "Hephaestus, a durable workflow engine",
		Long: "heph runs and inspects Hephaestus, a durable workflow engine: flows and workflows\n" +
			"whose runs survive crashes, on SQLite or PostgreSQL.\n\n" +
			"Most commands talk to a server (heph server) at --addr with --token.\n" +
			"validate, graph, migrate, bench and tokens create --sqlite/--postgres work offline.\n\n" +
			exitCodesHelp + "\n\n" +
			"Environment: HEPH_ADDR (--addr), HEPH_TOKEN (--token), HEPH_OUTPUT (-o),\n" +
			"HEPH_POSTGRES (--postgres), HEPH_SQLITE and HEPH_INSECURE (heph server).",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	if env.Stdin != nil {
		root.SetIn(env.Stdin)
	}
	g.register(root)
	root.AddCommand(
		newMigrate(env),
		newValidate(g), newGraph(g),
		newStart(g), newList(g), newStats(g), newShow(g), newHistory(g), newLogs(g), newResult(g),
		newSignal(g), newUpdate(g), newQuery(g), newResume(g), newDecide(g, true), newDecide(g, false),
		newCancel(g), newPause(g), newUnpause(g), newReset(g), newRetry(g), newResetWorkflow(g), newDelete(g), newOperations(g), newApprovals(g),
		newSchedules(g), newEvents(g), newTriggers(g), newQueues(g), newWorkers(g), newBuilds(g), newTokens(g), newPrincipals(g), newAudit(g), newSecrets(g), newWebhooks(g), newDocuments(g), newDefinitions(g), newVersions(g),
		newServer(g), newBench(g), newVet(g), newReplay(g), newPayloads(g),
	)
	root.SetFlagErrorFunc(flagError)
	usageArgs(root)
	return root
}

// usageArgs makes the argument errors of every command usage errors, and
// makes a command group refuse arguments that name no subcommand.
func usageArgs(cmd *cobra.Command) {
	args := cmd.Args
	if args == nil {
		if cmd.HasSubCommands() {
			args = noSubcommand
		} else {
			args = cobra.ArbitraryArgs
		}
	}
	cmd.Args = func(c *cobra.Command, a []string) error {
		if err := args(c, a); err != nil {
			return &usageError{err.Error()}
		}
		return nil
	}
	if cmd.HasSubCommands() && cmd.Run == nil && cmd.RunE == nil {
		// Runnable, so that cobra checks its arguments.
		cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// Main runs the command line args (without the program name) and returns
// the process's exit code (ExitOK, ExitFailure, ...). An error is printed
// on Stderr: "heph: <what>" lines, or with -o json one JSON object
// {"error": {...}}.
func Main(ctx context.Context, args []string, env *Env) int {
	root := New(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var exit *exitError
	if errors.As(err, &exit) && exit.silent {
		return exit.code
	}
	code := ExitCode(err)
	if jsonErrors(root, args) {
		writeErrorJSON(env.Stderr, err, code)
		return code
	}
	var (
		apiErr *apiclient.Error
		hint   *hintError
	)
	switch {
	case errors.As(err, &hint):
		fmt.Fprintln(env.Stderr, "heph:", err)
	case errors.As(err, &apiErr):
		fmt.Fprintln(env.Stderr, "heph:", err.Error())
		for _, d := range apiErr.Errors {
			fmt.Fprintf(env.Stderr, "  %d:%d: %s: %s\n", d.Line, d.Column, d.Path, d.Message)
		}
		if apiErr.Fix != "" && !strings.Contains(err.Error(), apiErr.Fix) {
			fmt.Fprintln(env.Stderr, "  fix:", apiErr.Fix)
		}
	default:
		fmt.Fprintln(env.Stderr, "heph:", err)
	}
	return code
}

// ExitCode is the exit code of a command's error.
func ExitCode(err error) int {
	var (
		ue     *usageError
		apiErr *apiclient.Error
		exit   *exitError
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &exit):
		return exit.code
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &apiErr):
		switch apiErr.Status {
		case 404:
			return ExitNotFound
		case 409:
			return ExitConflict
		case 401, 403:
			return ExitAuth
		}
	case errors.Is(err, apiclient.ErrUnreachable):
		return ExitUnreachable
	}
	return ExitFailure
}

// OSEnv is the process's environment.
func OSEnv() *Env {
	return &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, IsTerminal: osTerminal}
}

func osTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitError ends a command with an exit code; silent ones print nothing
// more (the command has said what happened).
type exitError struct {
	code   int
	msg    string
	silent bool
}

func (e *exitError) Error() string { return e.msg }

// exitWith ends the command with code, silently.
func exitWith(code int) error {
	return &exitError{code: code, silent: true, msg: fmt.Sprintf("exit %d", code)}
}

// allPages fetches every page of a list through fetch (cursor "" is the
// first page; an empty next ends it), each with the request timeout. It
// returns the items, the last response, and whether there was more than
// one page (then -o json prints the items, not one page's body).
func allPages[T any](ctx context.Context, g *globals, fetch func(ctx context.Context, cursor string) ([]T, string, *apiclient.Response, error)) (items []T, last *apiclient.Response, many bool, err error) {
	cursor := ""
	for pages := 0; ; pages++ {
		rctx, cancel := g.reqCtx(ctx, 0)
		page, next, r, err := fetch(rctx, cursor)
		cancel()
		if err != nil {
			return nil, nil, false, err
		}
		items, last, cursor = append(items, page...), r, next
		if next == "" {
			return items, last, pages > 0, nil
		}
	}
}
