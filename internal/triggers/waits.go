package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// DeliverFunc hands a matched event to the run that waits for it. It
// must be idempotent by the wait's id (the same wait may be delivered
// again after a lost answer). It returns nil when the wait is done (the
// event was delivered, or the run no longer waits and never will),
// ErrNotYet when the run is not ready to take the event (try again
// later), or another error (logged; tried again later).
type DeliverFunc func(ctx context.Context, w *store.EventWait, e *store.EventRecord) error

// ErrNotYet, from a DeliverFunc: the run cannot take the event yet.
var ErrNotYet = errors.New("the run does not wait yet")

// openWaitsBatch bounds the waits one DispatchWaits looks at.
const openWaitsBatch = 1000

var (
	waitEnvOnce sync.Once
	waitEnv     *cel.Env
	waitEnvErr  error
)

func waitsEnv() (*cel.Env, error) {
	waitEnvOnce.Do(func() {
		waitEnv, waitEnvErr = cel.NewEnv(
			cel.Variable("event", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("input", cel.DynType),
			cel.CrossTypeNumericComparisons(true),
			cel.ParserExpressionSizeLimit(store.MaxEventWaitMatchBytes),
			cel.ParserRecursionLimit(64),
		)
	})
	return waitEnv, waitEnvErr
}

// CompileMatch checks a wait's match expression (CEL over event and
// input, giving a boolean). The error wraps hephtype.ErrInvalidInput and
// names the expression.
func CompileMatch(expr string) (cel.Program, error) {
	if expr == "" {
		return nil, nil
	}
	if len(expr) > store.MaxEventWaitMatchBytes {
		return nil, fmt.Errorf("%w: event wait: match is %d bytes, over the limit of %d", hephtype.ErrInvalidInput, len(expr), store.MaxEventWaitMatchBytes)
	}
	e, err := waitsEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("%w: event wait: match %q: %s", hephtype.ErrInvalidInput, expr, strings.TrimSpace(iss.Err().Error()))
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("%w: event wait: match %q gives %s, not a boolean", hephtype.ErrInvalidInput, expr, t)
	}
	return e.Program(ast, cel.CostLimit(MaxCost), cel.InterruptCheckFrequency(100))
}

// matchProgram returns the compiled match of a wait, cached by its text.
func (s *Service) matchProgram(expr string) (cel.Program, error) {
	s.mu.Lock()
	p, ok := s.matches[expr]
	s.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := CompileMatch(expr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.matches) >= 1000 {
		clear(s.matches)
	}
	s.matches[expr] = p
	s.mu.Unlock()
	return p, nil
}

// Matches reports whether an event satisfies a wait's match; an
// expression that fails on the event (a missing field) does not match.
func Matches(p cel.Program, e *store.EventRecord, input json.RawMessage) bool {
	if p == nil {
		return true
	}
	var data, in any
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &data) != nil {
		return false
	}
	if len(input) > 0 && json.Unmarshal(input, &in) != nil {
		return false
	}
	out, _, err := p.Eval(map[string]any{
		"event": map[string]any{"id": e.ID, "name": e.Name, "data": data, "at": e.At},
		"input": in,
	})
	if err != nil {
		return false
	}
	b, ok := out.Value().(bool)
	return ok && b
}

// DispatchWaits carries the open event waits forward: each one not
// matched yet gets the first of its candidate events that its match
// accepts (recorded by compare-and-set: every process agrees on the
// winner), and each matched one is delivered to its run and then marked
// delivered. Waits whose run ended, or whose deadline passed without a
// match, are closed. It returns how many waits it delivered or closed.
func (s *Service) DispatchWaits(ctx context.Context) (int, error) {
	if s.cfg.Deliver == nil {
		return 0, nil
	}
	ws, err := s.cfg.Store.OpenEventWaits(ctx, openWaitsBatch)
	if err != nil {
		return 0, fmt.Errorf("open event waits: %w", err)
	}
	n := 0
	var errs []error
	for _, w := range ws {
		done, err := s.carry(ctx, w)
		if err != nil {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("event wait %q: %w", w.ID, err))
		}
		if done {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// carry matches and delivers one wait; done is true when it is closed.
func (s *Service) carry(ctx context.Context, w *store.EventWait) (bool, error) {
	now := s.cfg.Clock.Now()
	if w.MatchedEventID == "" {
		e, err := s.firstMatch(ctx, w)
		if err != nil {
			return false, err
		}
		if e == nil {
			return s.closeIfOver(ctx, w, now)
		}
		if w, err = s.cfg.Store.MatchEventWait(ctx, w.ID, e.ID, now); err != nil {
			return false, err
		}
	}
	e, err := s.cfg.Store.GetEvent(ctx, w.MatchedEventID)
	if errors.Is(err, store.ErrEventNotFound) {
		e = &store.EventRecord{ID: w.MatchedEventID, Name: w.Event, At: w.MatchedAt} // pruned meanwhile
	} else if err != nil {
		return false, err
	}
	if err := s.cfg.Deliver(ctx, w, e); errors.Is(err, ErrNotYet) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, s.cfg.Store.DeliveredEventWait(ctx, w.ID, s.cfg.Clock.Now())
}

// firstMatch returns the oldest candidate event the wait's match
// accepts, or nil.
func (s *Service) firstMatch(ctx context.Context, w *store.EventWait) (*store.EventRecord, error) {
	p, err := s.matchProgram(w.Match)
	if err != nil {
		// Refused at registration; stored by another version of the
		// program: it matches nothing.
		s.cfg.Logger.Error("event wait: the match does not compile", slog.String("wait", w.ID), slog.Any("err", err))
		return nil, nil
	}
	es, err := s.cfg.Store.WaitCandidates(ctx, w)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		if Matches(p, e, w.Input) {
			return e, nil
		}
	}
	return nil, nil
}

// closeIfOver closes an unmatched wait whose run ended, or whose deadline
// passed an Interval ago (an event stored with an earlier time may still
// commit just after the deadline).
func (s *Service) closeIfOver(ctx context.Context, w *store.EventWait, now time.Time) (bool, error) {
	over := !w.Until.IsZero() && now.Sub(w.Until) > s.cfg.Interval
	if !over {
		r, err := s.cfg.Store.GetRun(ctx, w.RunID)
		switch {
		case errors.Is(err, store.ErrRunNotFound):
			over = now.Sub(w.CreatedAt) > s.cfg.LeaseFor // deleted, or not committed yet
		case err != nil:
			return false, err
		default:
			over = r.Status.Terminal()
		}
	}
	if !over {
		return false, nil
	}
	return true, s.cfg.Store.DeliveredEventWait(ctx, w.ID, now)
}
