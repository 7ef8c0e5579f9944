package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/blobstore"
	"github.com/hephaestus-go/hephaestus/blobstore/gocloudblob"
	"github.com/hephaestus-go/hephaestus/codec"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// envPayloadCompress turns payload compression on (--payload-compress).
const envPayloadCompress = "HEPH_PAYLOAD_COMPRESS"

// envPayloadBlobs and envPayloadOffloadAbove are --payload-blobs and
// --payload-offload-above.
const (
	envPayloadBlobs        = "HEPH_PAYLOAD_BLOBS"
	envPayloadOffloadAbove = "HEPH_PAYLOAD_OFFLOAD_ABOVE"
)

// payloadFlags make the payload codec of heph server and heph payloads:
// the payload keys (HEPH_PAYLOAD_KEYS, a directory, files), the write key,
// and compression.
type payloadFlags struct {
	keyDir, keyFiles, writeKey string
	compress                   bool
	blobs                      string
	offloadAbove               int
}

func (f *payloadFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.keyDir, "payload-key-dir", "", "directory of payload keys, one file ID.key each (base64 of 32 bytes); $"+codec.EnvKeyDir)
	fl.StringVar(&f.keyFiles, "payload-key-files", "", "payload key files, separated by commas, each named ID.key; $"+codec.EnvKeyFiles)
	fl.StringVar(&f.writeKey, "payload-write-key", "", "id of the payload key that encrypts new payloads (required with several keys); $"+codec.EnvWriteKey)
	fl.BoolVar(&f.compress, "payload-compress", false, "compress payloads (zstd, from 1 KiB) before they are stored (and encrypted); $"+envPayloadCompress)
	fl.StringVar(&f.blobs, "payload-blobs", "", "URL of the blob store for large payloads (file:///dir?create_dir=true, s3://bucket?region=…); $"+envPayloadBlobs)
	fl.IntVar(&f.offloadAbove, "payload-offload-above", 0, "size in bytes above which a payload goes to the blob store (default 262144); $"+envPayloadOffloadAbove)
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
	if v := env.getenv(envPayloadBlobs); v != "" && !fl.Changed("payload-blobs") {
		f.blobs = v
	}
	if v := env.getenv(envPayloadOffloadAbove); v != "" && !fl.Changed("payload-offload-above") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return usagef("$%s=%q: want a size in bytes", envPayloadOffloadAbove, v)
		}
		f.offloadAbove = n
	}
	if f.offloadAbove < 0 {
		return usagef("--payload-offload-above %d: want a size in bytes", f.offloadAbove)
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
	zc := &codec.ZstdConfig{}
	if f.blobs != "" {
		// Payloads up to the blob store's limit decompress.
		zc.MaxDecodedSize = limitsOffloadPayloadSize
	}
	z, err := codec.NewZstd(zc)
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

// limitsOffloadPayloadSize is Config.MaxPayloadSize's default with a blob
// store (5 GiB).
const limitsOffloadPayloadSize = 5 << 30

// payloadConfig is what the payload flags configure: the codec and the
// blob store, to set on a client's Config.
type payloadConfig struct {
	chain *codec.Chain
	blobs blobstore.Store
	above int
}

// open makes the codec and opens the blob store; close the result.
func (f *payloadFlags) open(ctx context.Context, env *Env) (*payloadConfig, error) {
	chain, err := f.chain(env)
	if err != nil {
		return nil, err
	}
	p := &payloadConfig{chain: chain, above: f.offloadAbove}
	if f.blobs != "" {
		b, err := gocloudblob.Open(ctx, f.blobs)
		if err != nil {
			return nil, usagef("--payload-blobs: %v", err)
		}
		p.blobs = b
	}
	return p, nil
}

// set sets the payload fields of cfg.
func (p *payloadConfig) set(cfg *hephaestus.Config) *hephaestus.Config {
	cfg.PayloadCodec, cfg.PayloadBlobs, cfg.PayloadOffloadAbove = p.chain, p.blobs, p.above
	return cfg
}

func (p *payloadConfig) close() {
	if p != nil && p.blobs != nil {
		_ = p.blobs.Close()
	}
}

func newPayloads(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "payloads",
		Short: "Re-encode the payloads stored in a database (after a payload key rotation), sweep the blob store",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newPayloadsReencode(g), newPayloadsSweep(g))
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
			pc, err := pf.open(cmd.Context(), g.env)
			if err != nil {
				return err
			}
			defer pc.close()
			chain := pc.chain
			if chain == nil {
				return usagef("give the payload keys (HEPH_PAYLOAD_KEYS, --payload-key-dir or --payload-key-files) or --payload-compress: there is nothing to re-encode with")
			}
			st, err := openStore(cmd, g.env, &db)
			if err != nil {
				return err
			}
			defer st.Close()
			client, err := hephaestus.New(pc.set(&hephaestus.Config{Store: st, Logger: quietLogger(g.env)}))
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

func quietLogger(env *Env) *slog.Logger {
	return slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func newPayloadsSweep(g *globals) *cobra.Command {
	var (
		db    dbFlags
		pf    payloadFlags
		grace time.Duration
	)
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Delete the blobs of large payloads that no stored payload refers to",
		Long: "sweep deletes from the payload blob store (--payload-blobs, $HEPH_PAYLOAD_BLOBS) the blobs\n" +
			"that no payload stored in the database refers to and that are older than --grace: those\n" +
			"of runs deleted by retention or heph runs delete, and those written by a commit that never\n" +
			"happened (a process killed between a blob's write and its commit). A server sweeps every\n" +
			"hour by itself; this sweeps now. It reads every payload of the database once. The grace\n" +
			"must exceed the longest commit: a commit refers to its blobs only once it is done.",
		Example: `  heph payloads sweep --sqlite heph.db --payload-blobs file:///var/lib/heph/blobs
  heph payloads sweep --postgres postgres://heph@db/heph --payload-blobs 's3://heph-payloads?region=eu-west-1' --grace 24h -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := pf.fromEnv(cmd, g.env); err != nil {
				return err
			}
			if pf.blobs == "" {
				return usagef("name the blob store: --payload-blobs URL (or $%s)", envPayloadBlobs)
			}
			if grace <= 0 {
				return usagef("--grace %s: want a positive duration", grace)
			}
			pc, err := pf.open(cmd.Context(), g.env)
			if err != nil {
				return err
			}
			defer pc.close()
			st, err := openStore(cmd, g.env, &db)
			if err != nil {
				return err
			}
			defer st.Close()
			cfg := pc.set(&hephaestus.Config{Store: st, Logger: quietLogger(g.env)})
			cfg.PayloadBlobGrace = grace
			client, err := hephaestus.New(cfg)
			if err != nil {
				return err
			}
			res, err := client.SweepPayloadBlobs(cmd.Context())
			if err != nil {
				return err
			}
			return g.emitValue(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%d blobs, %d older than %s, %d deleted (%d bytes)\n", res.Blobs, res.Old, grace, res.Deleted, res.Bytes)
				return err
			})
		},
	}
	db.register(cmd)
	pf.register(cmd.Flags())
	cmd.Flags().DurationVar(&grace, "grace", time.Hour, "keep unreferenced blobs younger than this")
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
