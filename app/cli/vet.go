package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/analysis/unitchecker"
	"golang.org/x/tools/go/packages"

	"github.com/hephaestus-go/hephaestus/workflow/workflowcheck"
)

// vetFinding is one diagnostic of heph vet, as -o json prints it.
type vetFinding struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Package string `json:"package"`
	Message string `json:"message"`
}

func newVet(g *globals) *cobra.Command {
	var tests bool
	cmd := &cobra.Command{
		Use:   "vet [packages]",
		Short: "Check workflow code for non-determinism (offline)",
		Long: "vet runs the determinism linter (package workflow/workflowcheck) over Go packages, ./... by\n" +
			"default: in code reachable from a workflow function it reports what breaks replay (the clock,\n" +
			"randomness, goroutines, channels and select, sync, map ranges, writes to package variables,\n" +
			"I/O and the environment), each as file:line:col: message with the workflow API to use instead.\n" +
			"A finding is silenced by a comment on its line or the line above:\n" +
			"  //heph:nondeterministic-ok <reason>\n" +
			"Exit 1 when anything is reported. The same check runs under go vet:\n" +
			"  go vet -vettool=$(which heph) ./...",
		Example: `  heph vet ./...
  heph vet ./workflows -o json
  go vet -vettool=$(which heph) ./...`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"./..."}
			}
			found, err := vetPackages(cmd.Context(), tests, args)
			if err != nil {
				return err
			}
			err = g.emitValue(found, func(w io.Writer) error {
				for _, f := range found {
					fmt.Fprintf(w, "%s:%d:%d: %s\n", f.File, f.Line, f.Column, f.Message)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if len(found) > 0 {
				return &exitError{code: ExitFailure, silent: true, msg: fmt.Sprintf("%d findings", len(found))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&tests, "tests", true, "check the packages' test files too")
	return cmd
}

// vetPackages loads the packages the patterns name and runs the
// analyzer over them; the findings come sorted by file and line, each
// once (a package and its test variant share files).
func vetPackages(ctx context.Context, tests bool, patterns []string) ([]vetFinding, error) {
	cfg := &packages.Config{
		Context: ctx,
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
			packages.NeedTypes | packages.NeedTypesSizes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedModule,
		Tests: tests,
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("load packages: %w", err)
	}
	var loadErrs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			loadErrs = append(loadErrs, e.Error())
		}
	})
	if len(loadErrs) > 0 {
		return nil, fmt.Errorf("load packages: %s", strings.Join(loadErrs, "; "))
	}
	if len(pkgs) == 0 {
		return nil, usagef("no packages match %s", strings.Join(patterns, " "))
	}
	graph, err := checker.Analyze([]*analysis.Analyzer{workflowcheck.Analyzer}, pkgs, nil)
	if err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	wd, _ := os.Getwd()
	seen := map[vetFinding]bool{}
	found := []vetFinding{}
	for act := range graph.All() {
		if !act.IsRoot {
			continue
		}
		if act.Err != nil {
			return nil, fmt.Errorf("analyze %s: %w", act.Package.PkgPath, act.Err)
		}
		for _, d := range act.Diagnostics {
			p := act.Package.Fset.Position(d.Pos)
			file := p.Filename
			if rel, err := filepath.Rel(wd, file); err == nil && !strings.HasPrefix(rel, "..") {
				file = rel
			}
			f := vetFinding{File: file, Line: p.Line, Column: p.Column, Package: act.Package.PkgPath, Message: d.Message}
			if !seen[f] {
				seen[f] = true
				found = append(found, f)
			}
		}
	}
	slices.SortFunc(found, func(a, b vetFinding) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), cmp.Compare(a.Message, b.Message))
	})
	return found, nil
}

// IsVetTool reports whether args (without the program name) are how go
// vet runs a vet tool: -V=full and -flags to describe it, then flags and
// the path of a .cfg file naming one package's files.
func IsVetTool(args []string) bool {
	if len(args) == 1 && (args[0] == "-V=full" || args[0] == "-flags") {
		return true
	}
	if len(args) == 0 || !strings.HasSuffix(args[len(args)-1], ".cfg") {
		return false
	}
	for _, a := range args[:len(args)-1] {
		if !strings.HasPrefix(a, "-") {
			return false
		}
	}
	return true
}

// RunVetTool runs the determinism linter under go vet (go vet
// -vettool=heph): it reads the process's arguments and exits.
func RunVetTool() {
	unitchecker.Main(workflowcheck.Analyzer)
}
