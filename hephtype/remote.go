package hephtype

import (
	"errors"
	"fmt"
)

// Errors and limits of remote work (workers outside the process), defined
// here so that the remote runtime and package hephaestus share them.
var (
	// ErrTaskLost: the task's lease is no longer held by the token's
	// claim (the lease expired and another worker claimed the task, the
	// run was cancelled or ended, or the attempt was completed already).
	// Nothing was written; the worker drops its result.
	ErrTaskLost = errors.New("task lost: the token's claim no longer holds the task")
	// ErrInvalidToken: the token is not one that a claim handed out for
	// the task's current claim, or the caller is not the identity that
	// claimed. A token of an older server (version 1) is refused too: its
	// holder claims the task again. Nothing was written.
	ErrInvalidToken = errors.New("invalid task token")
	// ErrTokenRefused (an ErrInvalidToken): the token is well-formed but
	// does not grant its caller the task's current claim: it was made up
	// or edited, or the caller is not the identity that claimed. One
	// error for all, so that a made-up token cannot be told from a stolen
	// one. Nothing was written.
	ErrTokenRefused = fmt.Errorf("%w: the token does not grant this caller the task's current claim", ErrInvalidToken)
)

// MaxRemoteClaim bounds the tasks one remote claim takes.
const MaxRemoteClaim = 100

// The kinds of remote tasks: a remote step or document action (for a map
// step, one element), or a workflow activity.
const (
	RemoteStep     = "step"
	RemoteActivity = "activity"
)
