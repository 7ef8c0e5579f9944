package flowdoc_test

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtest"
)

func ExampleLoad() {
	reg := flowdoc.NewRegistry()
	_ = flowdoc.RegisterAction(reg, "greet", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		Name string `json:"name"`
	}) (string, error) {
		return "hello " + in.Name, nil
	})
	doc := `
name: hello
steps:
  greet:
    action: greet
    args: {name: "{{input.name}}"}
    branch:
      - if: result.startsWith("hello")
        then: done
      - else: done
`
	f, err := flowdoc.Load("hello.yaml", []byte(doc), reg)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _ := hephtest.RunFlow(context.Background(), f, map[string]string{"name": "Ada"})
	fmt.Println(r.Status(), string(r.Output()))

	// A mistake is reported with its place in the document and a fix.
	_, err = flowdoc.Load("hello.yaml", []byte("name: hello\nsteps:\n  greet: {action: gret, done: true}\n"), reg)
	fmt.Println(err)
	// Output:
	// completed {"greet":"hello Ada"}
	// hello.yaml:3:19: steps.greet.action: unknown action "gret"; fix: register it with flowdoc.RegisterAction, or use one of: greet
}
