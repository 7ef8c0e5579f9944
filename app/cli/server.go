package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/demo"
	"github.com/hephaestus-go/hephaestus/dashboard"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// The server's defaults.
const (
	defaultListen       = "127.0.0.1:7070"
	defaultSQLite       = "heph.db"
	defaultMaxBody      = 4 << 20
	defaultReqTimeout   = 60 * time.Second
	defaultWorkers      = 16
	shutdownGrace       = 30 * time.Second
	seedTimeout         = 5 * time.Minute
	readHeaderTimeout   = 10 * time.Second
	serverIdleTimeout   = 2 * time.Minute
	envSchema           = "HEPH_SCHEMA"
	envTxPooling        = "HEPH_TRANSACTION_POOLING"
	envPostgresDirect   = "HEPH_POSTGRES_DIRECT"
	envMaxBody          = "HEPH_MAX_BODY"
	envRequestTimeout   = "HEPH_REQUEST_TIMEOUT"
	envWorkers          = "HEPH_WORKERS"
	envLogLevel         = "HEPH_LOG_LEVEL"
	envExamples         = "HEPH_EXAMPLES"
	envSecretKeys       = "HEPH_SECRET_KEYS"
	envSecretKeysFile   = "HEPH_SECRET_KEYS_FILE"
	listeningLinePrefix = "heph: listening on "
	// firstTokenLinePrefix starts the line that shows the admin token a
	// first start on loopback makes, named firstTokenName.
	firstTokenLinePrefix = "heph: no API token in the store, so this first start made the admin token "
	firstTokenName       = "admin"
)

// serverMinConns is how many PostgreSQL connections the server opens at
// start and keeps (postgres.Config.MinConns; pool_min_conns in the DSN
// wins): connections opened on demand made the first second of traffic
// wait for new backends and for their statements' preparation (bench/soak,
// docs/benchmarks.md).
const serverMinConns = 8

// serverFlags configure heph server.
type serverFlags struct {
	addr, sqlite, postgres, schema, logLevel string
	secretKeysFile                           string
	// hooksFile names the webhook endpoints' YAML (--hooks).
	hooksFile string
	// payload makes the payload codec.
	payload payloadFlags
	// postgresDirect and txPooling: PostgreSQL through PgBouncer in
	// transaction mode (postgres.Config.TransactionPooling, DirectDSN).
	postgresDirect                     string
	insecure, examples, dev, txPooling bool
	maxBody                            int64
	reqTimeout                         time.Duration
	workers                            int
}

func newServer(g *globals) *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the HTTP API on a store (SQLite ./heph.db by default)",
		Long: "server serves the HTTP API under /api/v1 on a SQLite file (./heph.db by default) or a\n" +
			"PostgreSQL database, running the runs' steps in this process and handing the actions it\n" +
			"has no code for to HTTP workers. It migrates the store first, and stops gracefully on\n" +
			"SIGINT or SIGTERM. The first line on standard error is \"heph: listening on URL\".\n\n" +
			"Requests need a bearer token unless --insecure, which is accepted only on a loopback\n" +
			"address. A first start on a loopback address with no token in the store makes the admin\n" +
			"token \"admin\" and prints it once; before serving another address, make the first one\n" +
			"with heph tokens create admin --role admin --sqlite FILE (or --postgres URL).\n\n" +
			"With --examples (the default) the server registers example definitions, named example.*,\n" +
			"and on a store's first start (no run at all) seeds example runs of each of them, in the\n" +
			"background once it listens; --examples=false registers and seeds nothing.\n" +
			"--dev is for a first local try: it serves a loopback address only, without tokens\n" +
			"(--insecure), with the examples (--examples), and prints the dashboard's URL.\n" +
			"Every flag has an environment variable: HEPH_ADDR, HEPH_SQLITE, HEPH_POSTGRES,\n" +
			"HEPH_SCHEMA, HEPH_INSECURE, HEPH_MAX_BODY, HEPH_REQUEST_TIMEOUT, HEPH_WORKERS, HEPH_LOG_LEVEL,\n" +
			"HEPH_EXAMPLES, HEPH_SECRET_KEYS_FILE, HEPH_PAYLOAD_KEY_DIR, HEPH_PAYLOAD_KEY_FILES,\n" +
			"HEPH_PAYLOAD_WRITE_KEY, HEPH_PAYLOAD_COMPRESS, HEPH_PAYLOAD_BLOBS, HEPH_PAYLOAD_OFFLOAD_ABOVE, HEPH_HOOKS.\n\n" +
			"--hooks FILE serves the webhook endpoints the YAML file lists (POST /hooks/<name>, each\n" +
			"verified with its scheme: github, stripe, hmac or bearer, and its secret from secret_env\n" +
			"or secret_file) and stores what they take in as events. See docs/events.md.\n\n" +
			"Payloads (inputs, outputs, history, signals, updates, heartbeat details) are encrypted\n" +
			"before the database with the payload keys of HEPH_PAYLOAD_KEYS (\"id:<base64 of 32 bytes>\"\n" +
			"entries separated by commas), --payload-key-dir (files ID.key) or --payload-key-files;\n" +
			"--payload-write-key names the key new payloads use (required with several keys);\n" +
			"--payload-compress compresses them (zstd, from 1 KiB) first. With --payload-blobs URL,\n" +
			"payloads above --payload-offload-above bytes (256 KiB) go to that blob store and the\n" +
			"database holds a reference; the server sweeps unreferenced blobs hourly. See docs/payloads.md.\n\n" +
			"Named secrets (heph secrets) are sealed with the key ring of HEPH_SECRET_KEYS\n" +
			"(\"id:<base64 of 32 bytes>\" entries separated by commas, the current key first) or of\n" +
			"the file --secret-keys-file (one entry a line); without either, secrets are unavailable.",
		Example: `  heph server --dev
  heph server --insecure
  heph server --postgres postgres://heph@db/heph --addr 0.0.0.0:7070
  heph server --addr 127.0.0.1:0 --sqlite /tmp/heph.db --examples=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.fromEnv(cmd, g.env); err != nil {
				return err
			}
			if err := f.check(cmd); err != nil {
				return err
			}
			return runServer(cmd.Context(), g.env, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", defaultListen, "host:port to listen on (port 0: any free port); $"+EnvAddr)
	fl.StringVar(&f.sqlite, "sqlite", defaultSQLite, "SQLite database file, created when missing (when no --postgres); $"+EnvSQLite)
	fl.StringVar(&f.postgres, "postgres", "", "PostgreSQL DSN instead of SQLite; $"+EnvPostgres)
	fl.StringVar(&f.schema, "schema", "heph", "PostgreSQL schema of the store; $"+envSchema)
	fl.BoolVar(&f.txPooling, "transaction-pooling", false, "--postgres goes through a pooler in transaction mode (PgBouncer): no session state on its connections; $"+envTxPooling)
	fl.StringVar(&f.postgresDirect, "postgres-direct", "", "with --transaction-pooling: a DSN of the server itself, for migrations and LISTEN (without it: no migrations, poll only); $"+envPostgresDirect)
	fl.BoolVar(&f.insecure, "insecure", false, "serve without tokens (only on a loopback address); $"+EnvInsecure)
	fl.BoolVar(&f.dev, "dev", false, "a local try: loopback only, no token needed (--insecure), example runs (--examples); prints the dashboard URL")
	fl.BoolVar(&f.examples, "examples", true, "register the example.* definitions, and seed example runs on a store with no run; $"+envExamples)
	fl.Int64Var(&f.maxBody, "max-body", defaultMaxBody, "largest request body in bytes; $"+envMaxBody)
	fl.DurationVar(&f.reqTimeout, "request-timeout", defaultReqTimeout, "time limit of a request (long polls wait at most this); $"+envRequestTimeout)
	fl.IntVar(&f.workers, "workers", defaultWorkers, "steps this process runs at once on the default queue; $"+envWorkers)
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error; $"+envLogLevel)
	fl.StringVar(&f.secretKeysFile, "secret-keys-file", "", "file of the secrets' key ring, one id:<base64 key> a line, the current first; $"+envSecretKeysFile+" (or the ring itself in $"+envSecretKeys+")")
	fl.StringVar(&f.hooksFile, "hooks", "", "YAML file of the webhook endpoints, POST /hooks/<name> (docs/events.md); $"+envHooks)
	f.payload.register(fl)
	return cmd
}

// fromEnv sets each flag not given from its environment variable.
func (f *serverFlags) fromEnv(cmd *cobra.Command, env *Env) error {
	fl := cmd.Flags()
	str := func(flag, key string, dst *string) {
		if v := env.getenv(key); v != "" && !fl.Changed(flag) {
			*dst = v
		}
	}
	str("addr", EnvAddr, &f.addr)
	str("sqlite", EnvSQLite, &f.sqlite)
	str("postgres", EnvPostgres, &f.postgres)
	str("schema", envSchema, &f.schema)
	str("postgres-direct", envPostgresDirect, &f.postgresDirect)
	str("log-level", envLogLevel, &f.logLevel)
	str("secret-keys-file", envSecretKeysFile, &f.secretKeysFile)
	str("hooks", envHooks, &f.hooksFile)
	if err := f.payload.fromEnv(cmd, env); err != nil {
		return err
	}
	for _, b := range []struct {
		flag, key string
		dst       *bool
	}{{"insecure", EnvInsecure, &f.insecure}, {"examples", envExamples, &f.examples}, {"transaction-pooling", envTxPooling, &f.txPooling}} {
		if v := env.getenv(b.key); v != "" && !fl.Changed(b.flag) {
			on, err := strconv.ParseBool(v)
			if err != nil {
				return usagef("$%s=%q: want true or false", b.key, v)
			}
			*b.dst = on
		}
	}
	if v := env.getenv(envMaxBody); v != "" && !fl.Changed("max-body") {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return usagef("$%s=%q: want a number of bytes", envMaxBody, v)
		}
		f.maxBody = n
	}
	if v := env.getenv(envRequestTimeout); v != "" && !fl.Changed("request-timeout") {
		d, err := time.ParseDuration(v)
		if err != nil {
			return usagef("$%s=%q: want a duration", envRequestTimeout, v)
		}
		f.reqTimeout = d
	}
	if v := env.getenv(envWorkers); v != "" && !fl.Changed("workers") {
		n, err := strconv.Atoi(v)
		if err != nil {
			return usagef("$%s=%q: want a number", envWorkers, v)
		}
		f.workers = n
	}
	// HEPH_ADDR is the clients' URL too: take its host.
	if strings.Contains(f.addr, "://") {
		u, err := url.Parse(f.addr)
		if err != nil || u.Host == "" {
			return usagef("--addr %q: want host:port", f.addr)
		}
		f.addr = u.Host
	}
	return nil
}

func (f *serverFlags) check(cmd *cobra.Command) error {
	host, port, err := net.SplitHostPort(f.addr)
	if err != nil {
		return usagef("--addr %q: want host:port: %v", f.addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return usagef("--addr %q: bad port", f.addr)
	}
	if f.dev {
		if !loopback(host) {
			return usagef("--dev serves without tokens: only on a loopback address (127.0.0.1, ::1, localhost), not %q; to serve %q, drop --dev and make a token with heph tokens create admin --role admin %s", host, f.addr, storeFlag(f))
		}
		f.insecure = true
		if !cmd.Flags().Changed("examples") {
			f.examples = true
		}
	}
	switch {
	case f.insecure && !loopback(host):
		return usagef("--insecure serves without tokens: only on a loopback address (127.0.0.1, ::1, localhost), not %q", host)
	case f.maxBody <= 0:
		return usagef("--max-body must be positive, got %d", f.maxBody)
	case f.reqTimeout <= 0:
		return usagef("--request-timeout must be positive, got %v", f.reqTimeout)
	case f.workers <= 0:
		return usagef("--workers must be positive, got %d", f.workers)
	case f.postgres != "" && cmd.Flags().Changed("sqlite"):
		return usagef("give --postgres or --sqlite, not both")
	case (f.txPooling || f.postgresDirect != "") && f.postgres == "":
		return usagef("--transaction-pooling and --postgres-direct go with --postgres")
	case f.postgresDirect != "" && !f.txPooling:
		return usagef("--postgres-direct is for --transaction-pooling (a --postgres that reaches the server directly needs none)")
	}
	if _, err := logLevel(f.logLevel); err != nil {
		return err
	}
	return nil
}

func logLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, usagef("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// loopback reports whether a listen host is a loopback address.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serverRegistry is the action registry of the server's documents: every
// action is remote (run by HTTP workers) but the example document's,
// which --examples registers in it as Go functions.
func serverRegistry() *flowdoc.Registry { return remoteRegistry() }

// runServer opens the store, starts a client and serves the API until ctx
// ends.
func runServer(ctx context.Context, env *Env, f *serverFlags) (err error) {
	level, _ := logLevel(f.logLevel)
	logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	var st adminStore
	if f.postgres != "" {
		st, err = postgres.Open(ctx, &postgres.Config{DSN: f.postgres, Schema: f.schema, TransactionPooling: f.txPooling,
			DirectDSN: f.postgresDirect, SkipMigrations: f.txPooling && f.postgresDirect == "", MinConns: serverMinConns})
	} else {
		st, err = sqlite.Open(ctx, &sqlite.Config{Path: f.sqlite})
	}
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer func() {
		if cerr := st.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close store: %w", cerr)
		}
	}()
	hooks, err := loadHooks(f.hooksFile, env)
	if err != nil {
		return err
	}
	noTokens, err := firstStart(ctx, f, st)
	if err != nil {
		return err
	}
	sm, tp, flush, err := startServerTelemetry(ctx, env, logger)
	if err != nil {
		return err
	}
	defer flush()
	keys, err := serverSecretKeys(env, f)
	if err != nil {
		return err
	}
	payloads, err := f.payload.open(ctx, env)
	if err != nil {
		return err
	}
	defer payloads.close()
	client, seed, err := newServerClient(ctx, f, st, logger, sm, tp, keys, payloads)
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start client: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		if serr := client.Stop(sctx); err == nil && serr != nil {
			err = fmt.Errorf("stop client: %w", serr)
		}
	}()
	oidc, err := oidcFromEnv(ctx, env)
	if err != nil {
		return err
	}
	h, err := server.New(&server.Config{Client: client, Store: client.Store(), Insecure: f.insecure, MaxBodyBytes: f.maxBody, RequestTimeout: f.reqTimeout, Logger: logger,
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}), OIDC: oidc,
		Hooks: hooks, MeterProvider: sm.meterProvider()})
	if err != nil {
		return err
	}
	if err := h.Start(ctx); err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	defer h.Stop()
	// The dashboard at / serves the API too (under /api/, /healthz and
	// /readyz): one handler for both; GET /metrics goes to Prometheus.
	dcfg := &dashboard.Config{API: h, Logger: logger}
	if oidc != nil {
		dcfg.OIDC, dcfg.Sessions = oidc, h
	}
	dash, err := dashboard.New(dcfg)
	if err != nil {
		return err
	}
	s := &serving{env: env, f: f, logger: logger, client: client, acc: st, noTokens: noTokens, seed: seed, onShutdown: h.EndStreams}
	return s.serve(ctx, sm.handler(dash))
}

// firstStart reports whether the server starts with no active API token
// (on a loopback address, where it makes the first), and refuses to
// serve another address without one; unless f.insecure.
func firstStart(ctx context.Context, f *serverFlags, acc store.Admin) (bool, error) {
	if f.insecure {
		return false, nil
	}
	host, _, _ := net.SplitHostPort(f.addr)
	active, err := activeTokens(ctx, acc)
	if err != nil {
		return false, err
	}
	if active == 0 && !loopback(host) {
		return false, fmt.Errorf("no API token in the store: make the first with `heph tokens create admin --role admin %s`, or serve a loopback address with --insecure", storeFlag(f))
	}
	return active == 0, nil
}

// startServerTelemetry sets up the server's metrics and traces as the
// environment configures them; flush flushes both (the spans first).
func startServerTelemetry(ctx context.Context, env *Env, logger *slog.Logger) (sm *serverMetrics, tp *sdktrace.TracerProvider, flush func(), err error) {
	sm, err = newServerMetrics(ctx, env.getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	flushMetrics := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		if serr := sm.shutdown(sctx); serr != nil {
			logger.Warn("flush the metrics", slog.Any("err", serr))
		}
	}
	tp, err = newServerTraces(ctx, env.getenv)
	if err != nil {
		flushMetrics()
		return nil, nil, nil, err
	}
	flush = func() {
		if tp != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
			defer cancel()
			if serr := tp.Shutdown(sctx); serr != nil {
				logger.Warn("flush the spans", slog.Any("err", serr))
			}
		}
		flushMetrics()
	}
	return sm, tp, flush, nil
}

// newServerClient makes the server's client, not started, with the
// documents' registry (and the examples, with f.examples: seed says
// whether the store had no run, so that the examples seed some).
func newServerClient(ctx context.Context, f *serverFlags, st store.Store, logger *slog.Logger, sm *serverMetrics, tp *sdktrace.TracerProvider, keys *hephaestus.SecretKeys, payloads *payloadConfig) (client *hephaestus.Client, seed bool, err error) {
	client, err = hephaestus.New(payloads.set(&hephaestus.Config{Store: st, Queues: map[string]int{"default": f.workers}, Logger: logger,
		MeterProvider: sm.meterProvider(), TracerProvider: tracerProvider(tp), SecretKeys: keys}))
	if err != nil {
		return nil, false, fmt.Errorf("client: %w", err)
	}
	reg := serverRegistry()
	if f.examples {
		if err := demo.Register(ctx, client, reg); err != nil {
			return nil, false, err
		}
		// Before the client starts, so that no schedule tick has
		// started a run yet.
		if seed, err = demo.Empty(ctx, client); err != nil {
			return nil, false, err
		}
	}
	if err := client.RegisterDocuments(ctx, reg); err != nil {
		return nil, false, fmt.Errorf("register documents: %w", err)
	}
	return client, seed, nil
}

// serving is what serve needs of runServer.
type serving struct {
	env      *Env
	f        *serverFlags
	logger   *slog.Logger
	client   *hephaestus.Client
	acc      store.Admin
	noTokens bool // make the first admin token
	seed     bool // seed the example runs
	// onShutdown ends the API's event streams, which would otherwise hold
	// the shutdown as long as their callers stay.
	onShutdown func()
}

// serve listens on f.addr and serves handler until ctx ends, then
// finishes the requests in flight.
func (s *serving) serve(ctx context.Context, handler http.Handler) error {
	env, f, logger := s.env, s.f, s.logger
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       serverIdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if s.onShutdown != nil {
		srv.RegisterOnShutdown(s.onShutdown)
	}
	fmt.Fprintf(env.Stderr, "%shttp://%s\n", listeningLinePrefix, ln.Addr())
	if f.dev {
		fmt.Fprintf(env.Stderr, "heph: dev mode: the dashboard is at http://%s/ (no token needed; loopback only)\n", ln.Addr())
	}
	if s.noTokens {
		// The first start on loopback: make the first admin token, so a
		// fresh checkout serves with no other set-up, and show it once.
		_, _, secret, err := server.NewToken(ctx, s.acc, &server.TokenParams{Principal: firstTokenName, Role: server.RoleAdmin}, time.Now())
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("make the first admin token: %w", err)
		}
		fmt.Fprintf(env.Stderr, "%s%q (shown once; revoke it with heph tokens revoke):\n  export %s=%s\n",
			firstTokenLinePrefix, firstTokenName, EnvToken, secret)
		fmt.Fprintf(env.Stderr, "heph: the dashboard is at http://%s/ (sign in with that token)\n", ln.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	switch {
	case s.seed:
		stopSeed := seedExamples(ctx, s.client, logger)
		defer stopSeed()
	case f.examples:
		logger.Info("registered the example definitions; the store has runs, so no example run is seeded")
	}
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing the requests in flight")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return errors.Join(fmt.Errorf("shut down: %w", err), serveErr(<-served))
	}
	return serveErr(<-served)
}

// seedExamples seeds the example runs in the background, logging the
// outcome; the function it returns stops the seeding and waits for it.
func seedExamples(ctx context.Context, client *hephaestus.Client, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithTimeout(ctx, seedTimeout)
	done := make(chan struct{})
	logger.Info("seeding the example runs in the background: the store has no run")
	go func() {
		defer close(done)
		ids, err := demo.Seed(ctx, client)
		switch {
		case err != nil && errors.Is(err, context.Canceled):
			logger.Warn("stopped seeding the example runs: the server is stopping", "runs", len(ids))
			return
		case err != nil:
			logger.Error("seed the example runs", "runs", len(ids), "err", err)
			return
		}
		logger.Info("seeded the example runs: this first start found the store empty", "runs", len(ids), "tag", demo.Tag)
	}()
	return func() {
		cancel()
		<-done
	}
}

// serveErr is what Serve returned once the server was shut down: nothing
// but ErrServerClosed is expected.
func serveErr(err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve: %w", err)
}

// activeTokens counts the tokens that are not revoked.
func activeTokens(ctx context.Context, acc store.Admin) (int, error) {
	ts, err := acc.ListTokens(ctx)
	if err != nil {
		return 0, fmt.Errorf("list tokens: %w", err)
	}
	n := 0
	for _, t := range ts {
		if t.Active() {
			n++
		}
	}
	return n, nil
}

// storeFlag names the server's store as tokens create takes it.
func storeFlag(f *serverFlags) string {
	if f.postgres != "" {
		return "--postgres DSN --schema " + f.schema
	}
	return "--sqlite " + f.sqlite
}

// serverSecretKeys reads the key ring of the server's secrets: from
// --secret-keys-file, or else from $HEPH_SECRET_KEYS; nil when neither
// is given.
func serverSecretKeys(env *Env, f *serverFlags) (*hephaestus.SecretKeys, error) {
	text := env.getenv(envSecretKeys)
	switch {
	case f.secretKeysFile != "" && text != "":
		return nil, usagef("give the secrets' key ring in $%s or in --secret-keys-file, not both", envSecretKeys)
	case f.secretKeysFile != "":
		k, err := hephaestus.ReadSecretKeys(f.secretKeysFile)
		if err != nil {
			return nil, usagef("--secret-keys-file: %v", err)
		}
		return k, nil
	case text != "":
		k, err := hephaestus.ParseSecretKeys(text)
		if err != nil {
			return nil, usagef("$%s: %v", envSecretKeys, err)
		}
		return k, nil
	}
	return nil, nil
}
