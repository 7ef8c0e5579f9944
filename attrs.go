package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/hephaestus-go/hephaestus/internal/attrfilter"
	"github.com/hephaestus-go/hephaestus/store"
)

// whereFilter reads a filter of ListOptions.Where over the search
// attributes that name (a flow or a workflow; any when "") declares.
func (c *Client) whereFilter(ctx context.Context, name, where string) (store.AttrFilter, error) {
	decl, err := c.attrDecl(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%w: where: %w", ErrInvalidInput, err)
	}
	f, err := attrfilter.Parse(where, decl)
	if err != nil {
		return nil, fmt.Errorf("%w: where: %w", ErrInvalidInput, err)
	}
	return f, nil
}

// attrDecl returns the search attributes that name declares: a workflow
// (registered here, or in the catalog) or a flow; with name "" those of
// every flow and workflow known here and of the workflows in the catalog.
// A name declared with two types is an error naming both.
func (c *Client) attrDecl(ctx context.Context, name string) (map[string]store.AttrType, error) {
	if name != "" {
		if _, ok := c.cat.workflows.Load(name); ok {
			return c.wf.AttrDecl(ctx, name)
		}
		if decl, err := c.catalogWorkflowAttrs(ctx, name); err != nil || decl != nil {
			return decl, err
		}
		if err := c.ensureStub(ctx, name, 0); err != nil {
			return nil, err
		}
		return c.flows.SearchAttributes(name)
	}
	decl, err := c.flows.SearchAttributes("")
	if err != nil {
		return nil, err
	}
	by := map[string]string{}
	add := func(workflow string, ws map[string]store.AttrType) error {
		for _, a := range slices.Sorted(maps.Keys(ws)) {
			if old, ok := decl[a]; ok && old != ws[a] {
				who := by[a]
				if who == "" {
					who = "a flow"
				}
				return fmt.Errorf("search attribute %s is a %s in %s and a %s in workflow %s: filter one workflow", a, old, who, ws[a], workflow)
			}
			decl[a], by[a] = ws[a], "workflow "+workflow
		}
		return nil
	}
	registered := c.wf.AttrDecls()
	for _, w := range slices.Sorted(maps.Keys(registered)) {
		if err := add(w, registered[w]); err != nil {
			return nil, err
		}
	}
	rows, err := c.cfg.Store.ListDefinitions(ctx, &store.ListDefinitionsParams{Kind: store.DefinitionWorkflow})
	if err != nil {
		return nil, err
	}
	for _, d := range rows {
		if _, ok := registered[d.Name]; ok {
			continue
		}
		var spec workflowSpec
		if json.Unmarshal(d.Spec, &spec) == nil {
			if err := add(d.Name, spec.SearchAttributes); err != nil {
				return nil, err
			}
		}
	}
	return decl, nil
}

// catalogWorkflowAttrs returns the search attributes that the catalog's
// newest row of workflow declares (nil when the catalog has none).
func (c *Client) catalogWorkflowAttrs(ctx context.Context, workflow string) (map[string]store.AttrType, error) {
	d, err := c.cfg.Store.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionWorkflow, Name: workflow})
	if errors.Is(err, store.ErrDefinitionNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var spec workflowSpec
	if err := json.Unmarshal(d.Spec, &spec); err != nil {
		return nil, fmt.Errorf("catalog row of workflow %q: %w", workflow, err)
	}
	if spec.SearchAttributes == nil {
		return map[string]store.AttrType{}, nil
	}
	return spec.SearchAttributes, nil
}
