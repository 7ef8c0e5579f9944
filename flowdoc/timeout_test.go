package flowdoc_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flowdoc"
)

// execution_timeout gives the document's runs their default execution
// timeout; a value that is not a duration is refused at its line.
func TestExecutionTimeoutField(t *testing.T) {
	doc := "name: limited\nexecution_timeout: 90m\nsteps:\n  only:\n    action: echo\n    done: true\n"
	f, err := flowdoc.Load("limited.yaml", []byte(doc), tools(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.ExecutionTimeout(); got != 90*time.Minute {
		t.Fatalf("ExecutionTimeout() = %v, want 1h30m", got)
	}
	none, err := flowdoc.Load("plain.yaml", []byte("name: plain\nsteps:\n  only:\n    action: echo\n    done: true\n"), tools(t))
	if err != nil || none.ExecutionTimeout() != 0 {
		t.Fatalf("no execution_timeout: %v, %v; want none", none.ExecutionTimeout(), err)
	}
	for _, bad := range []string{"soon", "-5m", "[1]"} {
		_, err := flowdoc.Load("bad.yaml", []byte("name: bad\nexecution_timeout: "+bad+"\nsteps:\n  only:\n    action: echo\n    done: true\n"), tools(t))
		var fe *flowdoc.Error
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "execution_timeout") || !strings.Contains(err.Error(), "bad.yaml:2") {
			t.Errorf("execution_timeout: %s: %v; want an error at bad.yaml:2 naming the field", bad, err)
		}
	}
}
