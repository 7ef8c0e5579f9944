// Package good holds deterministic workflow code, activities that do
// I/O, and helpers no workflow reaches: nothing here is reported.
package good

import (
	"context"
	"maps"
	"math/rand"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/workflow"
)

var registry = map[string]int{}

// Fetch is an activity: it may do anything.
var Fetch = workflow.NewActivity("fetch", fetch)

func fetch(ctx context.Context, url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	_ = os.Getenv("TOKEN")
	_ = time.Now()
	registry[url]++
	return resp.Status, nil
}

// activityHelper takes a context.Context: an activity, not followed.
func activityHelper(ctx context.Context) int { return rand.Int() }

// unreachable is called by no workflow.
func unreachable() { // want unreachable:"reaches \\(\\*sync.Mutex\\).Lock at good.go:41"
	var mu sync.Mutex
	mu.Lock()
	go func() {}()
	registry["x"] = 1
}

func init() {
	registry["boot"] = 1
	unreachable()
	_ = activityHelper(context.Background())
}

// Order uses the workflow API for time, randomness, sleeping and fan-out,
// and sorts map keys.
func Order(ctx workflow.Context, in map[string]int) (int, error) {
	now := workflow.Now(ctx)
	_ = now.Add(time.Hour)
	if err := workflow.Sleep(ctx, time.Minute); err != nil {
		return 0, err
	}
	sum := 0
	for _, k := range slices.Sorted(maps.Keys(in)) {
		sum += in[k]
	}
	keys := make([]string, 0, len(in))
	for k := range in { //heph:nondeterministic-ok the keys are sorted before use
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rs := workflow.Parallel(ctx, branch, branch)
	status, err := Fetch.Execute(ctx, "http://example")
	if err != nil {
		return 0, err
	}
	local := map[string]int{}
	local["x"] = pure(len(status))
	return sum + len(rs) + int(workflow.Random(ctx)*10) + local["x"], nil
}

func branch(ctx workflow.Context) (int, error) {
	return 1, workflow.Sleep(ctx, time.Second)
}

func pure(n int) int { return n * 2 }
