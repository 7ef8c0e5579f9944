package flowdoc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
)

// search_attributes declares the document's runs' search attributes; a
// type that is not one, or a bad name, is refused at its line, naming the
// attribute.
func TestSearchAttributesField(t *testing.T) {
	doc := "name: tagged\nsearch_attributes: {amount: int, region: keyword_list}\nsteps:\n  only:\n    action: echo\n    done: true\n"
	f, err := flowdoc.Load("tagged.yaml", []byte(doc), tools(t))
	if err != nil {
		t.Fatal(err)
	}
	got := f.SearchAttributes()
	if len(got) != 2 || got["amount"] != flow.AttrInt || got["region"] != flow.AttrKeywordList {
		t.Fatalf("SearchAttributes() = %v", got)
	}
	for _, tc := range []struct{ attrs, want string }{
		{"{amount: integer}", `search_attributes.amount: "integer" is not a search attribute type`},
		{"{amount: [int]}", "search_attributes.amount"},
		{"{9lives: int}", `search_attributes.9lives`},
		{"[amount]", "search_attributes"},
	} {
		_, err := flowdoc.Load("bad.yaml", []byte("name: bad\nsearch_attributes: "+tc.attrs+"\nsteps:\n  only:\n    action: echo\n    done: true\n"), tools(t))
		var fe *flowdoc.Error
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bad.yaml:2") {
			t.Errorf("search_attributes: %s: %v; want an error at bad.yaml:2 with %q", tc.attrs, err, tc.want)
		}
	}
}
