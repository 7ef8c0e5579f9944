package hephaestus_test

import (
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

func TestBuildID(t *testing.T) {
	st, err := sqlite.Open(t.Context(), &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if id := heph.DefaultBuildID(); id == "" || id != heph.DefaultBuildID() {
		t.Fatalf("DefaultBuildID = %q, then %q: want one non-empty id per process", id, heph.DefaultBuildID())
	}
	for _, tc := range []struct{ id, want string }{
		{"v1.2.3+meta_x-y", ""},
		{"has space", `"has space" holds ' ' at byte 3`},
		{strings.Repeat("a", 65), "is 65 bytes long; the limit is 64"},
	} {
		_, err := heph.New(&heph.Config{Store: st, BuildID: tc.id})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("BuildID %q: %v", tc.id, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Config.BuildID")):
			t.Errorf("BuildID %q: error %v, want one naming Config.BuildID and saying %q", tc.id, err, tc.want)
		}
	}
}
