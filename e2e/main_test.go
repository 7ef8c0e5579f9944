package e2e_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The crash test runs this binary again as the process it kills.
	if path := os.Getenv(crashEnv); path != "" {
		if err := crashChild(path); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The document crash test too.
	if path := os.Getenv(docCrashEnv); path != "" {
		if err := docCrashChild(path); err != nil {
			fmt.Fprintln(os.Stderr, "document crash child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The workflow crash tests run it as the process they kill.
	if spec := os.Getenv(wfCrashEnv); spec != "" {
		if err := wfCrashChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "workflow crash child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The multi-process test runs it as its worker processes.
	if dsn := os.Getenv(multiEnvDSN); dsn != "" {
		if err := multiChild(dsn, os.Getenv(multiEnvChild)); err != nil {
			fmt.Fprintln(os.Stderr, "multi-process child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The catalog test runs it as its worker processes.
	if dsn := os.Getenv(catalogEnvDSN); dsn != "" {
		if err := catalogChild(dsn, os.Getenv(catalogEnvChild)); err != nil {
			fmt.Fprintln(os.Stderr, "catalog child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The remote-messages test runs it as the process that sends them.
	if dsn := os.Getenv(remoteEnvDSN); dsn != "" {
		if err := remoteSender(dsn, os.Getenv(remoteEnvRun)); err != nil {
			fmt.Fprintln(os.Stderr, "remote sender:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The webhook crash test runs it as the process it kills mid-delivery.
	if dsn := os.Getenv(webhookEnvDSN); dsn != "" {
		if err := webhookChild(dsn); err != nil {
			fmt.Fprintln(os.Stderr, "webhook child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The large payloads' SIGKILL test runs it as the process it kills
	// between a blob's write and its commit.
	if spec := os.Getenv(largeKillEnv); spec != "" {
		if err := largeKillChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "large payload child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The triggers' SIGKILL test runs it as the processes it kills.
	if spec := os.Getenv(trigKillEnv); spec != "" {
		if err := trigKillChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "triggers kill child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The chaos tests run it as their worker processes.
	if spec := os.Getenv(chaosEnv); spec != "" {
		if err := chaosChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "chaos child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
