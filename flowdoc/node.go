package flowdoc

import (
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// node is a value of a document with its position: a mapping (keys in
// document order), a sequence or a scalar.
type node struct {
	kind      yaml.Kind
	tag       string
	value     string
	line, col int
	keys      []*node // mapping keys
	vals      []*node // mapping values, or sequence items
}

// maxDepth bounds the nesting of a document.
const maxDepth = 64

func fromYAML(y *yaml.Node, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("line %d: nested more than %d levels deep", y.Line, maxDepth)
	}
	switch y.Kind {
	case yaml.DocumentNode:
		if len(y.Content) == 0 {
			return &node{kind: yaml.MappingNode, line: y.Line, col: y.Column}, nil
		}
		return fromYAML(y.Content[0], depth)
	case yaml.AliasNode:
		return nil, fmt.Errorf("line %d: YAML aliases (*%s) are not allowed in flow documents; repeat the value", y.Line, y.Value)
	}
	n := &node{kind: y.Kind, tag: y.ShortTag(), value: y.Value, line: y.Line, col: y.Column}
	switch y.Kind {
	case yaml.MappingNode:
		if len(y.Content)%2 != 0 {
			return nil, fmt.Errorf("line %d: malformed mapping", y.Line)
		}
		seen := map[string]bool{}
		for i := 0; i < len(y.Content); i += 2 {
			k, err := fromYAML(y.Content[i], depth+1)
			if err != nil {
				return nil, err
			}
			if k.kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d column %d: a mapping key must be a string", k.line, k.col)
			}
			if k.tag == "!!merge" {
				return nil, fmt.Errorf("line %d column %d: YAML merge keys (<<) are not allowed in flow documents", k.line, k.col)
			}
			if seen[k.value] {
				return nil, fmt.Errorf("line %d column %d: the key %q appears twice in one mapping", k.line, k.col, k.value)
			}
			seen[k.value] = true
			v, err := fromYAML(y.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, k)
			n.vals = append(n.vals, v)
		}
	case yaml.SequenceNode:
		for _, c := range y.Content {
			v, err := fromYAML(c, depth+1)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, v)
		}
	}
	return n, nil
}

// get returns the value under key of a mapping, and its key node.
func (n *node) get(key string) (val, k *node) {
	if n == nil || n.kind != yaml.MappingNode {
		return nil, nil
	}
	for i, kn := range n.keys {
		if kn.value == key {
			return n.vals[i], kn
		}
	}
	return nil, nil
}

func (n *node) kindName() string {
	switch {
	case n == nil:
		return "nothing"
	case n.kind == yaml.MappingNode:
		return "a mapping"
	case n.kind == yaml.SequenceNode:
		return "a list"
	}
	switch n.tag {
	case "!!str":
		return "a string"
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "null"
	}
	return "a " + n.tag + " value"
}

func (n *node) toAny() (any, error) {
	if n == nil {
		return nil, nil
	}
	switch n.kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			v, err := n.vals[i].toAny()
			if err != nil {
				return nil, err
			}
			m[k.value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, len(n.vals))
		for i, c := range n.vals {
			v, err := c.toAny()
			if err != nil {
				return nil, err
			}
			s[i] = v
		}
		return s, nil
	}
	switch n.tag {
	case "!!null":
		return nil, nil
	case "!!bool":
		b, err := strconv.ParseBool(n.value)
		if err != nil {
			var yb bool
			if yerr := yaml.Unmarshal([]byte(n.value), &yb); yerr != nil {
				return nil, fmt.Errorf("line %d column %d: %q is not a boolean", n.line, n.col, n.value)
			}
			return yb, nil
		}
		return b, nil
	case "!!int", "!!float":
		var f float64
		if err := yaml.Unmarshal([]byte(n.value), &f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("line %d column %d: %q is not a finite number", n.line, n.col, n.value)
		}
		if n.tag == "!!int" {
			if i, err := strconv.ParseInt(n.value, 0, 64); err == nil {
				return i, nil
			}
		}
		return f, nil
	case "!!str":
		return n.value, nil
	}
	return nil, fmt.Errorf("line %d column %d: values tagged %s are not allowed; use a string, number, boolean, null, list or mapping", n.line, n.col, n.tag)
}
