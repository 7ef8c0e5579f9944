package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/tools/go/analysis/unitchecker"

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
	return &cobra.Command{
		Use:   "vet [packages]",
		Short: "Check workflow code for non-determinism (offline; needs the go command)",
		Long: "vet runs the determinism linter (package workflow/workflowcheck) over Go packages, ./... by\n" +
			"default, test files included: in code reachable from a workflow function it reports what breaks\n" +
			"replay (the clock, randomness, goroutines, channels and select, sync, map ranges, writes to\n" +
			"package variables, I/O and the environment), each as file:line:col: message with the workflow\n" +
			"API to use instead. A finding is silenced by a comment on its line or the line above:\n" +
			"  " + workflowcheck.Directive + " <reason>\n" +
			"vet runs go vet -vettool=heph (the go command must be on PATH); exit 1 when anything is\n" +
			"reported.",
		Example: `  heph vet ./...
  heph vet ./workflows -o json
  go vet -vettool=$(which heph) ./...`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"./..."}
			}
			found, err := vetPackages(cmd.Context(), g.env.Stderr, args)
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
}

// vetPackages runs go vet with this executable as the vet tool over the
// packages the patterns name (go vet's errors go to stderr); the findings
// come sorted by file and line, each once (a package and its test
// variant share files).
func vetPackages(ctx context.Context, stderr io.Writer, patterns []string) ([]vetFinding, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find heph's executable: %w", err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", append([]string{"vet", "-json", "-vettool=" + self}, patterns...)...)
	cmd.Stdout, cmd.Stderr = &out, stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go vet: %w", err)
	}
	wd, _ := os.Getwd()
	seen := map[vetFinding]bool{}
	found := []vetFinding{}
	// go vet -json prints one object per package: package → analyzer →
	// its diagnostics, or {"error": ...} when the analyzer failed.
	dec := json.NewDecoder(&out)
	for {
		var pkgs map[string]map[string]json.RawMessage
		if err := dec.Decode(&pkgs); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go vet -json: %w", err)
		}
		for pkg, byAnalyzer := range pkgs {
			raw := byAnalyzer[workflowcheck.Analyzer.Name]
			if len(raw) == 0 {
				continue
			}
			var diags []struct{ Posn, Message string }
			if err := json.Unmarshal(raw, &diags); err != nil {
				return nil, fmt.Errorf("go vet: %s: %s", pkg, raw)
			}
			for _, d := range diags {
				f := vetFinding{Package: strings.Fields(pkg)[0], Message: d.Message}
				f.File, f.Line, f.Column = splitPosn(d.Posn)
				if rel, err := filepath.Rel(wd, f.File); err == nil && !strings.HasPrefix(rel, "..") {
					f.File = rel
				}
				if !seen[f] {
					seen[f] = true
					found = append(found, f)
				}
			}
		}
	}
	slices.SortFunc(found, func(a, b vetFinding) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), cmp.Compare(a.Message, b.Message))
	})
	return found, nil
}

// splitPosn splits go vet's file:line:col.
func splitPosn(posn string) (file string, line, col int) {
	file = posn
	if i := strings.LastIndexByte(file, ':'); i > 0 {
		col, _ = strconv.Atoi(file[i+1:])
		file = file[:i]
	}
	if i := strings.LastIndexByte(file, ':'); i > 0 {
		line, _ = strconv.Atoi(file[i+1:])
		file = file[:i]
	}
	return file, line, col
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
