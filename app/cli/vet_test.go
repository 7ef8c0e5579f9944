package cli_test

import (
	"testing"

	"github.com/hephaestus-go/hephaestus/app/cli"
)

// Only go vet's invocations of a vet tool are taken for one: heph's own
// commands are not.
func TestIsVetTool(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"-V=full"}, true},
		{[]string{"-flags"}, true},
		{[]string{"/tmp/go-build1/b001/vet.cfg"}, true},
		{[]string{"-json", "-c=1", "/tmp/go-build1/b001/vet.cfg"}, true},
		{nil, false},
		{[]string{"vet", "./..."}, false},
		{[]string{"validate", "flow.cfg"}, false},
		{[]string{"-V=full", "ls"}, false},
	} {
		if got := cli.IsVetTool(c.args); got != c.want {
			t.Errorf("IsVetTool(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
