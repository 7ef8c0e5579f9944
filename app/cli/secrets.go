package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/store"
)

func newSecrets(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "secrets",
		Aliases: []string{"secret"},
		Short:   "Set, list, delete and rotate named secrets (never shown)",
		Long: "secrets manages the server's named secrets, which documents read as {{secret.NAME}} in\n" +
			"the HTTP action's url and headers and Go steps with hephaestus.Secret. The server seals\n" +
			"them with its key ring (HEPH_SECRET_KEYS or --secret-keys-file); no command shows a value.",
	}
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the secrets: names, key ids and times",
		Example: `  heph secrets ls`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.Secret, *apiclient.Response, error) {
				return api.Secrets(ctx)
			}, func(w io.Writer, list []apiclient.Secret) error {
				tw := newTable(w, "NAME", "KEY", "CREATED", "UPDATED")
				for _, s := range list {
					row(tw, s.Name, s.KeyID, s.CreatedAt, s.UpdatedAt)
				}
				return tw.Flush()
			})
		},
	}
	rm := &cobra.Command{
		Use:     "rm <name>",
		Aliases: []string{"delete"},
		Short:   "Delete a secret: steps that read it fail from now on",
		Example: `  heph secrets rm stripe_key`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return oneCall(cmd.Context(), g, func(ctx context.Context, api *apiclient.Client) (*apiclient.Response, error) {
				return api.DeleteSecret(ctx, args[0])
			}, "secret %s deleted", args[0])
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Seal every secret again with the server's current key",
		Long: "rotate re-encrypts every secret that an older key sealed with the server's current key\n" +
			"(the first of its ring); afterwards the older keys can be dropped from the ring.",
		Example: `  HEPH_SECRET_KEYS=k2:<new>,k1:<old> heph server ...   # then
  heph secrets rotate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.RotateSecretsResult, *apiclient.Response, error) {
				return api.RotateSecrets(ctx)
			}, func(w io.Writer, res *apiclient.RotateSecretsResult) error {
				_, err := fmt.Fprintf(w, "%d of %d secrets sealed again; key %s seals them all\n", res.Rotated, res.Total, res.KeyID)
				return err
			})
		},
	}
	cmd.AddCommand(secretsSet(g), ls, rm, rotate)
	return cmd
}

func secretsSet(g *globals) *cobra.Command {
	var fromFile string
	cmd := &cobra.Command{
		Use:   "set <name>",
		Short: "Create a secret or replace its value, read from standard input or a file",
		Long: "set reads the value from standard input (one trailing newline removed), or, with\n" +
			"--from-file, the file's bytes as they are; never from an argument, which the shell's\n" +
			"history would keep. A name is 1 to 128 letters, digits, '_' and '-', starting with a\n" +
			"letter or '_'; a value 1 byte to 64 KiB.",
		Example: `  heph secrets set stripe_key < key.txt
  printf %s "$TOKEN" | heph secrets set api_token
  heph secrets set tls_key --from-file key.pem`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := store.CheckSecretName(args[0]); err != nil {
				return usagef("%v", err)
			}
			var value []byte
			var err error
			if fromFile != "" {
				if value, err = os.ReadFile(fromFile); err != nil {
					return usagef("--from-file: %v", err)
				}
			} else {
				if g.env.terminal(g.env.Stdin) {
					fmt.Fprintln(g.env.Stderr, "heph: type the value, then Ctrl-D")
				}
				in := g.env.Stdin
				if in == nil {
					in = strings.NewReader("")
				}
				if value, err = io.ReadAll(io.LimitReader(in, store.MaxSecretValue+3)); err != nil {
					return fmt.Errorf("read the value: %w", err)
				}
				value = []byte(strings.TrimSuffix(strings.TrimSuffix(string(value), "\n"), "\r"))
			}
			switch {
			case len(value) == 0:
				return usagef("the value is empty: pipe it on standard input or give --from-file")
			case len(value) > store.MaxSecretValue:
				return usagef("the value is more than %d bytes", store.MaxSecretValue)
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Secret, *apiclient.Response, error) {
				return api.SetSecret(ctx, args[0], string(value))
			}, func(w io.Writer, s *apiclient.Secret) error {
				_, err := fmt.Fprintf(w, "secret %s set (key %s)\n", s.Name, s.KeyID)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&fromFile, "from-file", "", "read the value from this file, as it is")
	return cmd
}
