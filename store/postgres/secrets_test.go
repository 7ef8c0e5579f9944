package postgres_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/storetest"
)

func TestSecretsConformance(t *testing.T) {
	t.Parallel()
	storetest.RunSecrets(t, func(t *testing.T) store.Secrets {
		return open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	})
}
