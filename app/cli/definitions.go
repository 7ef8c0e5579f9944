package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	apiclient "github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/internal/graphtext"
)

// docFormat is a document file's format by its extension: json, or yaml.
func docFormat(path string) string {
	if strings.EqualFold(filepath.Ext(path), ".json") {
		return "json"
	}
	return "yaml"
}

// docName is the name a file's document gets by default: its base name
// without the extension.
func docName(path string) string {
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// loadOffline parses and compiles a flow document without a server: every
// action it names is taken as a remote one (run by a worker), so what is
// checked is the document itself (structure, graph, templates,
// conditions), as a server without Go actions checks it.
func loadOffline(path string, data []byte) (*flow.Flow, error) {
	return flowdoc.Load(path, data, remoteRegistry())
}

// remoteRegistry is a registry whose every action is remote: the
// server's, and the offline commands'.
func remoteRegistry() *flowdoc.Registry {
	reg := flowdoc.NewRegistry()
	reg.SetFallback(flowdoc.RemoteAction)
	return reg
}

// validation is the result of validating one file, as -o json prints it.
type validation struct {
	File   string                    `json:"file"`
	Valid  bool                      `json:"valid"`
	Flow   string                    `json:"flow,omitempty"`
	Steps  int                       `json:"steps,omitempty"`
	Errors []apiclient.DocumentError `json:"errors,omitempty"`
}

func newValidate(g *globals) *cobra.Command {
	var remote bool
	cmd := &cobra.Command{
		Use:   "validate <file>...",
		Short: "Check flow documents (offline; --remote: on the server)",
		Long: "validate parses and compiles flow documents (YAML, or JSON for .json files) and prints\n" +
			"every problem as file:line:col: path: message. Offline, every action a document names is\n" +
			"accepted; with --remote the server checks it against the actions it knows. Exit 1 when\n" +
			"a document is invalid.",
		Example: `  heph validate flows/*.yaml
  heph validate order.json -o json
  heph validate order.yaml --remote`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var results []validation
			for _, path := range args {
				data, err := os.ReadFile(path)
				if err != nil {
					return fmt.Errorf("read document: %w", err)
				}
				v := validation{File: path}
				if remote {
					if err := validateRemote(cmd.Context(), g, path, data, &v); err != nil {
						return err
					}
				} else {
					f, err := loadOffline(path, data)
					if err != nil {
						v.Errors = docErrors(err)
					} else {
						v.Valid, v.Flow, v.Steps = true, f.Name(), len(f.Steps())
					}
				}
				results = append(results, v)
			}
			err := g.emitValue(results, func(w io.Writer) error {
				for _, v := range results {
					if v.Valid {
						if v.Flow != "" {
							fmt.Fprintf(w, "%s: valid (flow %s, %d steps)\n", v.File, v.Flow, v.Steps)
						} else {
							fmt.Fprintf(w, "%s: valid\n", v.File)
						}
						continue
					}
					for _, e := range v.Errors {
						msg := e.Message
						if e.Fix != "" {
							msg += "; fix: " + e.Fix
						}
						if e.Path != "" {
							msg = e.Path + ": " + msg
						}
						fmt.Fprintf(w, "%s:%d:%d: %s\n", v.File, e.Line, e.Column, msg)
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			invalid := 0
			for _, v := range results {
				if !v.Valid {
					invalid++
				}
			}
			if invalid > 0 {
				return &exitError{code: ExitFailure, msg: fmt.Sprintf("%d of %d documents invalid", invalid, len(results))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&remote, "remote", false, "validate on the server (POST /documents/validate)")
	return cmd
}

// docErrors lists a document's problems; an error that is no document
// problem becomes one at 1:1.
func docErrors(err error) []apiclient.DocumentError {
	var out []apiclient.DocumentError
	for _, e := range flowdoc.Errors(err) {
		out = append(out, apiclient.DocumentError{Line: e.Line, Column: e.Column, Path: e.Path, Message: e.Message, Fix: e.Fix})
	}
	if len(out) == 0 {
		out = append(out, apiclient.DocumentError{Line: 1, Column: 1, Message: err.Error()})
	}
	return out
}

func validateRemote(ctx context.Context, g *globals, path string, data []byte, v *validation) error {
	api, err := g.api()
	if err != nil {
		return err
	}
	rctx, cancel := g.reqCtx(ctx, 0)
	defer cancel()
	_, err = api.ValidateDocument(rctx, docFormat(path), string(data))
	var apiErr *apiclient.Error
	switch {
	case err == nil:
		v.Valid = true
	case errors.As(err, &apiErr) && apiErr.Status == 422:
		v.Errors = apiErr.Errors
		if len(v.Errors) == 0 {
			v.Errors = []apiclient.DocumentError{{Line: 1, Column: 1, Message: apiErr.Error()}}
		}
	default:
		return err
	}
	return nil
}

var graphFormats = []string{"text", "mermaid", "dot", "json"}

func newGraph(g *globals) *cobra.Command {
	var (
		format  string
		remote  bool
		version int
	)
	cmd := &cobra.Command{
		Use:   "graph <file | name>",
		Short: "Draw a flow document's graph (offline; --remote: a definition of the server)",
		Long: "graph draws the DAG of a flow document file as text (each step indented by its depth,\n" +
			"with its edges), Mermaid, Graphviz DOT or JSON (nodes and edges). With --remote it draws the\n" +
			"graph of a flow or document the server knows, by name. An invalid document prints its\n" +
			"problems and exits 1.",
		Example: `  heph graph order.yaml
  heph graph order.yaml --format mermaid > order.mmd
  heph graph order --remote --format dot | dot -Tsvg > order.svg`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(graphFormats, format) {
				return usagef("--format must be one of %s, got %q", strings.Join(graphFormats, ", "), format)
			}
			if g.json() && !cmd.Flags().Changed("format") {
				format = "json"
			}
			if remote {
				return graphRemote(cmd.Context(), g, args[0], version, format)
			}
			if version != 0 {
				return usagef("--version is for --remote")
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read document: %w", err)
			}
			f, err := loadOffline(args[0], data)
			if err != nil {
				for _, e := range docErrors(err) {
					fmt.Fprintf(g.env.Stderr, "%s:%d:%d: %s: %s\n", args[0], e.Line, e.Column, e.Path, e.Message)
				}
				return &exitError{code: ExitFailure, msg: "invalid document", silent: true}
			}
			graph := graphtext.Of(f)
			w := g.env.Stdout
			switch format {
			case "mermaid":
				_, err = io.WriteString(w, graphtext.Mermaid(graph))
			case "dot":
				_, err = io.WriteString(w, graphtext.DOT(graph))
			case "json":
				var b []byte
				if b, err = json.Marshal(graph); err == nil {
					err = writeJSON(w, b)
				}
			default:
				_, err = io.WriteString(w, graphtext.Text(graph))
			}
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text, mermaid, dot or json")
	cmd.Flags().BoolVar(&remote, "remote", false, "draw the server's definition of that name")
	cmd.Flags().IntVar(&version, "version", 0, "with --remote: the definition's version (default the latest)")
	return cmd
}

func graphRemote(ctx context.Context, g *globals, name string, version int, format string) error {
	api, err := g.api()
	if err != nil {
		return err
	}
	rctx, cancel := g.reqCtx(ctx, 0)
	defer cancel()
	switch format {
	case "json", "text":
		_, resp, err := api.GraphJSON(rctx, name, version)
		if err != nil {
			return err
		}
		if format == "json" {
			return writeJSON(g.env.Stdout, resp.Body)
		}
		var graph graphtext.Graph
		if err := json.Unmarshal(resp.Body, &graph); err != nil {
			return fmt.Errorf("decode graph: %w", err)
		}
		_, err = io.WriteString(g.env.Stdout, graphtext.Text(&graph))
		return err
	}
	text, _, err := api.GraphText(rctx, name, version, format)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	_, err = io.WriteString(g.env.Stdout, text)
	return err
}

func newDocuments(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "documents",
		Aliases: []string{"docs"},
		Short:   "Submit, list and show the flow documents stored on the server",
	}
	var name string
	put := &cobra.Command{
		Use:     "put <file>",
		Short:   "Store a flow document (a new version when its content changed)",
		Example: `  heph documents put flows/digest.yaml --name digest`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read document: %w", err)
			}
			n := name
			if n == "" {
				n = docName(args[0])
				// The document's own name, when it parses.
				if f, err := loadOffline(args[0], data); err == nil && f.Name() != "" {
					n = f.Name()
				}
			}
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Document, *apiclient.Response, error) {
				return api.PutDocument(ctx, &apiclient.DocumentRequest{Name: n, Format: docFormat(args[0]), Content: string(data)})
			}, func(w io.Writer, d *apiclient.Document) error {
				_, err := fmt.Fprintf(w, "document %s version %d (%s)\n", d.Name, d.Version, truncate(d.Hash, 13))
				return err
			})
		},
	}
	put.Flags().StringVar(&name, "name", "", "the document's name (default its name field, else the file's name without its extension)")

	var lsName string
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the stored documents",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := g.api()
			if err != nil {
				return err
			}
			docs, resp, many, err := allPages(cmd.Context(), g, func(ctx context.Context, cursor string) ([]apiclient.Document, string, *apiclient.Response, error) {
				return api.ListDocuments(ctx, lsName, cursor)
			})
			if err != nil {
				return err
			}
			if g.json() && many {
				return g.emitValue(map[string]any{"documents": docs, "next": ""}, nil)
			}
			return g.emit(resp, func(w io.Writer) error {
				tw := newTable(w, "NAME", "VERSION", "FORMAT", "HASH", "CREATED")
				for _, d := range docs {
					row(tw, d.Name, d.Version, d.Format, truncate(d.Hash, 13), d.CreatedAt)
				}
				return tw.Flush()
			})
		},
	}
	ls.Flags().StringVar(&lsName, "name", "", "only the versions of this document")

	var version int
	show := &cobra.Command{
		Use:   "show <name>",
		Short: "Print a stored document's content",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.Document, *apiclient.Response, error) {
				return api.GetDocument(ctx, args[0], version)
			}, func(w io.Writer, d *apiclient.Document) error {
				c := d.Content
				if !strings.HasSuffix(c, "\n") {
					c += "\n"
				}
				_, err := io.WriteString(w, c)
				return err
			})
		},
	}
	show.Flags().IntVar(&version, "version", 0, "the version (default the latest)")
	cmd.AddCommand(put, ls, show)
	return cmd
}

func newDefinitions(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "definitions",
		Aliases: []string{"defs"},
		Short:   "List what the server can start: flows, workflows, job kinds, documents",
		Long: "definitions lists what the server can start: what its own process registered, what any\n" +
			"worker process published to the catalog, and the stored documents. LATEST is the highest\n" +
			"version (\"-\" for a workflow, which has builds); SERVED says whether a live worker has its code.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) ([]apiclient.Definition, *apiclient.Response, error) {
				return api.Definitions(ctx)
			}, func(w io.Writer, defs []apiclient.Definition) error {
				tw := newTable(w, "KIND", "NAME", "LATEST", "VERSIONS", "BUILDS", "SERVED")
				for _, d := range defs {
					row(tw, d.Kind, d.Name, latestCell(&d), versionsCell(d.Versions), len(d.Builds), servedCell(&d))
				}
				return tw.Flush()
			})
		},
	}
	cmd.AddCommand(newDefinitionShow(g))
	return cmd
}

func latestCell(d *apiclient.Definition) string {
	if d.Kind == "workflow" {
		return "-"
	}
	return strconv.Itoa(d.Latest)
}

func versionsCell(vs []int) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.Itoa(v)
	}
	return strings.Join(out, ",")
}

func servedCell(d *apiclient.Definition) string {
	switch {
	case d.Kind == "document":
		return "-"
	case d.Served:
		return "yes"
	}
	return "no"
}

func newDefinitionShow(g *globals) *cobra.Command {
	var kind string
	cmd := &cobra.Command{
		Use:   "show <name>",
		Short: "Show a definition: versions or builds, schemas, queues, schedules, live workers",
		Example: `  heph definitions show orders
  heph definitions show orders --kind job -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return call(cmd.Context(), g, 0, func(ctx context.Context, api *apiclient.Client) (*apiclient.DefinitionDetail, *apiclient.Response, error) {
				return api.Definition(ctx, kind, args[0])
			}, printDefinition)
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "the kind (flow, workflow, job or document) when several definitions have the name")
	return cmd
}

func printDefinition(w io.Writer, d *apiclient.DefinitionDetail) error {
	tw := newTable(w)
	row(tw, "Kind:", d.Kind)
	row(tw, "Name:", d.Name)
	row(tw, "Latest:", latestCell(&d.Definition))
	row(tw, "Versions:", versionsCell(d.Versions))
	row(tw, "Local:", d.Local)
	row(tw, "Served:", servedCell(&d.Definition))
	row(tw, "Workers:", strings.Join(d.Workers, ", "))
	row(tw, "Schedules:", strings.Join(d.Schedules, ", "))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Published) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = newTable(w, "VERSION", "BUILD", "HASH", "QUEUES", "PUBLISHED", "BY")
	for _, p := range d.Published {
		hash := p.Hash
		if len(hash) > 12 {
			hash = hash[:12]
		}
		row(tw, p.Version, p.BuildID, hash, strings.Join(p.Queues, ","), p.PublishedAt, p.PublishedBy)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The highest version of a flow or job kind, the newest build of a
	// workflow (builds are listed newest first).
	shown, what := d.Published[len(d.Published)-1], ""
	if d.Kind == "workflow" {
		shown = d.Published[0]
		what = "build " + shown.BuildID
	} else {
		what = "version " + strconv.Itoa(shown.Version)
	}
	if len(shown.InputSchema) > 0 {
		fmt.Fprintf(w, "\nInput schema (%s):\n%s\n", what, shown.InputSchema)
	}
	return nil
}
