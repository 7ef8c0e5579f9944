package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/internal/versionrule"
)

// Versions is the answer of GET /definitions/{name}/versions: a
// definition's versions with their state and run counts, and its rule.
type Versions struct {
	Name          string                  `json:"name"`
	Rule          *hephaestus.VersionRule `json:"rule"`
	RuleUpdatedAt *time.Time              `json:"rule_updated_at,omitempty"`
	RuleUpdatedBy string                  `json:"rule_updated_by,omitempty"`
	Latest        int                     `json:"latest"`
	Versions      []DefinitionVersion     `json:"versions"`
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

func versionsJSON(v *hephaestus.DefinitionVersions) *Versions {
	out := &Versions{Name: v.Name, Rule: v.Rule, RuleUpdatedAt: optTime(v.RuleUpdatedAt), RuleUpdatedBy: v.RuleUpdatedBy, Latest: v.Latest,
		Versions: make([]DefinitionVersion, len(v.Versions))}
	for i, d := range v.Versions {
		out.Versions[i] = DefinitionVersion{Version: d.Version, State: d.State, ChangedAt: optTime(d.ChangedAt), ChangedBy: d.ChangedBy,
			ActiveRuns: d.ActiveRuns, FinishedRuns: d.FinishedRuns}
	}
	return out
}

func (s *Server) listVersions(c *call) error {
	q := c.query()
	all := false
	switch v := q.str("include_deleted"); v {
	case "", "false":
	case "true":
		all = true
	default:
		q.fail("include_deleted", "%q is not true or false", v)
	}
	if err := q.err(); err != nil {
		return err
	}
	vs, err := s.cfg.Client.Versions(c.ctx(), c.r.PathValue("name"), &hephaestus.VersionsOptions{IncludeDeleted: all})
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, versionsJSON(vs))
}

func (s *Server) getVersionRule(c *call) error {
	r, err := s.cfg.Client.VersionRule(c.ctx(), c.r.PathValue("name"))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, r)
}

func (s *Server) putVersionRule(c *call) error {
	name := c.r.PathValue("name")
	c.target = name
	var r hephaestus.VersionRule
	if err := c.decode(&r, false); err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		var ve *versionrule.Error
		if errors.As(err, &ve) && ve.Field != "" {
			return fieldProblem(ve.Field, ve.Msg)
		}
		return err
	}
	if err := s.cfg.Client.SetVersionRule(c.ctx(), name, &r, c.principal()); err != nil {
		return err
	}
	return s.getVersionRule(c)
}

func (s *Server) deleteVersionRule(c *call) error {
	name := c.r.PathValue("name")
	c.target = name
	if err := s.cfg.Client.ClearVersionRule(c.ctx(), name); err != nil {
		return err
	}
	c.wrote = true
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// pathVersion reads the {version} of a path: a positive integer.
func pathVersion(c *call) (int, error) {
	raw := c.r.PathValue("version")
	v, err := strconv.Atoi(raw)
	if err != nil || v < 1 {
		return 0, badRequest("version: " + strconv.Quote(raw) + " in the path is not a version (a positive integer)")
	}
	return v, nil
}

// setVersionState retires, unretires or deletes a version.
func (s *Server) setVersionState(op string) func(c *call) error {
	return func(c *call) error {
		name := c.r.PathValue("name")
		v, err := pathVersion(c)
		if err != nil {
			return err
		}
		c.target = name + "@" + strconv.Itoa(v)
		fn := s.cfg.Client.RetireVersion
		switch op {
		case "unretire":
			fn = s.cfg.Client.UnretireVersion
		case "delete":
			fn = s.cfg.Client.DeleteVersion
		}
		if err := fn(c.ctx(), name, v, c.principal()); err != nil {
			return err
		}
		if op == "delete" {
			c.wrote = true
			c.w.WriteHeader(http.StatusNoContent)
			return nil
		}
		return s.listVersions(c)
	}
}
