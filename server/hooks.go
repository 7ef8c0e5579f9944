package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/internal/hookin"
)

// The signature schemes of a Hook.
const (
	// HookSchemeGitHub: X-Hub-Signature-256 is "sha256=" and the hex
	// HMAC-SHA256 of the body with the secret; the event is named
	// "<hook>.<X-GitHub-Event>" and its id is X-GitHub-Delivery.
	HookSchemeGitHub = hookin.SchemeGitHub
	// HookSchemeStripe: Stripe-Signature is "t=<unix seconds>,v1=<hex
	// HMAC-SHA256 of "<t>.<body>">"; t within the tolerance; the event is
	// named "<hook>.<type>" and its id is the body's id.
	HookSchemeStripe = hookin.SchemeStripe
	// HookSchemeHMAC: the convention of this engine's own webhooks
	// (Heph-Timestamp, Heph-Signature, Heph-Delivery-Id, Heph-Event).
	HookSchemeHMAC = hookin.SchemeHMAC
	// HookSchemeBearer: Authorization is "Bearer <secret>"; the optional
	// Idempotency-Key header is the event's id.
	HookSchemeBearer = hookin.SchemeBearer
)

// HookPrefix is the path of the webhook endpoints: POST /hooks/<name>.
const HookPrefix = "/hooks"

// Hook configures a webhook endpoint, POST /hooks/<Name>: a request is
// verified with the scheme and secret before anything of it is stored,
// then its JSON body becomes an event's data (Client.SendEvent), so that
// triggers start runs from it. A redelivery (same delivery id) is the
// same event and stores nothing.
type Hook struct {
	// Name is the endpoint's last path segment: 1 to 64 letters, digits,
	// '_', '.' or '-'.
	Name string
	// Scheme is one of the HookScheme constants.
	Scheme string
	// Secret is shared with the sender; at least 16 bytes.
	Secret string
	// Event, when set, names every event of the hook; by default the
	// name is "<Name>.<kind>", the kind from the request (the GitHub
	// event, the Stripe type, Heph-Event), or Name when it has none.
	Event string
	// Tolerance bounds how old a signed timestamp may be (stripe, hmac).
	// Defaults to 5 minutes.
	Tolerance time.Duration
}

// Check says what is wrong with the hook, naming the field.
func (h *Hook) Check() error { return h.in().Check() }

func (h *Hook) in() *hookin.Hook {
	return &hookin.Hook{Name: h.Name, Scheme: h.Scheme, Secret: h.Secret, Event: h.Event, Tolerance: h.Tolerance}
}

// hooks holds the configured endpoints and their counters.
type hooks struct {
	byName            map[string]*hookin.Hook
	accepted, refused metric.Int64Counter
	limit             int64
	logger            *slog.Logger
	now               func() time.Time
}

func newHooks(c *Config) (*hooks, error) {
	h := &hooks{byName: map[string]*hookin.Hook{}, limit: hephaestus.MaxEventDataBytes, logger: c.Logger, now: c.Clock.Now}
	for i, hk := range c.Hooks {
		in := hk.in()
		if err := in.Check(); err != nil {
			return nil, fmt.Errorf("server: Config.Hooks[%d] (%s): %w", i, hk.Name, err)
		}
		if _, dup := h.byName[hk.Name]; dup {
			return nil, fmt.Errorf("server: Config.Hooks[%d]: a hook named %q is configured twice", i, hk.Name)
		}
		h.byName[hk.Name] = in
	}
	mp := c.MeterProvider
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/hephaestus-go/hephaestus/server")
	var err error
	if h.accepted, err = m.Int64Counter("heph.hooks.accepted", metric.WithUnit("{request}"),
		metric.WithDescription("Webhook requests verified and stored as events (or found stored already), by hook.")); err != nil {
		return nil, err
	}
	if h.refused, err = m.Int64Counter("heph.hooks.refused", metric.WithUnit("{request}"),
		metric.WithDescription("Webhook requests refused before anything was stored, by hook and reason.")); err != nil {
		return nil, err
	}
	return h, nil
}

// receiveHook serves POST /hooks/{name}. The body is read (bounded) and
// verified before it is parsed; a refused request is counted and logged
// without its body.
func (s *Server) receiveHook(c *call) error {
	name := c.r.PathValue("name")
	hk := s.hooks.byName[name]
	if hk == nil {
		// Not counted by name: the name comes from the caller.
		return s.hooks.refuse(c, "", &hookin.Refusal{Reason: hookin.ReasonUnknownHook, Message: "no hook is configured at " + c.r.URL.Path})
	}
	body, err := io.ReadAll(io.LimitReader(c.r.Body, s.hooks.limit+1))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) || int64(len(body)) > s.hooks.limit {
		return s.hooks.refuse(c, name, &hookin.Refusal{Reason: hookin.ReasonTooLarge, Message: fmt.Sprintf("the body is over %d bytes", s.hooks.limit)})
	}
	if err != nil {
		return badRequest("reading the body: " + err.Error())
	}
	if err := hk.Verify(c.r.Header, body, s.hooks.now()); err != nil {
		return s.hooks.refuse(c, name, err)
	}
	e, err := hk.Map(c.r.Header, body)
	if err != nil {
		return s.hooks.refuse(c, name, err)
	}
	c.target = e.Name
	rec, err := s.cfg.Client.SendEvent(c.ctx(), e.Name, e.Data, &hephaestus.SendEventOptions{ID: e.ID})
	if err != nil {
		if errors.Is(err, hephaestus.ErrInvalidInput) {
			return s.hooks.refuse(c, name, &hookin.Refusal{Reason: hookin.ReasonBadEvent, Message: err.Error()})
		}
		return err
	}
	s.hooks.accepted.Add(c.ctx(), 1, metric.WithAttributes(attribute.String("hook", name), attribute.Bool("duplicate", rec.Duplicate)))
	c.w.Header().Set("Location", Prefix+"/events/"+url.PathEscape(rec.ID))
	status := http.StatusCreated
	if rec.Duplicate {
		status = http.StatusOK
	}
	out := sentEventJSON(rec)
	out.Data = nil // the sender has it; do not echo it
	return c.json(status, out)
}

// refuse counts and logs a refused request (never its body) and returns
// its problem: 401 for a signature, 404 for an unknown hook, 413 for a
// body too large, 400 for a body that is not an event.
func (h *hooks) refuse(c *call, name string, err error) error {
	var r *hookin.Refusal
	if !errors.As(err, &r) {
		r = &hookin.Refusal{Reason: hookin.ReasonBadBody, Message: err.Error()}
	}
	h.refused.Add(c.ctx(), 1, metric.WithAttributes(attribute.String("hook", name), attribute.String("reason", r.Reason)))
	h.logger.Warn("server: webhook refused", "hook", name, "path", c.r.URL.Path, "reason", r.Reason, "detail", r.Message,
		"remote", c.r.RemoteAddr, "bytes", c.r.ContentLength)
	switch r.Reason {
	case hookin.ReasonMissing, hookin.ReasonForged, hookin.ReasonExpired:
		return &Problem{Status: http.StatusUnauthorized, Kind: kindUnauthorized, Detail: "webhook refused: " + r.Message}
	case hookin.ReasonUnknownHook:
		return &Problem{Status: http.StatusNotFound, Kind: kindNotFound, Detail: r.Message}
	case hookin.ReasonTooLarge:
		return &Problem{Status: http.StatusRequestEntityTooLarge, Kind: kindTooLarge, Detail: "webhook refused: " + r.Message}
	}
	return badRequest("webhook refused: " + r.Message)
}
