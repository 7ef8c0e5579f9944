package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/storetest"
)

func TestSecretsConformance(t *testing.T) {
	t.Parallel()
	storetest.RunSecrets(t, func(t *testing.T) store.Secrets {
		return open(t, &Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	})
}
