package flowdoc

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// Limits of conditions.
const (
	// MaxConditionLength bounds the text of a condition.
	MaxConditionLength = 4096
	// MaxConditionCost bounds the work of one evaluation (CEL's cost
	// units): a condition that needs more fails the step.
	MaxConditionCost = 100_000
)

var (
	celOnce sync.Once
	celEnv  *cel.Env
	celErr  error
)

// env is the CEL environment of conditions: input, steps, result and run,
// plus nil (null) so that the seed's "result != nil" keeps working.
func env() (*cel.Env, error) {
	celOnce.Do(func() {
		celEnv, celErr = cel.NewEnv(
			cel.Variable("input", cel.DynType),
			cel.Variable("steps", cel.MapType(cel.StringType, cel.MapType(cel.StringType, cel.DynType))),
			cel.Variable("result", cel.DynType),
			cel.Variable("run", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("item", cel.DynType),
			cel.Variable("nil", cel.NullType),
			cel.CrossTypeNumericComparisons(true),
			cel.ParserExpressionSizeLimit(MaxConditionLength),
			cel.ParserRecursionLimit(64),
		)
	})
	return celEnv, celErr
}

// condition is a compiled branch condition.
type condition struct {
	text  string
	prg   cel.Program
	steps []string // the steps whose outputs it reads
}

// The seed's bare-word comparisons: result == admin means the string.
var (
	bareWord  = regexp.MustCompile(`^\s*result\s*(==|!=)\s*([A-Za-z_][A-Za-z0-9_]*)\s*$`)
	stepsRead = regexp.MustCompile(`\bsteps\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*["']([^"']+)["']\s*\])`)
)

// compileCondition parses and type-checks a condition.
func compileCondition(text string) (*condition, error) {
	if len(text) > MaxConditionLength {
		return nil, fmt.Errorf("the condition is %d bytes, more than the limit of %d", len(text), MaxConditionLength)
	}
	src := text
	if m := bareWord.FindStringSubmatch(text); m != nil {
		switch m[2] {
		case "true", "false", "nil", "null", "input", "steps", "result", "run", "item":
		default:
			src = fmt.Sprintf("result %s %q", m[1], m[2])
		}
	}
	e, err := env()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("%s", strings.TrimSpace(iss.Err().Error()))
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("the condition gives %s, not a boolean", t)
	}
	prg, err := e.Program(ast, cel.CostLimit(MaxConditionCost), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	c := &condition{text: text, prg: prg}
	for _, m := range stepsRead.FindAllStringSubmatch(src, -1) {
		s := m[1] + m[2]
		if !slices.Contains(c.steps, s) {
			c.steps = append(c.steps, s)
		}
	}
	return c, nil
}

// ConditionError reports a condition that failed to evaluate while a step
// ran; the step fails without retries.
type ConditionError struct {
	Step      string
	Condition string
	Err       error
}

func (e *ConditionError) Error() string {
	return fmt.Sprintf("step %q: condition %q: %v", e.Step, e.Condition, e.Err)
}

func (e *ConditionError) Unwrap() error { return e.Err }

func (c *condition) eval(sc *scope, result any) (bool, error) {
	steps := map[string]any{}
	for k, v := range sc.steps {
		steps[k] = map[string]any{"output": v}
	}
	vars := map[string]any{"input": sc.input, "steps": steps, "result": result, "run": sc.run, "item": sc.item, "nil": types.NullValue}
	out, _, err := c.prg.Eval(vars)
	if err != nil {
		return false, &ConditionError{Step: sc.step, Condition: c.text, Err: err}
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, &ConditionError{Step: sc.step, Condition: c.text, Err: fmt.Errorf("gave %v (%s), not a boolean", out.Value(), out.Type().TypeName())}
	}
	return b, nil
}
