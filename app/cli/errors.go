package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	apiclient "github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/internal/suggest"
)

// errorBody is what -o json prints on Stderr for an error.
type errorBody struct {
	Error errorJSON `json:"error"`
}

type errorJSON struct {
	// Title is the server's problem title, or what kind of failure the
	// command line had ("Usage error", "Server unreachable", "Error").
	Title string `json:"title"`
	// Status is the HTTP status of a server's problem (absent otherwise).
	Status int `json:"status,omitempty"`
	// Kind is the server's problem kind ("not-found", "conflict", ...).
	Kind   string `json:"kind,omitempty"`
	Detail string `json:"detail"`
	// Fix says what to do, where it is known.
	Fix string `json:"fix,omitempty"`
	// Errors are the positioned problems of a document or a body.
	Errors []apiclient.DocumentError `json:"errors,omitempty"`
	// ExitCode is heph's exit code.
	ExitCode int `json:"exit_code"`
}

// writeErrorJSON prints err as one JSON object {"error": {...}}.
func writeErrorJSON(w io.Writer, err error, code int) {
	e := errorJSON{Detail: err.Error(), ExitCode: code}
	var (
		apiErr *apiclient.Error
		ue     *usageError
		he     *hintError
	)
	switch {
	case errors.As(err, &apiErr):
		e.Title, e.Status, e.Kind, e.Errors, e.Fix = apiErr.Title, apiErr.Status, apiErr.Kind, apiErr.Errors, apiErr.Fix
		if e.Title == "" {
			e.Title = "Error"
		}
	case errors.As(err, &ue):
		e.Title = "Usage error"
	case errors.Is(err, apiclient.ErrUnreachable):
		e.Title = "Server unreachable"
	default:
		e.Title = "Error"
	}
	if errors.As(err, &he) {
		e.Detail, e.Fix = he.msg, he.fix
	}
	b, mErr := json.Marshal(errorBody{e})
	if mErr != nil { // an errorBody always marshals
		b = []byte(`{"error":{"title":"Error","detail":` + fmt.Sprintf("%q", err.Error()) + `}}`)
	}
	_ = writeJSON(w, b)
}

// jsonErrors reports whether an error is printed as JSON: -o is json, or
// the command line asks for it but failed before -o was parsed (a bad
// flag before it).
func jsonErrors(root *cobra.Command, args []string) bool {
	if f := root.PersistentFlags().Lookup("output"); f != nil && f.Value.String() == "json" {
		return true
	}
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "-ojson" || a == "--output=json" || a == "-o=json":
			return true
		case (a == "-o" || a == "--output") && i+1 < len(args) && args[i+1] == "json":
			return true
		}
	}
	return false
}

// hintError is an error the command line explains: its message says
// what is wrong and what to do (fix); it wraps the error it explains, so
// the exit code stays that error's.
type hintError struct {
	msg, fix string
	err      error
}

func (e *hintError) Error() string {
	if e.fix == "" {
		return e.msg
	}
	return e.msg + "; " + e.fix
}

func (e *hintError) Unwrap() error { return e.err }

// noSubcommand refuses arguments to a command group, suggesting the
// subcommand a mistyped one was meant to be (cobra.NoArgs does not).
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
			names = append(names, c.Aliases...)
		}
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if hint := suggest.DidYouMean(args[0], names, false); hint != "" {
		msg += hint
	}
	return fmt.Errorf("%s (see %s --help)", msg, cmd.CommandPath())
}

// flagError makes a flag error a usage error, suggesting the flag a
// mistyped one was meant to be.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var names []string
		visit := func(f *pflag.Flag) {
			if !f.Hidden && !slices.Contains(names, f.Name) {
				names = append(names, f.Name)
			}
		}
		cmd.Flags().VisitAll(visit)
		cmd.InheritedFlags().VisitAll(visit)
		hits := suggest.Closest(name, names)
		for i, h := range hits {
			hits[i] = "--" + h
		}
		if len(hits) > 0 {
			msg += "; did you mean " + strings.Join(hits, " or ") + "?"
		}
	}
	return &usageError{msg + " (see " + cmd.CommandPath() + " --help)"}
}

// startError explains a refused start: an unknown definition (suggesting
// the nearest names the server can start), or a missing business value.
func startError(ctx context.Context, g *globals, api *apiclient.Client, req *apiclient.StartRequest, err error) error {
	var apiErr *apiclient.Error
	if !errors.As(err, &apiErr) {
		return err
	}
	if req.BusinessValue == "" && slices.ContainsFunc(apiErr.Errors, func(d apiclient.DocumentError) bool { return d.Path == "business_value" }) {
		return &hintError{
			msg: fmt.Sprintf("%s %q has a business key, and the start gave no value", req.Kind, req.Name),
			fix: "give it with --business-value (such as --business-value order-42)",
			err: err,
		}
	}
	if apiErr.Status != 404 {
		return err
	}
	rctx, cancel := g.reqCtx(ctx, 0)
	defer cancel()
	defs, _, dErr := api.Definitions(rctx)
	if dErr != nil {
		return err
	}
	var names []string
	for _, d := range defs {
		if d.Kind == req.Kind {
			if d.Name == req.Name {
				return err // the name is known: the version is not
			}
			names = append(names, d.Name)
		}
	}
	return &hintError{
		msg: fmt.Sprintf("no %s named %q%s", req.Kind, req.Name, suggest.DidYouMean(req.Name, names, false)),
		fix: "list them with heph definitions",
		err: err,
	}
}
