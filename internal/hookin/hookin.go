// Package hookin takes webhooks in: it checks that a request to a hook
// endpoint was sent by who holds the hook's secret (an HMAC-SHA256
// signature in the GitHub, Stripe or Hephaestus convention, or a bearer
// secret) before anything of it is trusted, and maps a verified request
// to an event: its name, its id (the sender's delivery id, so that a
// redelivery is the same event) and its data (the JSON body).
//
// It reads nothing and stores nothing: the server reads the body (bounded)
// and sends the event. docs/events.md describes the schemes.
package hookin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/notify"
)

// The signature schemes.
const (
	// SchemeGitHub: X-Hub-Signature-256 holds "sha256=" and the hex
	// HMAC-SHA256 of the body; X-GitHub-Event names the event and
	// X-GitHub-Delivery is its id. GitHub signs no timestamp, so a replay
	// is caught by the delivery id only: it is the same event.
	SchemeGitHub = "github"
	// SchemeStripe: Stripe-Signature holds "t=<unix seconds>" and one or
	// more "v1=<hex HMAC-SHA256 of "<t>.<body>">"; t must be within the
	// tolerance of now. The body's "type" names the event and its "id"
	// is the event's id.
	SchemeStripe = "stripe"
	// SchemeHMAC: the convention of Hephaestus's own webhooks
	// (Heph-Timestamp, Heph-Signature "v1=<hex HMAC-SHA256 of
	// "<timestamp>.<body>">", Heph-Delivery-Id, Heph-Event): one
	// Hephaestus server can take another's notifications in.
	SchemeHMAC = "hmac"
	// SchemeBearer: Authorization is "Bearer <secret>". The optional
	// Idempotency-Key header is the event's id.
	SchemeBearer = "bearer"
)

// Schemes lists the schemes, in the order the documentation gives them.
var Schemes = []string{SchemeGitHub, SchemeStripe, SchemeHMAC, SchemeBearer}

// DefaultTolerance is how far a signed timestamp may be from now.
const DefaultTolerance = 5 * time.Minute

// MinSecretBytes is the shortest secret a hook accepts.
const MinSecretBytes = 16

// The reasons a request is refused, the values of the refused counter's
// reason attribute.
const (
	ReasonUnknownHook = "unknown_hook"
	ReasonMissing     = "missing_signature"
	ReasonForged      = "bad_signature"
	ReasonExpired     = "expired"
	ReasonTooLarge    = "too_large"
	ReasonBadBody     = "bad_body"
	ReasonBadEvent    = "bad_event"
)

// Hook configures one endpoint, POST /hooks/<Name>.
type Hook struct {
	Name   string
	Scheme string
	Secret string
	// Event names the events of this hook; when empty, the name is
	// derived from the request (see EventName).
	Event string
	// Tolerance bounds the age of a signed timestamp (stripe, hmac).
	// Defaults to DefaultTolerance.
	Tolerance time.Duration
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Check says what is wrong with h, naming the field.
func (h *Hook) Check() error {
	if !namePattern.MatchString(h.Name) {
		return fmt.Errorf("name %q: want 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", h.Name)
	}
	switch h.Scheme {
	case SchemeGitHub, SchemeStripe, SchemeHMAC, SchemeBearer:
	case "":
		return fmt.Errorf("scheme is required: one of %s", strings.Join(Schemes, ", "))
	default:
		return fmt.Errorf("scheme %q: want one of %s", h.Scheme, strings.Join(Schemes, ", "))
	}
	if len(h.Secret) < MinSecretBytes {
		return fmt.Errorf("secret: %d bytes, want at least %d", len(h.Secret), MinSecretBytes)
	}
	if h.Tolerance < 0 {
		return fmt.Errorf("tolerance %v: must not be negative", h.Tolerance)
	}
	return nil
}

// Refusal is why a request was not taken: Reason is one of the Reason
// constants, Message says what is wrong without quoting the body.
type Refusal struct {
	Reason  string
	Message string
}

func (r *Refusal) Error() string { return r.Message }

func refuse(reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Verify checks that the request (its headers and its body as received)
// was signed with the hook's secret, now. It returns a *Refusal.
func (h *Hook) Verify(hd http.Header, body []byte, now time.Time) error {
	switch h.Scheme {
	case SchemeGitHub:
		return verifyGitHub(h.Secret, hd.Get("X-Hub-Signature-256"), body)
	case SchemeStripe:
		return verifyStripe(h.Secret, hd.Get("Stripe-Signature"), body, now, h.tolerance())
	case SchemeHMAC:
		ts, sig := hd.Get(notify.HeaderTimestamp), hd.Get(notify.HeaderSignature)
		if ts == "" || sig == "" {
			return refuse(ReasonMissing, "the %s and %s headers are required", notify.HeaderTimestamp, notify.HeaderSignature)
		}
		if err := checkAge(ts, now, h.tolerance()); err != nil {
			return err
		}
		if err := notify.Verify(h.Secret, ts, sig, body, now, h.tolerance()); err != nil {
			return refuse(ReasonForged, "no signature in %s matches the body", notify.HeaderSignature)
		}
		return nil
	case SchemeBearer:
		tok, ok := strings.CutPrefix(hd.Get("Authorization"), "Bearer ")
		if !ok || tok == "" {
			return refuse(ReasonMissing, "the Authorization header must be \"Bearer <secret>\"")
		}
		if subtle.ConstantTimeCompare([]byte(tok), []byte(h.Secret)) != 1 {
			return refuse(ReasonForged, "the bearer secret does not match")
		}
		return nil
	}
	return refuse(ReasonForged, "hook %s has no scheme", h.Name)
}

func (h *Hook) tolerance() time.Duration {
	if h.Tolerance > 0 {
		return h.Tolerance
	}
	return DefaultTolerance
}

func mac(secret string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func verifyGitHub(secret, header string, body []byte) error {
	if header == "" {
		return refuse(ReasonMissing, "the X-Hub-Signature-256 header is required")
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !ok || err != nil {
		return refuse(ReasonForged, "X-Hub-Signature-256 must be \"sha256=<hex>\"")
	}
	if !hmac.Equal(got, mac(secret, body)) {
		return refuse(ReasonForged, "X-Hub-Signature-256 does not match the body")
	}
	return nil
}

func verifyStripe(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if header == "" {
		return refuse(ReasonMissing, "the Stripe-Signature header is required")
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" || len(sigs) == 0 {
		return refuse(ReasonMissing, "Stripe-Signature must hold t=<timestamp> and v1=<signature>")
	}
	if err := checkAge(ts, now, tolerance); err != nil {
		return err
	}
	want := mac(secret, []byte(ts), []byte{'.'}, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return refuse(ReasonForged, "no v1 signature in Stripe-Signature matches the body")
}

func checkAge(ts string, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return refuse(ReasonMissing, "the signed timestamp %q is not Unix seconds", ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return refuse(ReasonExpired, "the signed timestamp is %v away from now, more than the tolerance %v", d.Round(time.Second), tolerance)
	}
	return nil
}

// Event is what a verified request maps to.
type Event struct {
	Name string
	// ID is "<hook>:<the sender's delivery id>", or "" when the request
	// carries none (the event then gets a fresh id).
	ID   string
	Data json.RawMessage
}

// Map turns a verified request into its event. The body must be JSON
// (application/json); it returns a *Refusal otherwise.
func (h *Hook) Map(hd http.Header, body []byte) (*Event, error) {
	if ct := hd.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, refuse(ReasonBadBody, "Content-Type %q: the body must be application/json (for GitHub, set the webhook's content type to application/json)", ct)
		}
	}
	if !json.Valid(body) {
		return nil, refuse(ReasonBadBody, "the body is not valid JSON")
	}
	e := &Event{Data: json.RawMessage(body)}
	var id, suffix string
	switch h.Scheme {
	case SchemeGitHub:
		id, suffix = hd.Get("X-GitHub-Delivery"), hd.Get("X-GitHub-Event")
		if suffix == "" {
			return nil, refuse(ReasonBadEvent, "the X-GitHub-Event header is required")
		}
	case SchemeStripe:
		var b struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal(body, &b); err != nil || b.Type == "" {
			return nil, refuse(ReasonBadEvent, "a Stripe event must be an object with a \"type\"")
		}
		id, suffix = b.ID, b.Type
	case SchemeHMAC:
		id, suffix = hd.Get(notify.HeaderID), hd.Get(notify.HeaderEvent)
	case SchemeBearer:
		id = hd.Get("Idempotency-Key")
	}
	e.Name = h.EventName(suffix)
	if id != "" {
		e.ID = h.Name + ":" + id
	}
	return e, nil
}

// EventName is the name of the hook's event of the request's own kind
// suffix (the GitHub event, the Stripe type, the Heph-Event): Event when
// set, else "<hook name>.<suffix>", or the hook's name without a suffix.
func (h *Hook) EventName(suffix string) string {
	switch {
	case h.Event != "":
		return h.Event
	case suffix != "":
		return h.Name + "." + suffix
	}
	return h.Name
}
