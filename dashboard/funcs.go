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
	"ago":        ago,
	"stamp":      stamp,
	"duration":   fmtDur,
	"pretty":     prettyJSON,
	"short":      shortID,
	"tojson":     toJSON,
	"join":       strings.Join,
	"has":        hasString,
	"metaText":   metaText,
	"add":        func(a, b int) int { return a + b },
	"took":       took,
	"dict":       dict,
	"filterText": filterText,
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
		return "in " + fmtDur(-d)
	}
	return fmtDur(d) + " ago"
}

// stamp is t in UTC to the second, as the title of an "ago".
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
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
	return fmtDur(r.FinishedAt.Sub(r.CreatedAt))
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
