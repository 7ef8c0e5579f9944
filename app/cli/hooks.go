package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hephaestus-go/hephaestus/server"
)

// envHooks names the webhook endpoints' file (heph server --hooks).
const envHooks = "HEPH_HOOKS"

// hookFile is the YAML of heph server --hooks: the webhook endpoints,
// each with its secret read from an environment variable or a file, never
// written in the file itself.
type hookFile struct {
	Hooks []yaml.Node `yaml:"hooks"`
}

type hookEntry struct {
	Name       string `yaml:"name"`
	Scheme     string `yaml:"scheme"`
	SecretEnv  string `yaml:"secret_env"`
	SecretFile string `yaml:"secret_file"`
	Event      string `yaml:"event"`
	Tolerance  string `yaml:"tolerance"`
}

// loadHooks reads the hooks file; an error names the file, the line and
// the field.
func loadHooks(path string, env *Env) ([]server.Hook, error) {
	if path == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--hooks: %v", err)
	}
	var f hookFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, usagef("--hooks %s: %v", path, err)
	}
	if len(f.Hooks) == 0 {
		return nil, usagef("--hooks %s: no hooks: want a list under \"hooks:\"", path)
	}
	out := make([]server.Hook, 0, len(f.Hooks))
	seen := map[string]bool{}
	for i := range f.Hooks {
		n := &f.Hooks[i]
		h, err := hookOf(n, env)
		if err == nil {
			err = h.Check()
		}
		if err == nil && seen[h.Name] {
			err = fmt.Errorf("name %q: another hook has it", h.Name)
		}
		if err != nil {
			return nil, usagef("--hooks %s:%d: hook %d: %v", path, n.Line, i+1, err)
		}
		seen[h.Name] = true
		out = append(out, h)
	}
	return out, nil
}

// hookFields are the fields of a hook entry.
const hookFields = "name, scheme, secret_env, secret_file, event, tolerance"

func hookOf(n *yaml.Node, env *Env) (server.Hook, error) {
	var e hookEntry
	var h server.Hook
	// An unknown field is an error, on its own line.
	if n.Kind != yaml.MappingNode {
		return h, fmt.Errorf("want a mapping with the fields %s", hookFields)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !slices.Contains(strings.Split(hookFields, ", "), k.Value) {
			return h, fmt.Errorf("line %d: unknown field %q (the fields are %s)", k.Line, k.Value, hookFields)
		}
	}
	if err := n.Decode(&e); err != nil {
		return h, errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	h = server.Hook{Name: e.Name, Scheme: e.Scheme, Event: e.Event}
	if e.Tolerance != "" {
		var err error
		if h.Tolerance, err = time.ParseDuration(e.Tolerance); err != nil {
			return h, fmt.Errorf("tolerance %q: want a duration such as 5m", e.Tolerance)
		}
	}
	switch {
	case e.SecretEnv != "" && e.SecretFile != "":
		return h, fmt.Errorf("%s: give secret_env or secret_file, not both", e.Name)
	case e.SecretEnv != "":
		if h.Secret = env.getenv(e.SecretEnv); h.Secret == "" {
			return h, fmt.Errorf("%s: secret_env: $%s is not set", e.Name, e.SecretEnv)
		}
	case e.SecretFile != "":
		s, err := os.ReadFile(e.SecretFile)
		if err != nil {
			return h, fmt.Errorf("%s: secret_file: %v", e.Name, err)
		}
		h.Secret = strings.TrimSpace(string(s))
	default:
		return h, fmt.Errorf("%s: a secret is required: secret_env (an environment variable's name) or secret_file", e.Name)
	}
	return h, nil
}
