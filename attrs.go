package hephaestus

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/internal/attrfilter"
	"github.com/hephaestus-go/hephaestus/store"
)

// whereFilter reads a filter of ListOptions.Where over the search
// attributes that flowName (any flow when "") declares.
func (c *Client) whereFilter(ctx context.Context, flowName, where string) (store.AttrFilter, error) {
	if flowName != "" {
		if err := c.ensureStub(ctx, flowName, 0); err != nil {
			return nil, err
		}
	}
	decl, err := c.flows.SearchAttributes(flowName)
	if err != nil {
		return nil, fmt.Errorf("%w: where: %w", ErrInvalidInput, err)
	}
	f, err := attrfilter.Parse(where, decl)
	if err != nil {
		return nil, fmt.Errorf("%w: where: %w", ErrInvalidInput, err)
	}
	return f, nil
}
