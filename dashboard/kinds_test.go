package dashboard_test

import (
	"regexp"
	"testing"
)

// The runs list and the run page name a run's kind as the API does:
// flow, document, job (all three stored as flow runs) and workflow.
func TestKindsNamed(t *testing.T) {
	e := newEnv(t, true, registerRunDefinitions)
	runs := e.startEveryKind()
	list := string(e.getOK("/"))
	for _, c := range runs {
		if k := e.apiRun(c.id).Kind; k != c.kind {
			t.Errorf("run %s: the API's kind is %q, want %s", c.id, k, c.kind)
		}
		row := regexp.MustCompile(`(?s)<tr data-run="` + c.id + `".*?</tr>`).FindString(list)
		if !regexp.MustCompile(`<span class="kind">` + c.kind + `</span>`).MatchString(row) {
			t.Errorf("run %s: the runs list's row does not say %s:\n%s", c.id, c.kind, row)
		}
		page := string(e.getOK("/runs/" + c.id))
		if !regexp.MustCompile(`data-kind="`+c.kind+`"`).MatchString(page) || !regexp.MustCompile(`<span class="kind-name">`+c.kind+`</span>`).MatchString(page) {
			t.Errorf("run %s: the run page does not say %s", c.id, c.kind)
		}
	}
}
