package dashboard_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The pages that pass parameters on to the API answer one that does not
// decode with a 400 page, never a 500.
func TestPagesBadParams(t *testing.T) {
	e := newEnv(t, true)
	for _, p := range []string{
		"/?cursor=garbage", "/?cursor=MTIz", "/?cursor=%00", "/?workflow=%00", "/?workflow=%ff", "/?q=%00", "/?tag=%c3%28",
		"/?status=nope", "/?limit=abc", "/?limit=0", "/?created_after=yesterday", "/?limit=%zz",
		"/operations?cursor=garbage", "/operations?cursor=MTIz", "/operations?cursor=%00",
		"/approvals?run_id=%00", "/approvals?workflow=%ff",
		"/runs/%00", "/runs/%ff", "/definitions/%00", "/definitions/order?version=x", "/definitions/order?version=-1",
		"/overview?window=forever", "/overview?window=%00",
	} {
		resp, err := httpGet(e.url+p, "")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: status %d, want 400: %.300s", p, resp.StatusCode, body)
		} else if !strings.Contains(string(body), "Bad Request") {
			t.Errorf("GET %s: the 400 page does not say so: %.300s", p, body)
		}
	}
}
