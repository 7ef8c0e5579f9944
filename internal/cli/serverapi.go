package cli

import (
	"errors"
	"log/slog"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/store"
)

// serverRegistry is the action registry of the server's documents: the
// server has no Go action, so every action is remote (run by HTTP
// workers).
func serverRegistry() *flowdoc.Registry { return remoteRegistry() }

// newAPI builds the API's handler.
func newAPI(c *hephaestus.Client, st store.Store, f *serverFlags, logger *slog.Logger) (api, error) {
	return nil, errors.New("heph server: the HTTP API is not built into this binary yet")
}
