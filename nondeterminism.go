package hephaestus

import "github.com/hephaestus-go/hephaestus/hephtype"

// NonDeterminismError reports that replayed workflow code did not issue
// the command the history recorded: the code changed in a way that is
// incompatible with runs in flight, or it depends on something other than
// its history. Its fields and what reports it are documented at
// hephtype.NonDeterminismError, where it is defined so that the replay
// core reports the same type.
type NonDeterminismError = hephtype.NonDeterminismError
