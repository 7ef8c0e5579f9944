package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/hephaestus-go/hephaestus"
)

// NewWebhook is the body of POST /webhooks.
type NewWebhook struct {
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	Workflows []string `json:"workflows,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	// Format is "json" (the default) or "slack".
	Format string `json:"format,omitempty"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
}

// CreatedWebhook is the answer of POST /webhooks: the webhook and its
// signing secret, which no later answer holds.
type CreatedWebhook struct {
	hephaestus.Webhook
	Secret string `json:"secret"`
}

// webhookProblem maps a webhook input error to a 400 naming its field.
func webhookProblem(err error) error {
	var fe *hephaestus.WebhookInputError
	if errors.As(err, &fe) {
		return fieldProblem(fe.Field, fe.Message)
	}
	return err
}

// createWebhook creates a webhook; the caller (never the body) is its
// creator. The answer holds the secret; the audit entry (whose target is
// the id) does not.
func (s *Server) createWebhook(c *call) error {
	var b NewWebhook
	if err := c.decode(&b, false); err != nil {
		return err
	}
	w, secret, err := s.cfg.Client.CreateWebhook(c.ctx(), &hephaestus.NewWebhook{URL: b.URL, Events: b.Events, Workflows: b.Workflows,
		Tags: b.Tags, Format: b.Format, Disabled: b.Enabled != nil && !*b.Enabled, CreatedBy: c.principal()})
	if err != nil {
		return webhookProblem(err)
	}
	c.target = w.ID
	return c.json(http.StatusCreated, CreatedWebhook{Webhook: *w, Secret: secret})
}

func (s *Server) listWebhooks(c *call) error {
	list, err := s.cfg.Client.Webhooks(c.ctx())
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, list)
}

func (s *Server) getWebhook(c *call) error {
	w, err := s.cfg.Client.Webhook(c.ctx(), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, w)
}

func (s *Server) deleteWebhook(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	if err := s.cfg.Client.DeleteWebhook(c.ctx(), id); err != nil {
		return err
	}
	c.wrote = true
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// webhookDeliveries lists a webhook's delivery log: ?status=pending|
// delivered|dead&limit=n.
func (s *Server) webhookDeliveries(c *call) error {
	v := c.r.URL.Query()
	f := &hephaestus.WebhookDeliveryFilter{Status: v.Get("status")}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return paramProblem("query parameter", "limit", "must be a number from 0 to 1000")
		}
		f.Limit = n
	}
	list, err := s.cfg.Client.WebhookDeliveries(c.ctx(), c.r.PathValue("id"), f)
	if err != nil {
		var fe *hephaestus.WebhookInputError
		if errors.As(err, &fe) {
			return paramProblem("query parameter", fe.Field, fe.Message)
		}
		return err
	}
	return c.json(http.StatusOK, list)
}

func (s *Server) testWebhook(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	d, err := s.cfg.Client.TestWebhook(c.ctx(), id)
	if err != nil {
		return err
	}
	return c.json(http.StatusAccepted, d)
}
