// Package bad holds workflow code that breaks replay: every finding is
// marked with the diagnostic it must produce.
package bad

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"fmt"
	"io/ioutil"
	"log"
	"maps"
	"math/rand"
	randv2 "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var counter int

var cache = map[string]int{}

type config struct{ limit int }

var settings config

// Clock: every function of package time that reads or waits on the clock.
func Clock(ctx workflow.Context, d time.Duration) (time.Time, error) {
	start := time.Now()   // want `time.Now in workflow code: use workflow.Now\(ctx\)`
	_ = time.Since(start) // want `time.Since in workflow code: compute it from workflow.Now\(ctx\)`
	_ = time.Until(start) // want `time.Until in workflow code`
	time.Sleep(d)         // want `time.Sleep in workflow code: use workflow.Sleep\(ctx, d\)`
	<-time.After(d)       // want `time.After in workflow code` `channel receive in workflow code`
	_ = time.Tick(d)      // want `time.Tick in workflow code`
	t := time.NewTimer(d) // want `time.NewTimer in workflow code: use workflow.Sleep\(ctx, d\), or workflow.PhaseWithTimeout`
	t.Stop()
	_ = time.NewTicker(d)      // want `time.NewTicker in workflow code`
	_ = time.AfterFunc(d, nil) // want `time.AfterFunc in workflow code`
	_ = start.Add(d)           // methods of time.Time are fine
	return start.Truncate(d), nil
}

// Randomness: math/rand, math/rand/v2, crypto/rand, uuid.New.
func Randomness(ctx workflow.Context, _ struct{}) (int, error) {
	n := rand.Intn(10)   // want `math/rand.Intn in workflow code: use workflow.Random\(ctx\) or workflow.UUID\(ctx\)`
	n += randv2.IntN(10) // want `math/rand/v2.IntN in workflow code: use workflow.Random`
	b := make([]byte, 8)
	_, _ = crand.Read(b)             // want `crypto/rand.Read in workflow code: use workflow.Random`
	_ = uuid.New()                   // want `github.com/google/uuid.New in workflow code: use workflow.UUID\(ctx\)`
	_, _ = uuid.Parse("x")           // parsing is fine
	r := rand.New(rand.NewSource(1)) // want `math/rand.New in workflow code` `math/rand.NewSource in workflow code`
	return n + r.Intn(3), nil        // want `\(\*math/rand.Rand\).Intn in workflow code`
}

// Concurrency: goroutines, channels, select, sync.
func Concurrency(ctx workflow.Context, _ struct{}) (int, error) {
	ch := make(chan int, 1)
	go func() { ch <- 1 }() // want `go statement in workflow code: use workflow.Parallel` `channel send in workflow code`
	select {                // want `select statement in workflow code: the workflow API has no channels`
	case v := <-ch: // want `channel receive in workflow code`
		_ = v
	default:
	}
	for v := range ch { // want `range over a channel in workflow code`
		_ = v
	}
	var mu sync.Mutex
	mu.Lock()   // want `\(\*sync.Mutex\).Lock in workflow code: workflow code runs one piece at a time`
	mu.Unlock() // want `\(\*sync.Mutex\).Unlock in workflow code`
	var n atomic.Int64
	n.Add(1) // want `\(\*sync/atomic.Int64\).Add in workflow code`
	return 0, nil
}

// Maps: ranging over a map, or over an iterator of its keys.
func Maps(ctx workflow.Context, in map[string]int) (int, error) {
	sum := 0
	for k, v := range in { // want `range over a map in workflow code: map order is random: range over sorted keys`
		_ = k
		sum += v
	}
	for k := range maps.Keys(in) { // want `range over maps.Keys in workflow code`
		_ = k
	}
	return sum, nil
}

// Globals: writes to package variables, their fields and elements.
func Globals(ctx workflow.Context, in int) (int, error) {
	counter = in        // want `write to package variable counter in workflow code: a package variable is shared by every run`
	counter++           // want `write to package variable counter in workflow code`
	cache["k"] = in     // want `write to package variable cache in workflow code`
	settings.limit = in // want `write to package variable settings in workflow code`
	local := counter    // reading one is not reported
	local++
	return local, nil
}

// IO: files, processes, the network, databases, the environment, output.
func IO(ctx workflow.Context, path string) (string, error) {
	data, err := os.ReadFile(path) // want `os.ReadFile \(I/O\) in workflow code: do it in an activity`
	_, _ = ioutil.ReadAll(nil)     // want `io/ioutil.ReadAll \(I/O\) in workflow code`
	_ = os.Getenv("HOME")          // want `os.Getenv \(reads the environment\) in workflow code: pass the value in the workflow's input`
	_ = exec.Command("ls")         // want `os/exec.Command \(I/O\) in workflow code`
	_, _ = http.Get("http://x")    // want `net/http.Get \(I/O\) in workflow code`
	_, _ = net.Dial("tcp", "x:1")  // want `net.Dial \(I/O\) in workflow code`
	_, _ = sql.Open("x", "y")      // want `database/sql.Open \(I/O\) in workflow code`
	_ = os.Args                    // want `os.Args \(I/O\) in workflow code`
	fmt.Println("hi")              // want `fmt.Println \(writes to the process's output\) in workflow code: use workflow.Logger\(ctx\)`
	log.Printf("hi")               // want `log.Printf \(writes to the process's output\) in workflow code`
	_ = fmt.Sprintf("%d", 1)       // formatting is fine
	return string(data), err
}

// Helpers reached from a workflow function are workflow code; the
// message says where they were reached from.
func Reaching(ctx workflow.Context, in int) (int, error) {
	return helper(in) + (&box{}).method(), nil
}

func helper(n int) int { // want helper:"reaches math/rand.Int at bad.go:130"
	return n + deeper() + rand.Int() // want `math/rand.Int in workflow code \(in helper, reached from workflow function Reaching\)`
}

func deeper() int { // want deeper:"reaches time.Now at bad.go:134"
	return time.Now().Second() // want `time.Now in workflow code \(in deeper, reached from workflow function Reaching\)`
}

type box struct{}

func (*box) method() int { // want method:"reaches write to package variable counter at bad.go:140"
	counter = 2 // want `write to package variable counter in workflow code \(in box.method, reached from workflow function Reaching\)`
	return 0
}

// Literals: workflow functions given to workflow.New and parallel
// branches are checked; the activity literal is not.
var Lit = workflow.New("lit", func(ctx workflow.Context, in int) (int, error) {
	fetch := workflow.NewActivity("fetch", func(ctx context.Context, url string) (string, error) {
		_ = time.Now()
		resp, err := http.Get(url)
		if err != nil {
			return "", err
		}
		return resp.Status, nil
	})
	rs := workflow.Parallel(ctx, func(ctx workflow.Context) (int, error) {
		time.Sleep(time.Second) // want `time.Sleep in workflow code`
		return 1, nil
	})
	_, _ = fetch.Execute(ctx, "u")
	local := func() int { return rand.Int() } // want `math/rand.Int in workflow code`
	return len(rs) + local(), nil
})

// Suppression: a directive with a reason silences its line and the next;
// one without a reason silences nothing and is reported.
func Suppressed(ctx workflow.Context, _ struct{}) (string, error) {
	_ = os.Getpagesize() //heph:nondeterministic-ok the page size is fixed for the fleet

	//heph:nondeterministic-ok the page size is fixed for the fleet
	_ = os.Getpagesize()

	// want +1 `//heph:nondeterministic-ok needs a reason after it`
	//heph:nondeterministic-ok
	_ = os.Getpagesize() // want `os.Getpagesize \(I/O\) in workflow code`

	//heph:nondeterministic-okay is another word, not the directive
	_ = os.Getpagesize() // want `os.Getpagesize \(I/O\) in workflow code`
	return "", nil
}

// A directive on a call of a helper accepts what the helper does: the
// helper is not followed.
func CallSuppressed(ctx workflow.Context, _ struct{}) (int, error) {
	//heph:nondeterministic-ok test instrumentation: slows the first activation only
	slow()
	return 0, nil
}

func slow() { time.Sleep(time.Second) } // want slow:"reaches time.Sleep at bad.go:189"
