package e2e_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/e2e"
)

func TestSQLiteRollingDeploy(t *testing.T) {
	t.Parallel()
	e2e.RunRollingDeploy(t, sqliteBackend(), 200)
}

func TestPostgresRollingDeploy(t *testing.T) {
	t.Parallel()
	e2e.RunRollingDeploy(t, postgresBackend(), 200)
}
