package server

import (
	"net/http"
	"time"

	"github.com/hephaestus-go/hephaestus"
)

// Secret is a named secret as the API lists it: never its value.
type Secret struct {
	Name string `json:"name"`
	// KeyID is the id of the key that sealed the value.
	KeyID     string    `json:"key_id"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// RotateSecretsResult is the answer of POST /secrets/rotate.
type RotateSecretsResult struct {
	KeyID   string `json:"key_id"`
	Rotated int    `json:"rotated"`
	Total   int    `json:"total"`
}

func secretJSON(s *hephaestus.SecretInfo) Secret {
	return Secret{Name: s.Name, KeyID: s.KeyID, CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}
}

func (s *Server) listSecrets(c *call) error {
	list, err := s.cfg.Client.ListSecrets(c.ctx())
	if err != nil {
		return err
	}
	out := make([]Secret, 0, len(list))
	for _, x := range list {
		out = append(out, secretJSON(x))
	}
	return c.json(http.StatusOK, out)
}

// putSecret sets a secret from {"value": "..."}; neither the answer nor
// the audit entry (whose target is the name) holds the value.
func (s *Server) putSecret(c *call) error {
	name := c.r.PathValue("name")
	c.target = name
	var b struct {
		Value *string `json:"value"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	if b.Value == nil {
		return fieldProblem("value", "is required")
	}
	info, err := s.cfg.Client.SetSecret(c.ctx(), name, []byte(*b.Value))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, secretJSON(info))
}

func (s *Server) deleteSecret(c *call) error {
	name := c.r.PathValue("name")
	c.target = name
	if err := s.cfg.Client.DeleteSecret(c.ctx(), name); err != nil {
		return err
	}
	c.wrote = true
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) rotateSecrets(c *call) error {
	res, err := s.cfg.Client.RotateSecrets(c.ctx())
	if err != nil {
		return err
	}
	c.target = res.KeyID
	return c.json(http.StatusOK, RotateSecretsResult{KeyID: res.KeyID, Rotated: res.Rotated, Total: res.Total})
}
