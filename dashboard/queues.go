package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/hephaestus-go/hephaestus/server"
)

// queuesData is the queues page's.
type queuesData struct {
	Queues []*queueItem
}

func (queuesData) PageTitle() string { return "Queues" }
func (queuesData) Live() bool        { return true }

// queueItem is a queue with its figures said against its limits.
type queueItem struct {
	*server.Queue
	// API is the queue's path in the API.
	API string
	// Oldest is the age of the oldest ready task; 0 with none ready.
	Oldest time.Duration
	// Concurrency is "3 of 5" (or "3" without a limit); Full when the
	// limit is reached.
	Concurrency string
	Full        bool
	// Keys is the use of each concurrency key against the per-key limit.
	Keys []keyUse
	// Rate is the starts of the current window against the rate limit
	// ("4 of 10 per 1m0s"); "" without one.
	Rate     string
	RateFull bool
}

// keyUse is a concurrency key's running tasks against its limit.
type keyUse struct {
	Key, Use string
	Full     bool
}

// queuesPage lists the queues with their depth, age and flow control.
func (d *Dashboard) queuesPage(r *http.Request) (string, any, error) {
	var list []*server.Queue
	if err := d.get(r, "/api/v1/queues", nil, &list); err != nil {
		return "", nil, err
	}
	data := &queuesData{}
	for _, q := range list {
		data.Queues = append(data.Queues, queueOf(q))
	}
	return "queues", data, nil
}

// queueOf says a queue's figures against its limits.
func queueOf(q *server.Queue) *queueItem {
	it := &queueItem{Queue: q, API: "/api/v1/queues/" + url.PathEscape(q.Name),
		Oldest: time.Duration(q.OldestReadySeconds * float64(time.Second))}
	it.Concurrency, it.Full = use(q.Running, q.Options.MaxRunning)
	for _, k := range q.RunningByKey {
		u := keyUse{Key: k.Key}
		u.Use, u.Full = use(k.Count, q.Options.MaxRunningPerKey)
		it.Keys = append(it.Keys, u)
	}
	if rl := q.Options.Rate; rl != nil && rl.Limit > 0 {
		it.Rate = fmt.Sprintf("%d of %d per %s", q.RateWindowStarts, rl.Limit, fmtDur(time.Duration(rl.Period)))
		it.RateFull = q.RateWindowStarts >= rl.Limit
	}
	return it
}

// use says n against a limit: "3 of 5", or "3" when limit is 0 (none).
func use(n, limit int) (string, bool) {
	if limit <= 0 {
		return fmt.Sprint(n), false
	}
	return fmt.Sprintf("%d of %d", n, limit), n >= limit
}
