package client

import (
	"context"
	"net/http"
	"time"
)

// Secret is a named secret as the API lists it: never its value.
type Secret struct {
	Name      string    `json:"name"`
	KeyID     string    `json:"key_id"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// RotateSecretsResult is what a rotation did.
type RotateSecretsResult struct {
	KeyID   string `json:"key_id"`
	Rotated int    `json:"rotated"`
	Total   int    `json:"total"`
}

// Secrets lists the secrets (names, key ids, times).
func (c *Client) Secrets(ctx context.Context) ([]Secret, *Response, error) {
	return list[Secret](ctx, c, &request{method: http.MethodGet, path: "/secrets"})
}

// SetSecret creates a secret or replaces its value.
func (c *Client) SetSecret(ctx context.Context, name, value string) (*Secret, *Response, error) {
	return call[Secret](ctx, c, &request{method: http.MethodPut, path: "/secrets/" + seg(name), body: map[string]string{"value": value}})
}

// DeleteSecret deletes a secret.
func (c *Client) DeleteSecret(ctx context.Context, name string) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodDelete, path: "/secrets/" + seg(name)})
}

// RotateSecrets seals every secret again with the server's current key.
func (c *Client) RotateSecrets(ctx context.Context) (*RotateSecretsResult, *Response, error) {
	return call[RotateSecretsResult](ctx, c, &request{method: http.MethodPost, path: "/secrets/rotate", body: struct{}{}})
}
