package cli

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// envPayloadCompress turns payload compression on (--payload-compress).
const envPayloadCompress = "HEPH_PAYLOAD_COMPRESS"

// payloadFlags make the payload codec of heph server and heph payloads:
// the payload keys (HEPH_PAYLOAD_KEYS, a directory, files), the write key,
// and compression.
type payloadFlags struct {
	keyDir, keyFiles, writeKey string
	compress                   bool
}

func (f *payloadFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.keyDir, "payload-key-dir", "", "directory of payload keys, one file ID.key each (base64 of 32 bytes); $"+codec.EnvKeyDir)
	fl.StringVar(&f.keyFiles, "payload-key-files", "", "payload key files, separated by commas, each named ID.key; $"+codec.EnvKeyFiles)
	fl.StringVar(&f.writeKey, "payload-write-key", "", "id of the payload key that encrypts new payloads (required with several keys); $"+codec.EnvWriteKey)
	fl.BoolVar(&f.compress, "payload-compress", false, "compress payloads (zstd, from 1 KiB) before they are stored (and encrypted); $"+envPayloadCompress)
}

// fromEnv sets each flag not given from its environment variable.
func (f *payloadFlags) fromEnv(cmd *cobra.Command, env *Env) error {
	fl := cmd.Flags()
	for _, s := range []struct {
		flag, key string
		dst       *string
	}{{"payload-key-dir", codec.EnvKeyDir, &f.keyDir}, {"payload-key-files", codec.EnvKeyFiles, &f.keyFiles}, {"payload-write-key", codec.EnvWriteKey, &f.writeKey}} {
		if v := env.getenv(s.key); v != "" && !fl.Changed(s.flag) {
			*s.dst = v
		}
	}
	if v := env.getenv(envPayloadCompress); v != "" && !fl.Changed("payload-compress") {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return usagef("$%s=%q: want true or false", envPayloadCompress, v)
		}
		f.compress = on
	}
	return nil
}

// chain makes the payload codec: zstd with --payload-compress, then
// AES-GCM with the payload keys when there are any; nil when neither
// (payloads are then stored plain, and those stored encoded before are
// shown as their envelopes). Zstd decodes what was compressed before
// also when this process does not compress.
func (f *payloadFlags) chain(env *Env) (*codec.Chain, error) {
	ring, err := codec.KeyringFromLookup(func(key string) string {
		switch key {
		case codec.EnvKeyDir:
			return f.keyDir
		case codec.EnvKeyFiles:
			return f.keyFiles
		case codec.EnvWriteKey:
			return f.writeKey
		}
		return env.getenv(key)
	})
	if err != nil {
		return nil, usagef("%v", err)
	}
	z, err := codec.NewZstd(nil)
	if err != nil {
		return nil, err
	}
	var cs, decoders []codec.Codec
	if f.compress {
		cs = append(cs, z)
	} else {
		decoders = append(decoders, z)
	}
	if ring != nil {
		a, err := codec.NewAESGCM(ring)
		if err != nil {
			return nil, err
		}
		cs = append(cs, a)
	}
	if len(cs) == 0 {
		return nil, nil
	}
	return codec.NewChain(&codec.ChainConfig{Codecs: cs, Decoders: decoders})
}

func newPayloads(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "payloads",
		Short: "Re-encode the payloads stored in a database (after a payload key rotation)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newPayloadsReencode(g))
	return cmd
}

func newPayloadsReencode(g *globals) *cobra.Command {
	var (
		db dbFlags
		pf payloadFlags
	)
	cmd := &cobra.Command{
		Use:   "reencode",
		Short: "Rewrite every stored payload with the current payload keys",
		Long: "reencode rewrites every payload stored in the database (run inputs and outputs, history,\n" +
			"tasks, requests, schedules, webhook events and deliveries) as the payload codec of its\n" +
			"flags writes payloads now: payloads under an old key are decrypted with it and encrypted\n" +
			"with the write key, plain payloads are encrypted, payloads under the write key are left\n" +
			"as they are. Give it every key still in use and the new write key, as to heph server\n" +
			"(HEPH_PAYLOAD_KEYS, --payload-key-dir, --payload-key-files, --payload-write-key). It\n" +
			"works in batches with a compare-and-set per payload, so servers may run meanwhile (once\n" +
			"they all write with the new key), and may be run again after an interruption. Once it\n" +
			"succeeds, the old keys may be dropped. See docs/payloads.md.",
		Example: `  HEPH_PAYLOAD_KEYS="k1:…,k2:…" heph payloads reencode --sqlite heph.db --payload-write-key k2
  heph payloads reencode --postgres postgres://heph@db/heph --payload-key-dir /etc/heph/payload-keys --payload-write-key k2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pf.fromEnv(cmd, g.env); err != nil {
				return err
			}
			chain, err := pf.chain(g.env)
			if err != nil {
				return err
			}
			if chain == nil {
				return usagef("give the payload keys (HEPH_PAYLOAD_KEYS, --payload-key-dir or --payload-key-files) or --payload-compress: there is nothing to re-encode with")
			}
			st, err := openStore(cmd, g.env, &db)
			if err != nil {
				return err
			}
			defer st.Close()
			client, err := hephaestus.New(&hephaestus.Config{Store: st, PayloadCodec: chain, Logger: slog.New(slog.NewTextHandler(g.env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				return err
			}
			start := time.Now()
			done, err := client.ReencodePayloads(cmd.Context())
			if err != nil {
				return err
			}
			return g.emitValue(done, func(w io.Writer) error {
				tw := newTable(w, "TABLE", "ROWS", "CHANGED", "SKIPPED")
				for _, t := range done {
					row(tw, t.Table, t.Rows, t.Changed, t.Skipped)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				_, err := fmt.Fprintf(w, "re-encoded with write key %q in %s\n", chain.WriteKey(), time.Since(start).Round(time.Millisecond))
				return err
			})
		},
	}
	db.register(cmd)
	pf.register(cmd.Flags())
	return cmd
}

// openStore opens the store the flags name (--sqlite, or --postgres, from
// $HEPH_POSTGRES when neither is given), migrated as stores open.
func openStore(cmd *cobra.Command, env *Env, db *dbFlags) (store.Store, error) {
	fl := cmd.Flags()
	dsn := db.postgres
	if !fl.Changed("postgres") && !fl.Changed("sqlite") {
		dsn = env.getenv(EnvPostgres)
	}
	var (
		st  store.Store
		err error
	)
	switch {
	case fl.Changed("postgres") && fl.Changed("sqlite"):
		return nil, usagef("give --postgres or --sqlite, not both")
	case db.sqlite != "" && fl.Changed("schema"):
		return nil, usagef("--schema is for PostgreSQL; SQLite has none")
	case db.sqlite != "":
		st, err = sqlite.Open(cmd.Context(), &sqlite.Config{Path: db.sqlite})
	case dsn != "":
		st, err = postgres.Open(cmd.Context(), &postgres.Config{DSN: dsn, Schema: db.schema})
	default:
		return nil, usagef("name a database: --postgres DSN (or $%s) or --sqlite PATH", EnvPostgres)
	}
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return st, nil
}
