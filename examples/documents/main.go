// Command documents runs a flow document on an SQLite file and prints the
// run and its history.
//
//	go run ./examples/documents [-db documents.db] [-doc research.yaml] [-input '{"topic": "AI safety", "created_by": "james"}']
//
// Without -doc it runs the seed's research document (research.yaml,
// embedded), whose actions knowledge_search, knowledge_get and notify are
// Go functions registered below, standing in for real tools.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

//go:embed research.yaml
var research []byte

// Hit is one search result.
type Hit struct {
	ID    string `json:"id"`
	Score int    `json:"score"`
}

func actions() (*flowdoc.Registry, error) {
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "knowledge_search", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}) (map[string][]Hit, error) {
		var hits []Hit
		for i, w := range strings.Fields(in.Query) {
			if i == in.Limit {
				break
			}
			hits = append(hits, Hit{ID: "doc-" + strings.ToLower(w), Score: 10 - i})
		}
		return map[string][]Hit{"hits": hits}, nil
	}); err != nil {
		return nil, err
	}
	if err := flowdoc.RegisterAction(reg, "knowledge_get", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		ID string `json:"id"`
	}) (map[string]string, error) {
		return map[string]string{"id": in.ID, "title": "notes on " + strings.TrimPrefix(in.ID, "doc-")}, nil
	}); err != nil {
		return nil, err
	}
	if err := flowdoc.RegisterAction(reg, "notify", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		User    string `json:"user"`
		Message string `json:"message"`
	}) (string, error) {
		return fmt.Sprintf("to %s: %s", in.User, in.Message), nil
	}); err != nil {
		return nil, err
	}
	return reg, nil
}

func main() {
	db := flag.String("db", "documents.db", "SQLite file")
	doc := flag.String("doc", "", "flow document (YAML or JSON); the embedded research.yaml when empty")
	input := flag.String("input", `{"topic": "AI safety", "created_by": "james"}`, "run input (JSON)")
	flag.Parse()
	if err := run(os.Stdout, *db, *doc, *input); err != nil {
		log.Fatal(err)
	}
}

func run(w io.Writer, path, docPath, input string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, text := "research.yaml", research
	if docPath != "" {
		b, err := os.ReadFile(docPath)
		if err != nil {
			return err
		}
		name, text = filepath.Base(docPath), b
	}
	reg, err := actions()
	if err != nil {
		return err
	}
	f, err := flowdoc.Load(name, text, reg)
	if err != nil {
		return err // every problem, each with its line, column, path and fix
	}
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{Store: st})
	if err != nil {
		return err
	}
	if err := c.Register(f); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = c.Stop(context.Background()) }()

	fmt.Fprintf(w, "document %s: flow %q version %d\n%s\n", name, f.Name(), f.Version(), f.Mermaid())
	r, err := c.Run(ctx, f.Name(), json.RawMessage(input), nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "run %s: %s, output %s\n", r.ID, r.Status, r.Output)
	if r.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", r.Error)
	}
	h, err := c.History(ctx, r.ID)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "  history:")
	for _, ev := range h {
		line := fmt.Sprintf("    %2d %s %-19s", ev.Seq, ev.At.Format("15:04:05.000"), ev.Kind)
		if ev.Step != "" {
			line += " " + ev.Step
		}
		if ev.Name != "" {
			line += " -> " + ev.Name
		}
		fmt.Fprintln(w, line)
	}
	return nil
}
