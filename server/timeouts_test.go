package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
)

// POST /runs with execution_timeout: the run shows its deadline; once
// the fake clock passes it, the run is failed with the condition
// timed_out and its history ends with run_timed_out. A bad duration is a
// 400 naming the field.
func TestExecutionTimeoutAPI(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		start := time.Date(2032, 5, 6, 7, 0, 0, 0, time.UTC)
		clk := clock.NewFake(start)
		st := b.open(t)
		c, err := heph.New(&heph.Config{Store: st, Clock: clk, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Register(gateFlow()); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		e := serve(t, st, c, nil)

		for _, bad := range []string{"soon", "-1h", "0s"} {
			p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: map[string]any{"name": "gate", "execution_timeout": bad}}).problem(t, http.StatusBadRequest)
			if !strings.Contains(p.Detail, "execution_timeout") {
				t.Errorf("execution_timeout %q: detail %q", bad, p.Detail)
			}
		}
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate", "execution_timeout": "1h"}, http.StatusCreated, &r)
		if r.Deadline == nil || !r.Deadline.Equal(start.Add(time.Hour)) {
			t.Fatalf("deadline %v, want %v", r.Deadline, start.Add(time.Hour))
		}
		e.waitStatus(r.ID, heph.StatusWaiting)
		clk.Advance(time.Hour)
		deadline := time.Now().Add(30 * time.Second)
		var got Run
		for {
			e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID, nil, http.StatusOK, &got)
			if got.Status == string(heph.StatusFailed) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s is %s after 30s, want failed", r.ID, got.Status)
			}
			clk.Advance(time.Second) // the sweep's next look, whenever it began to wait
			time.Sleep(20 * time.Millisecond)
		}
		if got.Condition == nil || got.Condition.Kind != heph.ConditionTimedOut || got.Error == "" {
			t.Fatalf("timed-out run: %+v", got)
		}
		var h History
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/history", nil, http.StatusOK, &h)
		var kinds []string
		for _, ev := range h.Events {
			kinds = append(kinds, ev.Kind)
		}
		want := "run_started step_scheduled step_started step_waiting step_cancelled run_timed_out"
		if strings.Join(kinds, " ") != want {
			t.Fatalf("history %v, want %s", kinds, want)
		}
	})
}
