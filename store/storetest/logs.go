package storetest

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// rec is a record of attempt (step, 0, attempt) of run at +d.
func rec(run, step string, attempt int, d time.Duration, level slog.Level, msg string) store.LogRecord {
	return store.LogRecord{RunID: run, Step: step, Attempt: attempt, Worker: "w1", Time: at(d), Level: level, Message: msg}
}

func (h *harness) appendLogs(rs ...store.LogRecord) {
	h.t.Helper()
	if err := h.s.AppendLogs(h.t.Context(), &store.AppendLogsParams{Records: rs}); err != nil {
		h.t.Fatalf("AppendLogs: %v", err)
	}
}

func (h *harness) logs(p store.LogsParams) []store.LogRecord {
	h.t.Helper()
	rs, err := h.s.Logs(h.t.Context(), &p)
	if err != nil {
		h.t.Fatalf("Logs(%+v): %v", p, err)
	}
	return rs
}

func messages(rs []store.LogRecord) []string {
	out := []string{}
	for _, r := range rs {
		if r.Dropped > 0 {
			out = append(out, fmt.Sprintf("[dropped %d]", r.Dropped))
			continue
		}
		out = append(out, r.Message)
	}
	return out
}

func testLogs(t *testing.T, h *harness) {
	h.create(at(0), newRun("r1"), newRun("r2"))
	a := rec("r1", "a", 1, time.Second, slog.LevelInfo, "a1 starts")
	a.Attrs = raw(`{"order":42,"who":{"name":"ann"}}`)
	h.appendLogs(a, rec("r1", "a", 1, 2*time.Second, slog.LevelDebug, "a1 detail"), rec("r2", "x", 1, time.Second, slog.LevelInfo, "other run"),
		rec("nope", "a", 1, time.Second, slog.LevelInfo, "of no run"))
	b := rec("r1", "b", 2, 3*time.Second, slog.LevelError, "b2 fails")
	b.Index = 3
	h.appendLogs(rec("r1", "a", 2, 3*time.Second, slog.LevelWarn, "a2 retries"), b)

	all := h.logs(store.LogsParams{RunID: "r1"})
	want := []store.LogRecord{a, rec("r1", "a", 1, 2*time.Second, slog.LevelDebug, "a1 detail"), rec("r1", "a", 2, 3*time.Second, slog.LevelWarn, "a2 retries"), b}
	for i := range want {
		want[i].Seq = int64(i + 1)
	}
	diff(t, "the run's log, in order", want, all)
	diff(t, "step a", []string{"a1 starts", "a1 detail", "a2 retries"}, messages(h.logs(store.LogsParams{RunID: "r1", Step: "a"})))
	diff(t, "step a attempt 2", []string{"a2 retries"}, messages(h.logs(store.LogsParams{RunID: "r1", Step: "a", Attempt: 2})))
	three, zero := 3, 0
	diff(t, "element 3", []string{"b2 fails"}, messages(h.logs(store.LogsParams{RunID: "r1", Index: &three})))
	diff(t, "element 0", []string{"a1 starts", "a1 detail", "a2 retries"}, messages(h.logs(store.LogsParams{RunID: "r1", Index: &zero})))
	warn := slog.LevelWarn
	diff(t, "warnings and above", []string{"a2 retries", "b2 fails"}, messages(h.logs(store.LogsParams{RunID: "r1", MinLevel: &warn})))
	diff(t, "after the cursor", []string{"a2 retries", "b2 fails"}, messages(h.logs(store.LogsParams{RunID: "r1", After: 2})))
	diff(t, "limited", []string{"a1 starts"}, messages(h.logs(store.LogsParams{RunID: "r1", Limit: 1})))
	diff(t, "the other run", []string{"other run"}, messages(h.logs(store.LogsParams{RunID: "r2"})))

	if _, err := h.s.Logs(t.Context(), &store.LogsParams{RunID: "nope"}); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("Logs of no run = %v, want ErrRunNotFound", err)
	}
	for name, r := range map[string]store.LogRecord{
		"no step":       rec("r1", "", 1, 0, 0, "m"),
		"attempt 0":     rec("r1", "a", 0, 0, 0, "m"),
		"too large":     rec("r1", "a", 1, 0, 0, strings.Repeat("x", store.MaxLogRecordBytes+1)),
		"attrs no JSON": {RunID: "r1", Step: "a", Attempt: 1, Time: at(0), Attrs: raw(`[1]`)},
	} {
		err := h.s.AppendLogs(t.Context(), &store.AppendLogsParams{Records: []store.LogRecord{rec("r1", "a", 1, 0, 0, "good"), r}})
		if !errors.Is(err, hephtype.ErrInvalidInput) || !strings.Contains(err.Error(), "record 1") {
			t.Errorf("%s: AppendLogs = %v, want ErrInvalidInput naming record 1", name, err)
		}
	}
	diff(t, "nothing written by refused appends", 4, len(h.logs(store.LogsParams{RunID: "r1"})))

	// Pruned with the run.
	h.mustUpdate(at(time.Minute), "r1", nil, &store.Update{Status: hephtype.StatusCompleted})
	if n, err := h.s.PruneRuns(t.Context(), &store.PruneParams{FinishedBefore: at(time.Hour)}); err != nil || n != 1 {
		t.Fatalf("PruneRuns = %d, %v", n, err)
	}
	if _, err := h.s.Logs(t.Context(), &store.LogsParams{RunID: "r1"}); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("Logs of a pruned run = %v, want ErrRunNotFound", err)
	}
	h.create(at(2*time.Hour), newRun("r1"))
	diff(t, "a new run of the same id starts with an empty log", []string{}, messages(h.logs(store.LogsParams{RunID: "r1"})))
}

// kib is a record whose message is n KiB.
func kib(run, step string, attempt, i, n int) store.LogRecord {
	m := fmt.Sprintf("%s#%d:%d ", step, attempt, i)
	return rec(run, step, attempt, time.Duration(i)*time.Millisecond, slog.LevelInfo, m+strings.Repeat("x", n<<10-len(m)))
}

func testLogBounds(t *testing.T, h *harness) {
	h.create(at(0), newRun("r"))
	// 100 records of 1 KiB in one attempt, in batches: the newest 64 stay.
	for i := 0; i < 100; i += 10 {
		var batch []store.LogRecord
		for j := i; j < i+10; j++ {
			batch = append(batch, kib("r", "a", 1, j, 1))
		}
		h.appendLogs(batch...)
	}
	// Another attempt keeps its own.
	h.appendLogs(kib("r", "a", 2, 0, 1))
	got := h.logs(store.LogsParams{RunID: "r", Step: "a", Attempt: 1})
	if len(got) != 65 || got[0].Dropped != 36 {
		t.Fatalf("attempt 1 after 100 KiB: %d records, first %+v; want a marker of 36 dropped and the newest 64", len(got), got[0].Message)
	}
	if got[0].Level != slog.LevelWarn || !strings.Contains(got[0].Message, "36 earlier log records") {
		t.Errorf("marker = %v %q", got[0].Level, got[0].Message)
	}
	if !strings.HasPrefix(got[1].Message, "a#1:36 ") || !strings.HasPrefix(got[64].Message, "a#1:99 ") {
		t.Errorf("kept %q … %q, want records 36 to 99", got[1].Message[:8], got[64].Message[:8])
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Fatalf("records out of order at %d", i)
		}
	}
	diff(t, "attempt 2", 1, len(h.logs(store.LogsParams{RunID: "r", Step: "a", Attempt: 2})))

	// The run: 20 attempts of 60 KiB (1200 KiB) keep the newest 1 MiB.
	h.create(at(0), newRun("big"))
	for a := 1; a <= 20; a++ {
		var batch []store.LogRecord
		for i := range 4 {
			batch = append(batch, kib("big", "s", a, i, 15))
		}
		h.appendLogs(batch...)
	}
	all := h.logs(store.LogsParams{RunID: "big"})
	size, dropped := 0, 0
	for _, r := range all {
		size += r.Size()
		dropped += r.Dropped
	}
	if size > store.MaxLogBytesPerRun || size < store.MaxLogBytesPerRun-15<<10 {
		t.Errorf("the run keeps %d bytes, want at most %d and within a record of it", size, store.MaxLogBytesPerRun)
	}
	if dropped != 80-(len(all)-countMarkers(all)) {
		t.Errorf("markers count %d dropped; %d records of 80 are kept", dropped, len(all)-countMarkers(all))
	}
	if all[0].Dropped == 0 || all[0].Attempt != 1 {
		t.Errorf("first record %+v, want the marker of attempt 1", all[0].Message)
	}
	last := h.logs(store.LogsParams{RunID: "big", Attempt: 20})
	diff(t, "the newest attempt is whole", 4, len(last))
}

func countMarkers(rs []store.LogRecord) int {
	n := 0
	for _, r := range rs {
		if r.Dropped > 0 {
			n++
		}
	}
	return n
}
