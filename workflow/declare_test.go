package workflow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/workflow"
)

type shelf struct {
	Books []string `json:"books"`
}

var (
	shelve    = workflow.NewUpdate[string, int]("shelve")
	dust      = workflow.NewSignal[struct{}]("dust")
	countBook = workflow.NewQuery[string, int]("count")
)

func shelfWorkflow() *workflow.Definition[struct{}, shelf] {
	d := workflow.New("shelf", func(ctx workflow.Context, _ struct{}) (shelf, error) {
		return workflow.Phase(ctx, shelf{},
			workflow.HandleUpdate(shelve, func(ctx workflow.Context, b string, s shelf) (workflow.Reply[shelf, int], error) {
				s.Books = append(s.Books, b)
				return workflow.Respond(s, len(s.Books)), nil
			}),
			workflow.HandleSignal(dust, func(ctx workflow.Context, _ struct{}, s shelf) workflow.Next[shelf] { return workflow.Stop(s) }),
		)
	})
	workflow.HandleQuery(d, countBook, func(s shelf, prefix string) (int, error) {
		if prefix == "" {
			return 0, errors.New("a prefix, please")
		}
		n := 0
		for _, b := range s.Books {
			if strings.HasPrefix(b, prefix) {
				n++
			}
		}
		return n, nil
	})
	return d
}

// Named queries answer over the published state, with arguments, without
// running the workflow.
func TestAnswerQuery(t *testing.T) {
	d := shelfWorkflow()
	pub := json.RawMessage(`{"books":["go","gopl","rust"]}`)
	out, err := d.AnswerQuery("count", pub, json.RawMessage(`"go"`))
	if err != nil || string(out) != "2" {
		t.Fatalf("count(go) = %s, %v; want 2", out, err)
	}
	// No published state: the handler sees the zero state.
	if out, err := d.AnswerQuery("count", nil, json.RawMessage(`"go"`)); err != nil || string(out) != "0" {
		t.Fatalf("count(go) over nothing published = %s, %v; want 0", out, err)
	}
	if _, err := d.AnswerQuery("size", pub, nil); !errors.Is(err, workflow.ErrUnknownQuery) || !strings.Contains(err.Error(), "[count]") {
		t.Fatalf("an undeclared query: %v; want ErrUnknownQuery listing the declared ones", err)
	}
	if _, err := d.AnswerQuery("count", pub, json.RawMessage(`""`)); err == nil || err.Error() != "a prefix, please" {
		t.Fatalf("a failing handler: %v; want its error", err)
	}
	if _, err := d.AnswerQuery("count", pub, json.RawMessage(`7`)); err == nil || !strings.Contains(err.Error(), "arguments do not decode into a string") {
		t.Fatalf("arguments of the wrong type: %v", err)
	}
	if _, err := d.AnswerQuery("count", json.RawMessage(`[1]`), json.RawMessage(`"go"`)); err == nil || !strings.Contains(err.Error(), "published state does not decode") {
		t.Fatalf("a published state of the wrong type: %v", err)
	}
	if diff := cmp.Diff([]string{"count"}, d.QueryNames()); diff != "" {
		t.Fatal(diff)
	}
}

// Declare records update and signal names once each; a workflow that
// declares nothing has no names.
func TestDeclare(t *testing.T) {
	d := shelfWorkflow()
	if u, s := d.Declared(); len(u)+len(s) != 0 {
		t.Fatalf("an undeclared workflow declares %v, %v", u, s)
	}
	tidy := workflow.NewUpdate[struct{}, bool]("tidy")
	if got := d.Declare(shelve, dust, tidy, shelve, countBook); got != d {
		t.Fatal("Declare did not return its definition")
	}
	u, s := d.Declared()
	if diff := cmp.Diff([]string{"shelve", "tidy"}, u); diff != "" {
		t.Fatalf("updates (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"dust"}, s); diff != "" {
		t.Fatalf("signals (-want +got):\n%s", diff)
	}
	for name, f := range map[string]func(){
		"NewUpdate": func() { workflow.NewUpdate[int, int]("") },
		"NewSignal": func() { workflow.NewSignal[int]("") },
		"NewQuery":  func() { workflow.NewQuery[int, int]("") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with an empty name did not panic", name)
				}
			}()
			f()
		}()
	}
}
