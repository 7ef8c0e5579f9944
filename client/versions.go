package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// VersionRule chooses the version of new runs of a definition: pinned
// (Version), percentage (Split: version → weight) or field (Field, Map,
// Default).
type VersionRule struct {
	Type    string         `json:"type"`
	Version int            `json:"version,omitempty"`
	Split   map[int]int    `json:"split,omitempty"`
	Field   string         `json:"field,omitempty"`
	Map     map[string]int `json:"map,omitempty"`
	Default int            `json:"default,omitempty"`
}

// DefinitionVersion is one version of a definition.
type DefinitionVersion struct {
	Version      int        `json:"version"`
	State        string     `json:"state"`
	ChangedAt    *time.Time `json:"changed_at,omitempty"`
	ChangedBy    string     `json:"changed_by,omitempty"`
	ActiveRuns   int        `json:"active_runs"`
	FinishedRuns int        `json:"finished_runs"`
}

// Versions are a definition's versions and its rule.
type Versions struct {
	Name          string              `json:"name"`
	Rule          *VersionRule        `json:"rule"`
	RuleUpdatedAt *time.Time          `json:"rule_updated_at,omitempty"`
	RuleUpdatedBy string              `json:"rule_updated_by,omitempty"`
	Latest        int                 `json:"latest"`
	Versions      []DefinitionVersion `json:"versions"`
}

func versionsPath(name string) string { return "/definitions/" + seg(name) }

// Versions lists a definition's versions (deleted ones with all).
func (c *Client) Versions(ctx context.Context, name string, all bool) (*Versions, *Response, error) {
	var q url.Values
	if all {
		q = url.Values{"include_deleted": {"true"}}
	}
	return call[Versions](ctx, c, &request{method: http.MethodGet, path: versionsPath(name) + "/versions", query: q})
}

// SetVersionRule sets a definition's version rule.
func (c *Client) SetVersionRule(ctx context.Context, name string, r *VersionRule) (*VersionRule, *Response, error) {
	return call[VersionRule](ctx, c, &request{method: http.MethodPut, path: versionsPath(name) + "/version-rule", body: r})
}

// ClearVersionRule deletes a definition's version rule.
func (c *Client) ClearVersionRule(ctx context.Context, name string) (*Response, error) {
	return c.do(ctx, &request{method: http.MethodDelete, path: versionsPath(name) + "/version-rule"})
}

// SetVersionState retires ("retire"), unretires ("unretire") or deletes
// ("delete") a version.
func (c *Client) SetVersionState(ctx context.Context, name string, version int, op string) (*Response, error) {
	p := versionsPath(name) + "/versions/" + strconv.Itoa(version)
	if op == "delete" {
		return c.do(ctx, &request{method: http.MethodDelete, path: p})
	}
	return c.do(ctx, &request{method: http.MethodPost, path: p + "/" + op, body: struct{}{}})
}
