package cli_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// heph start --attr sets search attributes (show prints them), heph ls
// --where filters by them (-o json too), and a filter naming an attribute
// no flow declares fails with the did-you-mean.
func TestSearchAttributesCLI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c, err := hephaestus.New(&hephaestus.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	b := flow.New("orders").SearchAttribute("amount", flow.AttrInt).SearchAttribute("region", flow.AttrKeywordList)
	flow.Step(b, "s", func(ctx context.Context, in any) (any, error) { return in, nil })
	if err := c.Register(b.MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	env := serveAPI(t, c, st)

	var big struct{ ID string }
	if err := json.Unmarshal([]byte(ok(t, env, "start", "orders", "--attr", "amount=500", "--attr", `region=["eu","us"]`, "-o", "json")), &big); err != nil {
		t.Fatal(err)
	}
	ok(t, env, "start", "orders", "--attr", "amount=5", "--attr", `region=["eu"]`)
	if out := ok(t, env, "show", big.ID); !strings.Contains(out, `"amount":500`) {
		t.Fatalf("show: %s", out)
	}
	var list struct{ Runs []struct{ ID string } }
	if err := json.Unmarshal([]byte(ok(t, env, "ls", "--where", "amount > 100 and region = us", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Runs) != 1 || list.Runs[0].ID != big.ID {
		t.Fatalf("ls --where: %+v", list.Runs)
	}
	if code, _, errOut := heph(t, env, "ls", "--where", "amout > 1"); code == 0 || !strings.Contains(errOut, `did you mean "amount"`) {
		t.Fatalf("a typo: exit %d, %s", code, errOut)
	}
}
