package dashboard_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
)

func registerAttrFlow(ctx context.Context, c *heph.Client) error {
	b := flow.New("attrs.dash").SearchAttribute("amount", flow.AttrInt).SearchAttribute("region", flow.AttrKeywordList)
	flow.Step(b, "s", func(ctx context.Context, in int) (int, error) { return in, nil })
	return c.Register(b.MustBuild())
}

// The runs page filters by search attributes through its form's
// Attributes box; a run's page shows its attributes; a filter naming an
// attribute no flow declares is a 400 page that says so.
func TestSearchAttributesFilter(t *testing.T) {
	e := newEnv(t, true, registerAttrFlow)
	var ids []string
	for i, a := range []int{5, 500, 700} {
		r, err := e.client.StartRun(context.Background(), "attrs.dash", i, &heph.StartOptions{
			SearchAttributes: map[string]any{"amount": a, "region": []string{[]string{"eu", "us", "eu"}[i]}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
		e.waitStatus(r.ID, heph.StatusCompleted)
	}
	b := newBrowser(t)
	shown := func() []string {
		var s []string
		b.eval(`Array.from(document.querySelectorAll("table.runs tbody tr[data-run]")).map(r => r.dataset.run)`, &s)
		return s
	}
	b.open(e.url + "/")
	b.run("type a filter", chromedp.SendKeys(`input[name=where]`, "amount > 100 and region = eu", chromedp.ByQuery))
	b.submit("filter", chromedp.Click(`#filters button[type=submit]`, chromedp.ByQuery))
	var search string
	b.eval("location.search", &search)
	if q, _ := url.ParseQuery(strings.TrimPrefix(search, "?")); q.Get("where") != "amount > 100 and region = eu" {
		t.Errorf("the form sent %q", search)
	}
	if s := shown(); len(s) != 1 || s[0] != ids[2] {
		t.Errorf("where through the form: %v, want [%s]", s, ids[2])
	}
	b.open(e.url + "/runs/" + ids[1])
	var attrs string
	b.eval(`Array.from(document.querySelectorAll(".search-attribute")).map(x => x.textContent).join(" ")`, &attrs)
	if attrs != `amount 500 region ["us"]` {
		t.Errorf("the run page shows %q", attrs)
	}
	b.noErrors("the filtered pages")
	b.open(e.url + "/?where=" + url.QueryEscape("amout > 1"))
	if p := b.text("main .problem p"); !strings.Contains(p, `did you mean "amount"`) {
		t.Errorf("a bad filter says %q", p)
	}
}
