// Package steplog keeps what step code logs: a slog handler per attempt
// (of a step, a map element or an activity) that buffers records, with
// secrets redacted, for the worker to store (store.StepLogs) at its
// heartbeats and before the attempt's outcome commits, and passes them on
// to the process's logger as well.
package steplog

import (
	"log/slog"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hephaestus-go/hephaestus/store"
)

// MinLevel is the lowest level stored: debug records go to the process's
// logger only (when it is enabled for them).
const MinLevel = slog.LevelInfo

// Redacted replaces a secret in a stored or passed-on record.
const Redacted = "[redacted]"

// Attempt names whose log a buffer keeps.
type Attempt struct {
	RunID   string
	Step    string
	Index   int
	Attempt int
	Worker  string
}

// Buffer holds an attempt's records until they are stored: at most
// store.MaxLogBytesPerAttempt of them; beyond, the oldest go and the next
// drain starts with a marker that counts them.
type Buffer struct {
	at Attempt

	mu      sync.Mutex
	recs    []store.LogRecord
	bytes   int
	dropped int
	secrets []string
}

// NewBuffer returns the buffer of an attempt.
func NewBuffer(a Attempt) *Buffer {
	if a.Index < 0 {
		a.Index = 0
	}
	return &Buffer{at: a}
}

// AddSecret makes every later record replace value (as it is and as JSON
// escapes it) with [redacted]. Values shorter than 4 bytes are ignored:
// they would redact common words.
func (b *Buffer) AddSecret(value string) {
	if len(value) < 4 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.secrets {
		if s == value {
			return
		}
	}
	b.secrets = append(b.secrets, value)
}

// redact replaces the secrets in s.
func (b *Buffer) redact(s string) string {
	b.mu.Lock()
	secrets := b.secrets
	b.mu.Unlock()
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, Redacted)
		if j := jsonEscape(v); j != v {
			s = strings.ReplaceAll(s, j, Redacted)
		}
	}
	return s
}

// add buffers a record of the attempt.
func (b *Buffer) add(r store.LogRecord) {
	r.RunID, r.Step, r.Index, r.Attempt, r.Worker = b.at.RunID, b.at.Step, b.at.Index, b.at.Attempt, b.at.Worker
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recs = append(b.recs, r)
	b.bytes += r.Size()
	b.trimLocked()
}

func (b *Buffer) trimLocked() {
	n := 0
	for b.bytes > store.MaxLogBytesPerAttempt && n < len(b.recs)-1 {
		b.bytes -= b.recs[n].Size()
		b.dropped += max(b.recs[n].Dropped, 1)
		n++
	}
	if n > 0 {
		b.recs = append(b.recs[:0], b.recs[n:]...)
	}
}

// Drain returns the buffered records (a marker first when some were
// dropped) and empties the buffer.
func (b *Buffer) Drain() []store.LogRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.recs) == 0 && b.dropped == 0 {
		return nil
	}
	var out []store.LogRecord
	if b.dropped > 0 {
		m := store.LogRecord{RunID: b.at.RunID, Step: b.at.Step, Index: b.at.Index, Attempt: b.at.Attempt, Worker: b.at.Worker,
			Level: slog.LevelWarn, Message: store.MarkerMessage(b.dropped), Dropped: b.dropped}
		if len(b.recs) > 0 {
			m.Time = b.recs[0].Time
		}
		out = append(out, m)
	}
	out = append(out, b.recs...)
	b.recs, b.bytes, b.dropped = nil, 0, 0
	if out[0].Time.IsZero() {
		return nil // a marker alone, of records never timed: nothing to say
	}
	return out
}

// Requeue puts back records a failed write returned, before those
// buffered since (the bound still applies).
func (b *Buffer) Requeue(rs []store.LogRecord) {
	if len(rs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if rs[0].Dropped > 0 {
		b.dropped += rs[0].Dropped
		rs = rs[1:]
	}
	for _, r := range rs {
		b.bytes += r.Size()
	}
	b.recs = append(append([]store.LogRecord{}, rs...), b.recs...)
	b.trimLocked()
}

// Logger returns the attempt's logger: records at MinLevel and above are
// buffered, and every record also goes to base (the process's logger,
// with the attempt's run, step and attempt), when base is enabled for it.
//
// It costs little until it is used: the process logger's handler with
// the attempt's attributes is made at the first record.
func (b *Buffer) Logger(base *slog.Logger) *slog.Logger {
	h := &handler{buf: b}
	if base != nil {
		h.root = &lazyBase{make: func() slog.Handler {
			return base.With(slog.String("run", b.at.RunID), slog.String("step", b.at.Step), slog.Int("attempt", b.at.Attempt)).Handler()
		}}
	}
	return slog.New(h)
}

// lazyBase makes the process logger's handler of an attempt once.
type lazyBase struct {
	once sync.Once
	make func() slog.Handler
	h    slog.Handler
}

func (l *lazyBase) get() slog.Handler {
	l.once.Do(func() { l.h = l.make() })
	return l.h
}

// Empty reports whether nothing waits in the buffer.
func (b *Buffer) Empty() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.recs) == 0 && b.dropped == 0
}

// Size limits of one record as the handler stores it.
const (
	maxMessage = 8 << 10
	maxAttrs   = store.MaxLogRecordBytes - maxMessage
)

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…[truncated]"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// secretKey reports an attribute key that names a secret: its value is
// replaced whatever it is.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	for _, w := range []string{"password", "passwd", "secret", "token", "authorization", "api_key", "apikey", "cookie"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}
