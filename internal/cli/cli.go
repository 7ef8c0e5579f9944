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

	"github.com/spf13/cobra"
)

// Env is what commands see of the world.
type Env struct {
	Stdout, Stderr io.Writer
	// Getenv reads environment variables (os.Getenv in the binary).
	Getenv func(key string) string
}

// The environment variables the commands read.
const (
	// EnvPostgres is the default of --postgres.
	EnvPostgres = "HEPH_POSTGRES"
)

// New returns the root command, heph.
func New(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "heph",
		Short: "Hephaestus, a durable workflow engine",
		Long: "heph runs and inspects Hephaestus, a durable workflow engine: flows and workflows\n" +
			"whose runs survive crashes, on SQLite or PostgreSQL.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.AddCommand(newMigrate(env))
	return root
}

// Main runs the command line args (without the program name) and returns
// the process's exit code: 0, 1 on failure, 2 on a usage error.
func Main(ctx context.Context, args []string, env *Env) int {
	root := New(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(env.Stderr, "heph:", err)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// OSEnv is the process's environment.
func OSEnv() *Env {
	return &Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }
