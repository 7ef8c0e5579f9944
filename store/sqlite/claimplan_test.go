package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestClaimWithHandlersPlan: a claim that lists handlers reads, per
// handler, the index tasks_handler by queue and handler, and never walks
// tasks_claim filtering on the handler (which read the whole backlog of a
// queue whose front held another handler's tasks).
func TestClaimWithHandlersPlan(t *testing.T) {
	t.Parallel()
	s := open(t, &Config{Path: filepath.Join(t.TempDir(), "plan.db")})
	rows, err := s.DB().QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+queries[qClaimHandler],
		"pq", int64(1), int64(16), `["flow:mine@1",""]`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "USING INDEX tasks_handler (queue=? AND handler=?)") || strings.Contains(text, "tasks_claim") {
		t.Errorf("the claim does not read tasks_handler by queue and handler:\n%s", text)
	}
}
