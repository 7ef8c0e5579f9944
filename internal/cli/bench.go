package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newBench(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "bench",
		Short: "Run the standard workloads against a store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("heph bench: not built yet")
		},
	}
}
