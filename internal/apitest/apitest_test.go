package apitest_test

import (
	"slices"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/apitest"
)

func TestLeaksFindsEveryKind(t *testing.T) {
	got, err := apitest.Leaks("testdata/leaky")
	if err != nil {
		t.Fatal(err)
	}
	const e = "github.com/hephaestus-go/hephaestus/internal/engine."
	want := []string{
		"leaky.(*Struct).Method: " + e + "Event",
		"leaky.Alias: " + e + "State",
		"leaky.Built: declared with github.com/hephaestus-go/hephaestus/internal/engine",
		"leaky.Embeds.History: " + e + "History",
		"leaky.Func: " + e + "Graph",
		"leaky.Iface.Do: " + e + "Command",
		"leaky.Shown: declared with github.com/hephaestus-go/hephaestus/internal/engine",
		"leaky.Struct.Field: " + e + "Step",
		"leaky.Var: declared with github.com/hephaestus-go/hephaestus/internal/engine",
		"leaky.Var: " + e + "Decision",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Leaks:\n got %q\nwant %q", got, want)
	}
}

func TestLeaksBadDir(t *testing.T) {
	if _, err := apitest.Leaks("testdata/none"); err == nil {
		t.Error("Leaks of a missing directory: no error")
	}
}
