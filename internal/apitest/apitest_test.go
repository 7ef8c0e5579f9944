package apitest_test

import (
	"slices"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/apitest"
)

func TestLeaksFindsEveryKind(t *testing.T) {
	const e = "github.com/hephaestus-go/hephaestus/internal/engine"
	types := []string{
		"leaky.(*Struct).Method: " + e + ".Event",
		"leaky.Alias: " + e + ".State",
		"leaky.Embeds.History: " + e + ".History",
		"leaky.Func: " + e + ".Graph",
		"leaky.Iface.Do: " + e + ".Command",
		"leaky.Struct.Field: " + e + ".Step",
		"leaky.Var: " + e + ".Decision",
	}
	got, err := apitest.Leaks("testdata/leaky")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, types) {
		t.Errorf("Leaks:\n got %q\nwant %q", got, types)
	}
	names := append(slices.Clone(types),
		"leaky.Built: declared with "+e,
		"leaky.Shown: declared with "+e,
		"leaky.Var: declared with "+e,
	)
	slices.Sort(names)
	got, err = apitest.NameLeaks("testdata/leaky")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, names) {
		t.Errorf("NameLeaks:\n got %q\nwant %q", got, names)
	}
}

func TestLeaksBadDir(t *testing.T) {
	if _, err := apitest.Leaks("testdata/none"); err == nil {
		t.Error("Leaks of a missing directory: no error")
	}
}
