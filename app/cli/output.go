package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// The defaults of the global flags.
const (
	defaultAddr    = "http://127.0.0.1:7070"
	defaultTimeout = time.Minute
)

// globals are the flags every command has: where the server is, how to
// print.
type globals struct {
	env     *Env
	addr    string
	token   string
	output  string
	timeout time.Duration
}

func (g *globals) register(root *cobra.Command) {
	fl := root.PersistentFlags()
	addr := g.env.getenv(EnvAddr)
	if addr == "" {
		addr = defaultAddr
	}
	out := g.env.getenv(EnvOutput)
	if out == "" {
		out = "table"
	}
	fl.StringVar(&g.addr, "addr", addr, "the server's URL; $"+EnvAddr+" sets the default")
	// The token's default is read when a command runs, so that help
	// never prints it.
	fl.StringVar(&g.token, "token", "", "bearer token for the server (default $"+EnvToken+")")
	fl.StringVarP(&g.output, "output", "o", out, "output format: table or json (the API's JSON, indented); $"+EnvOutput+" sets the default")
	fl.DurationVar(&g.timeout, "timeout", defaultTimeout, "time limit of each request to the server, beyond any wait it asks for")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if g.output != "table" && g.output != "json" {
			return usagef("-o must be table or json, got %q", g.output)
		}
		if !cmd.Flags().Changed("token") {
			g.token = g.env.getenv(EnvToken)
		}
		if g.timeout <= 0 {
			return usagef("--timeout must be positive, got %v", g.timeout)
		}
		return nil
	}
}

// api returns a client of the server at --addr.
func (g *globals) api() (*apiclient.Client, error) {
	c, err := apiclient.New(&apiclient.Config{Addr: g.addr, Token: g.token, UserAgent: "heph-cli"})
	if err != nil {
		return nil, usagef("--addr: %v", err)
	}
	return c, nil
}

// reqCtx bounds one request: --timeout beyond the wait it asks the server
// for.
func (g *globals) reqCtx(parent context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, g.timeout+wait)
}

func (g *globals) json() bool { return g.output == "json" }

// emit prints an answer: its JSON indented with -o json, else what table
// writes.
func (g *globals) emit(resp *apiclient.Response, table func(w io.Writer) error) error {
	if g.json() {
		return writeJSON(g.env.Stdout, resp.Body)
	}
	return table(g.env.Stdout)
}

// emitValue prints v as indented JSON with -o json, else what table
// writes: for what the command computed itself.
func (g *globals) emitValue(v any, table func(w io.Writer) error) error {
	if g.json() {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return writeJSON(g.env.Stdout, b)
	}
	return table(g.env.Stdout)
}

// writeJSON writes a JSON text indented by two spaces, with a newline.
func writeJSON(w io.Writer, b []byte) error {
	var buf bytes.Buffer
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return fmt.Errorf("indent JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// newTable returns a tabwriter for a table with the given header.
func newTable(w io.Writer, header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(header) > 0 {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	return tw
}

// row writes one table row.
func row(tw io.Writer, cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = cell(c)
	}
	fmt.Fprintln(tw, strings.Join(parts, "\t"))
}

// cell formats a table cell: times in UTC to the second, empty values as
// "-", tabs and newlines folded.
func cell(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		s = x
	case time.Time:
		if x.IsZero() {
			return "-"
		}
		s = x.UTC().Format(time.RFC3339)
	case *time.Time:
		if x == nil {
			return "-"
		}
		return cell(*x)
	case []string:
		s = strings.Join(x, ",")
	case json.RawMessage:
		s = compactJSON(x)
	default:
		s = fmt.Sprint(x)
	}
	if s == "" {
		return "-"
	}
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}

// compactJSON returns b on one line, or "" for none / null.
func compactJSON(b json.RawMessage) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// truncate shortens s to n runes with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// kv prints "key: value" lines aligned.
func kv(w io.Writer, pairs ...any) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], cell(pairs[i+1]))
	}
	return tw.Flush()
}

// readPayload reads a JSON value given as text, @file, or - (stdin). ""
// is none. The value must be valid JSON.
func readPayload(env *Env, flag, v string) (json.RawMessage, error) {
	var b []byte
	switch {
	case v == "":
		return nil, nil
	case v == "-":
		if env.Stdin == nil {
			return nil, usagef("%s -: no standard input", flag)
		}
		var err error
		if b, err = io.ReadAll(env.Stdin); err != nil {
			return nil, fmt.Errorf("read %s from standard input: %w", flag, err)
		}
	case strings.HasPrefix(v, "@"):
		var err error
		if b, err = os.ReadFile(v[1:]); err != nil {
			return nil, fmt.Errorf("read %s: %w", flag, err)
		}
	default:
		b = []byte(v)
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return nil, usagef("%s is not valid JSON: %s", flag, truncate(string(b), 60))
	}
	return b, nil
}

// parseKV reads k=v pairs of a repeated flag.
func parseKV(flag string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want key=value", flag, p)
		}
		m[k] = v
	}
	return m, nil
}

// parseAttrs reads --attr name=value pairs: a value that is JSON is
// taken as such (a number, a boolean, a list of strings), anything else
// as text; the server types them by the flow's declarations.
func parseAttrs(pairs []string) (map[string]any, error) {
	kv, err := parseKV("--attr", pairs)
	if err != nil || kv == nil {
		return nil, err
	}
	out := make(map[string]any, len(kv))
	for k, v := range kv {
		var x any
		if json.Unmarshal([]byte(v), &x) == nil {
			out[k] = x
		} else {
			out[k] = v
		}
	}
	return out, nil
}

// parseTime reads a point in time: RFC 3339, a date (2006-01-02, UTC), or
// a duration before now ("90m" is 90 minutes ago).
func parseTime(flag, v string, now time.Time) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return &t, nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return &t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		t := now.Add(-d)
		return &t, nil
	}
	return nil, usagef("%s %q: want an RFC 3339 time, a date (2006-01-02) or a duration ago (90m)", flag, v)
}
