package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newServer(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "server",
		Short: "Serve the HTTP API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("heph server: not built yet")
		},
	}
}
