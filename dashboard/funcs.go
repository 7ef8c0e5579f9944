package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/server"
)

// funcs are the templates' functions.
var funcs = template.FuncMap{
	"ago":      ago,
	"stamp":    stamp,
	"duration": humanDuration,
	"pretty":   prettyJSON,
	"short":    shortID,
	"tojson":   toJSON,
	"join":     strings.Join,
	"has":      hasString,
	"metaText": metaText,
	"add":      func(a, b int) int { return a + b },
	"took":     took,
	"dict":     dict,
	"pct": func(part, whole int) int {
		if whole <= 0 {
			return 0
		}
		return int(math.Round(100 * float64(part) / float64(whole)))
	},
}

// ago says how long ago t was, briefly ("3m ago"); "" for the zero time.
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	if d < 0 {
		return "in " + humanDuration(-d)
	}
	return humanDuration(d) + " ago"
}

// stamp is t in UTC to the second, as the title of an "ago".
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// humanDuration rounds d to what a reader needs: 850ms, 4.2s, 3m10s,
// 5h3m, 2d4h.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// prettyJSON indents JSON for a <pre>; "" for none.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// shortID is the last 8 characters of an id: the random end of a UUID
// v7, whose start is its time (and the same for runs started together).
func shortID(id string) string {
	if len(id) <= 8 {
		return id
	}
	return "…" + id[len(id)-8:]
}

// toJSON encodes v for a data-* attribute.
func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// metaText shows a metadata value: a JSON string without its quotes.
func metaText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// took is how long a finished run took; "" for one still going.
func took(r *server.Run) string {
	if r == nil || r.FinishedAt == nil {
		return ""
	}
	return humanDuration(r.FinishedAt.Sub(r.CreatedAt))
}

// dict makes a map of key, value pairs for a template.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: %d arguments, want pairs", len(kv))
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}
