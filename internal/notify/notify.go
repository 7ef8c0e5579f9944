// Package notify delivers webhook notifications: it turns the events the
// store captured (in the commit that appended them to a run's history)
// into one delivery per matching webhook, and sends the deliveries at
// least once, signed, with retries and exponential backoff, under leases
// that let another process take over those of a process that died.
//
// The outbox is durable end to end: an event is captured in the same
// transaction as the state change that caused it (a trigger of the
// store); a dispatch inserts its deliveries and deletes it in one
// transaction, with delivery ids derived from (webhook, event), so a
// dispatch repeated after a crash adds nothing; a delivery is leased
// before it is sent and its attempt recorded under that lease, so a
// sender that dies between the send and the record leaves a delivery
// that is sent again once its lease ends. The receiver sees the same
// delivery id on every attempt and de-duplicates with it.
package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Config configures a Service. Store and Secret are required.
type Config struct {
	// Store keeps the webhooks and deliveries.
	Store store.Webhooks
	// History reads a run's history after an entry (to tell a step's
	// last failure from one it retries). Nil: every failure is reported.
	History func(ctx context.Context, p *store.HistoryParams) ([]store.Event, error)
	// Secret returns a webhook's signing secret (opening it when sealed).
	Secret func(w *store.Webhook) (string, error)
	Clock  clock.Clock
	Logger *slog.Logger
	// Owner names this sender in the leases.
	Owner string
	// HTTPClient sends the deliveries. Defaults to a client that follows
	// no redirect, with Timeout.
	HTTPClient *http.Client
	// Timeout bounds one attempt. Defaults to 10 seconds.
	Timeout time.Duration
	// MaxAttempts is how many attempts a delivery gets before it is dead.
	// Defaults to 10.
	MaxAttempts int
	// Backoff is the wait after the first failed attempt, doubled after
	// each further one up to MaxBackoff. Default 2 minutes and 4 hours:
	// 10 attempts span about 17 hours.
	Backoff, MaxBackoff time.Duration
	// PollInterval is how often the loop looks for events and due
	// deliveries. Defaults to 1 second.
	PollInterval time.Duration
	// LeaseFor is how long a claimed delivery is leased. Defaults to
	// Timeout plus 1 minute.
	LeaseFor time.Duration
	// Retention is how long delivered and dead deliveries are kept.
	// Defaults to 7 days.
	Retention time.Duration
	// Batch is how many events a dispatch and deliveries a claim take.
	// Defaults to 32.
	Batch int
}

func (c *Config) withDefaults() {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Owner == "" {
		c.Owner = "notify"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Timeout, 10*time.Second)
	def(&c.Backoff, 2*time.Minute)
	def(&c.MaxBackoff, 4*time.Hour)
	def(&c.PollInterval, time.Second)
	def(&c.LeaseFor, c.Timeout+time.Minute)
	def(&c.Retention, 7*24*time.Hour)
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 10
	}
	if c.Batch <= 0 {
		c.Batch = 32
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{
			Timeout:       c.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
}

// Service dispatches and sends webhook deliveries.
type Service struct {
	cfg  Config
	wake chan struct{}

	mu   sync.Mutex
	stop context.CancelFunc
	wg   sync.WaitGroup
	// pruned is when deliveries were last pruned.
	pruned time.Time
}

// New returns a Service for cfg.
func New(cfg *Config) *Service {
	c := *cfg
	c.withDefaults()
	return &Service{cfg: c, wake: make(chan struct{}, 1)}
}

// Start starts the loop; Stop ends it. Calling Start twice is a no-op.
func (s *Service) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return
	}
	ctx, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Go(func() { s.loop(ctx) })
}

// Stop ends the loop and waits for it: an attempt in flight is abandoned
// unrecorded (its delivery is sent again when its lease ends). Safe to
// call twice and before Start.
func (s *Service) Stop() {
	s.mu.Lock()
	stop := s.stop
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
		s.wg.Wait()
		s.cfg.HTTPClient.CloseIdleConnections()
	}
}

// Wake makes the loop look for work at once.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Service) loop(ctx context.Context) {
	for {
		busy, err := s.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Error("webhooks", slog.Any("err", err))
		}
		if busy {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-s.cfg.Clock.After(s.cfg.PollInterval):
		}
	}
}

// Pass dispatches captured events, sends the due deliveries and prunes
// old ones (at most hourly); busy reports that a batch was full, so that
// more may be waiting. Without any webhook it does nothing but read the
// (empty) list of webhooks: no delivery can exist then.
func (s *Service) Pass(ctx context.Context) (busy bool, err error) {
	list, err := s.cfg.Store.ListWebhooks(ctx)
	if err != nil || len(list) == 0 {
		return false, err
	}
	n, derr := s.Dispatch(ctx, list)
	m, serr := s.Send(ctx)
	now := s.cfg.Clock.Now()
	var perr error
	if now.Sub(s.pruned) >= time.Hour {
		s.pruned = now
		_, perr = s.cfg.Store.PruneWebhookDeliveries(ctx, &store.PruneDeliveriesParams{Before: now.Add(-s.cfg.Retention)})
	}
	return n == s.cfg.Batch || m == s.cfg.Batch, errors.Join(derr, serr, perr)
}

// Dispatch turns a batch of captured events into deliveries to the
// webhooks that match them, and returns how many events it consumed.
func (s *Service) Dispatch(ctx context.Context, hooks []*store.Webhook) (int, error) {
	evs, err := s.cfg.Store.WebhookEvents(ctx, s.cfg.Batch)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	now := s.cfg.Clock.Now()
	p := &store.EnqueueDeliveriesParams{Now: now}
	for _, e := range evs {
		p.Consumed = append(p.Consumed, e.ID)
		ds, err := s.deliveries(ctx, e, hooks, now)
		if err != nil {
			return 0, err
		}
		p.Deliveries = append(p.Deliveries, ds...)
	}
	if err := s.cfg.Store.EnqueueWebhookDeliveries(ctx, p); err != nil {
		return 0, err
	}
	return len(evs), nil
}

// deliveries are those of a captured event: one per webhook that wants
// it and existed when it happened.
func (s *Service) deliveries(ctx context.Context, e *store.WebhookEvent, hooks []*store.Webhook, now time.Time) ([]*store.WebhookDelivery, error) {
	typ := TypeOf(e.Kind)
	if typ == "" {
		return nil, nil
	}
	if typ == StepFailed {
		last, err := s.lastFailure(ctx, e)
		if err != nil || !last {
			return nil, err
		}
	}
	var out []*store.WebhookDelivery
	for _, w := range hooks {
		if w.CreatedAt.After(e.At) || !Matches(w, typ, e.Workflow, e.Tags) {
			continue
		}
		id := DeliveryID(w.ID, eventKey(e))
		b, err := body(w.Format, payloadOf(id, typ, e))
		if err != nil {
			return nil, err
		}
		out = append(out, &store.WebhookDelivery{ID: id, WebhookID: w.ID, Event: typ, RunID: e.RunID, Body: b, NextAt: now})
	}
	return out, nil
}

// lastFailure reports whether a step_failed entry is the step's last
// failure: the entry after it does not retry the step.
func (s *Service) lastFailure(ctx context.Context, e *store.WebhookEvent) (bool, error) {
	if s.cfg.History == nil {
		return true, nil
	}
	next, err := s.cfg.History(ctx, &store.HistoryParams{RunID: e.RunID, AfterSeq: e.Seq, Limit: 1})
	if errors.Is(err, store.ErrRunNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return len(next) == 0 || next[0].Kind != hephtype.EventStepRetrying || next[0].Step != e.Step, nil
}

// Send claims the due deliveries, sends them concurrently and records
// each attempt; it returns how many it claimed. The webhooks are read
// after the claim, so that an attempt claimed after a secret's rotation
// (or a webhook's enabling, which the claim requires) is signed with
// the new secret. A delivery of a webhook deleted since the claim is
// left to its lease.
func (s *Service) Send(ctx context.Context) (int, error) {
	ds, err := s.cfg.Store.ClaimWebhookDeliveries(ctx, &store.ClaimDeliveriesParams{
		Owner: s.cfg.Owner, Limit: s.cfg.Batch, LeaseFor: s.cfg.LeaseFor, Now: s.cfg.Clock.Now()})
	if err != nil || len(ds) == 0 {
		return 0, err
	}
	list, err := s.cfg.Store.ListWebhooks(ctx)
	if err != nil {
		return len(ds), err
	}
	hooks := make(map[string]*store.Webhook, len(list))
	for _, w := range list {
		hooks[w.ID] = w
	}
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		if w := hooks[d.WebhookID]; w != nil {
			wg.Go(func() { errs[i] = s.attempt(ctx, w, d) })
		}
	}
	wg.Wait()
	return len(ds), errors.Join(errs...)
}

// attempt sends a delivery once and records the outcome under its lease.
// An attempt cut short by Stop is not recorded.
func (s *Service) attempt(ctx context.Context, w *store.Webhook, d *store.WebhookDelivery) error {
	start := s.cfg.Clock.Now()
	code, sendErr := s.send(ctx, w, d)
	if ctx.Err() != nil {
		return nil
	}
	end := s.cfg.Clock.Now()
	a := store.WebhookAttempt{Attempt: d.Attempts + 1, At: start, StatusCode: code, Duration: end.Sub(start)}
	status := store.DeliveryDelivered
	if sendErr != nil {
		a.Error = sendErr.Error()
		status = store.DeliveryDead
		if a.Attempt < s.cfg.MaxAttempts {
			status, a.NextAt = store.DeliveryPending, end.Add(s.backoff(a.Attempt))
		}
	}
	err := s.cfg.Store.RecordWebhookAttempt(ctx, &store.RecordAttemptParams{ID: d.ID, Owner: d.Owner, Token: d.Token, Status: status, Attempt: a})
	if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrWebhookNotFound) {
		return nil // another sender took it over, or it was deleted
	}
	if status == store.DeliveryDead {
		s.cfg.Logger.Warn("webhook delivery dead", slog.String("webhook", w.ID), slog.String("delivery", d.ID),
			slog.Int("attempts", a.Attempt), slog.String("err", a.Error))
	}
	return err
}

// backoff is the wait after the nth failed attempt.
func (s *Service) backoff(n int) time.Duration {
	d := s.cfg.Backoff
	for i := 1; i < n && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxBackoff)
}

// send posts a delivery's body, signed, and returns the status code.
func (s *Service) send(ctx context.Context, w *store.Webhook, d *store.WebhookDelivery) (int, error) {
	secret, err := s.cfg.Secret(w)
	if err != nil {
		return 0, fmt.Errorf("open the webhook's secret: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, err
	}
	ts := s.cfg.Clock.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hephaestus-webhooks/1")
	req.Header.Set(HeaderID, d.ID)
	req.Header.Set(HeaderEvent, d.Event)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(secret, ts, d.Body))
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		msg := "HTTP " + resp.Status
		if len(snippet) > 0 {
			msg += ": " + string(snippet)
		}
		return resp.StatusCode, errors.New(msg)
	}
	return resp.StatusCode, nil
}
