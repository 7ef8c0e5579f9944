// Package leaky exposes internal types in every way apitest must catch,
// and hides them in the ways it must accept.
package leaky

import (
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
)

// Caught.

func Func() *engine.Graph { return nil }

type Struct struct {
	Field  map[string][]engine.Step
	hidden engine.State
}

func (s *Struct) Method(func(engine.Event)) {}

type Alias = engine.State

type Generic[T any] struct{ V T }

var Var Generic[engine.Decision]

type Iface interface {
	Do() (int, engine.Command)
}

type Embeds struct {
	engine.History
}

// Accepted.

func clean() *engine.Graph { return nil }

func (s *Struct) unexported() engine.Event { return nil }

func Public(s hephtype.RunStatus) error { return nil }

const Event = "ok"

const hiddenEvent = engine.EventOK

// Caught too: go doc prints the declaration.
const Shown = engine.EventOK

var Built, hiddenBuilt = len(engine.EventFailed), 0

type Opaque struct{ g *engine.Graph }
