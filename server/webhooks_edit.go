package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/hephaestus-go/hephaestus"
)

// webhookEditable are the fields PATCH /webhooks/{id} changes.
var webhookEditable = []string{"url", "events", "workflows", "tags", "format", "enabled"}

// editWebhook applies a JSON merge patch of the editable fields: a field
// left out keeps its value; null removes the workflows or tags filter
// (the other fields cannot be removed).
func (s *Server) editWebhook(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	var patch map[string]json.RawMessage
	if err := c.decode(&patch, false); err != nil {
		return err
	}
	if patch == nil {
		return badRequest("the request needs a JSON object as its body")
	}
	var ch hephaestus.WebhookChange
	for k, v := range patch {
		if !slices.Contains(webhookEditable, k) {
			return fieldProblem(k, "is not an editable field: use "+strings.Join(webhookEditable, ", "))
		}
		null := bytes.Equal(bytes.TrimSpace(v), []byte("null"))
		var err error
		switch k {
		case "url", "format":
			var str string
			if err = json.Unmarshal(v, &str); err == nil && !null {
				if k == "url" {
					ch.URL = &str
				} else {
					ch.Format = &str
				}
			}
		case "events", "workflows", "tags":
			var l []string
			if err = json.Unmarshal(v, &l); err == nil {
				if l == nil {
					l = []string{}
				}
				switch k {
				case "events":
					if !null {
						ch.Events = &l
					}
				case "workflows":
					ch.Workflows = &l
				default:
					ch.Tags = &l
				}
			}
		case "enabled":
			var b bool
			if err = json.Unmarshal(v, &b); err == nil && !null {
				ch.Enabled = &b
			}
		}
		switch {
		case err != nil:
			return fieldProblem(k, "has the wrong type: "+webhookFieldType(k))
		case null && k != "workflows" && k != "tags":
			return fieldProblem(k, "cannot be removed (null): give "+webhookFieldType(k))
		}
	}
	if len(patch) == 0 {
		return fieldProblem("body", "name at least one of "+strings.Join(webhookEditable, ", ")+" to change")
	}
	w, err := s.cfg.Client.EditWebhook(c.ctx(), id, &ch)
	if err != nil {
		return webhookProblem(err)
	}
	return c.json(http.StatusOK, w)
}

func webhookFieldType(field string) string {
	switch field {
	case "events", "workflows", "tags":
		return "an array of strings"
	case "enabled":
		return "true or false"
	}
	return "a string"
}

func (s *Server) enableWebhook(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	w, err := s.cfg.Client.EnableWebhook(c.ctx(), id)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, w)
}

func (s *Server) disableWebhook(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	w, err := s.cfg.Client.DisableWebhook(c.ctx(), id)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, w)
}

// rotateWebhookSecret answers the new secret once (as a CreatedWebhook); the audit entry
// (whose target is the id) does not hold it.
func (s *Server) rotateWebhookSecret(c *call) error {
	id := c.r.PathValue("id")
	c.target = id
	w, secret, err := s.cfg.Client.RotateWebhookSecret(c.ctx(), id)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, CreatedWebhook{Webhook: *w, Secret: secret})
}
