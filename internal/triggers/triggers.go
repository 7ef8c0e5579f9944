// Package triggers starts runs on events: the triggers a process declares
// are stored, SendEvent writes one firing per (event, trigger) in the
// event's transaction, and this service claims the firings of its
// triggers under a lease, evaluates each trigger's filter and input over
// the event, and starts the run with the id the firing's first claim
// fixed, so that a firing starts one run however often it is claimed.
package triggers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// MaxCost bounds the work of one evaluation of a filter or an input
// (CEL's cost units).
const MaxCost = 100_000

// claimBatch bounds the firings one claim leases.
const claimBatch = 50

// fireParallel bounds the firings of a batch carried out at once.
const fireParallel = 8

// StartFunc starts the run of a trigger's target with an input and a run
// id; a run that exists already (a firing claimed again) is success.
type StartFunc func(ctx context.Context, t *store.Trigger, s *StartParams) error

// StartParams is what a firing starts: the run's id, input and keys.
type StartParams struct {
	Input   json.RawMessage
	RunID   string
	EventID string
	// BusinessKey and ConcurrencyKey are the trigger's key expressions'
	// values ("" when it has none).
	BusinessKey, ConcurrencyKey string
	// Key is the value of the trigger's flow-control key ("" when it has
	// none); not used to start a run.
	Key string
}

// ErrSkip, wrapped by a StartFunc's error, ends the firing skipped with
// that error's text: the run is not started, and that is an answer, not
// a failure (a run with the business key is active already).
var ErrSkip = errors.New("skipped")

// Config configures a Service.
type Config struct {
	Store    store.Store
	Triggers store.Triggers
	Clock    clock.Clock
	Logger   *slog.Logger
	// Owner names this process in the firings' leases.
	Owner string
	// LeaseFor is how long a claim holds its firings.
	LeaseFor time.Duration
	// Interval is how often the service looks for firings when nothing
	// wakes it.
	Interval time.Duration
	Start    StartFunc
	// Groups keeps the groups of the triggers that debounce, throttle or
	// batch their events; nil: Store.
	Groups store.TriggerGroups
	// NewID returns a fresh run id.
	NewID func() string
	// Deliver hands matched events to waiting runs (waits.go); nil: this
	// service carries out no event waits.
	Deliver DeliverFunc
}

// Service dispatches the firings of the triggers declared to it, and of
// the triggers managed at run time (stored, not declared in code), which
// every started service carries out.
type Service struct {
	cfg   Config
	mu    sync.Mutex
	progs map[string]*compiled
	// managed are the stored triggers not declared in code, as last read
	// (at refreshed; stale asks for a read at the next dispatch).
	managed   map[string]*compiled
	refreshed time.Time
	stale     bool
	matches   map[string]cel.Program // event waits' matches (waits.go)
	wake      chan struct{}
	stop      context.CancelFunc
	wg        sync.WaitGroup
}

type compiled struct {
	t                        *store.Trigger
	filter, input            cel.Program
	businessKey, concurrency cel.Program
	// key is the flow-control key (nil: one group).
	key cel.Program
}

// New returns a Service; it starts nothing until Start.
func New(cfg *Config) *Service {
	return &Service{cfg: *cfg, progs: map[string]*compiled{}, managed: map[string]*compiled{}, matches: map[string]cel.Program{}, stale: true, wake: make(chan struct{}, 1)}
}

var (
	envOnce sync.Once
	celEnv  *cel.Env
	envErr  error
)

func env() (*cel.Env, error) {
	envOnce.Do(func() {
		celEnv, envErr = cel.NewEnv(
			cel.Variable("event", cel.MapType(cel.StringType, cel.DynType)),
			cel.CrossTypeNumericComparisons(true),
			cel.ParserExpressionSizeLimit(store.MaxTriggerExprBytes),
			cel.ParserRecursionLimit(64),
		)
	})
	return celEnv, envErr
}

// Compile checks a trigger: its fields (store.CheckTrigger) and its
// expressions, naming the one that does not compile. The error wraps
// hephtype.ErrInvalidInput.
func Compile(t *store.Trigger) (filter, input cel.Program, err error) {
	if err := store.CheckTrigger(t); err != nil {
		return nil, nil, err
	}
	if t.Filter != "" {
		if filter, err = program(t.Filter, true); err != nil {
			return nil, nil, fmt.Errorf("%w: trigger %q: filter %q: %v", hephtype.ErrInvalidInput, t.Name, t.Filter, err)
		}
	}
	if t.Input != "" {
		if input, err = program(t.Input, false); err != nil {
			return nil, nil, fmt.Errorf("%w: trigger %q: input %q: %v", hephtype.ErrInvalidInput, t.Name, t.Input, err)
		}
	}
	if _, _, _, err := compileKeys(t); err != nil {
		return nil, nil, err
	}
	return filter, input, nil
}

// compileKeys compiles the business key, concurrency key and
// flow-control key expressions.
func compileKeys(t *store.Trigger) (bk, ck, key cel.Program, err error) {
	for _, k := range []struct {
		what, src string
		dst       *cel.Program
	}{{"business key", t.BusinessKey, &bk}, {"concurrency key", t.ConcurrencyKey, &ck}, {"key", t.Key, &key}} {
		if k.src == "" {
			continue
		}
		if *k.dst, err = program(k.src, false); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: trigger %q: %s %q: %v", hephtype.ErrInvalidInput, t.Name, k.what, k.src, err)
		}
	}
	return bk, ck, key, nil
}

// compile compiles every expression of a trigger.
func compile(t *store.Trigger) (*compiled, error) {
	f, in, err := Compile(t)
	if err != nil {
		return nil, err
	}
	bk, ck, key, err := compileKeys(t)
	if err != nil {
		return nil, err
	}
	return &compiled{t: t, filter: f, input: in, businessKey: bk, concurrency: ck, key: key}, nil
}

func program(src string, boolean bool) (cel.Program, error) {
	e, err := env()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, errors.New(strings.TrimSpace(iss.Err().Error()))
	}
	if t := ast.OutputType(); boolean && !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("it gives %s, not a boolean", t)
	}
	return e.Program(ast, cel.CostLimit(MaxCost), cel.InterruptCheckFrequency(100))
}

// Declare compiles triggers, stores them (declared) and dispatches their
// firings from now on. Nothing is stored when one is invalid.
func (s *Service) Declare(ctx context.Context, ts ...*store.Trigger) error {
	cs := make([]*compiled, len(ts))
	for i, t := range ts {
		c := *t
		c.Declared = true
		var err error
		if cs[i], err = compile(&c); err != nil {
			return err
		}
	}
	put := make([]*store.Trigger, len(cs))
	for i, c := range cs {
		put[i] = c.t
	}
	if err := s.cfg.Triggers.PutTriggers(ctx, &store.PutTriggersParams{Triggers: put, Now: s.cfg.Clock.Now()}); err != nil {
		return err
	}
	s.mu.Lock()
	for _, c := range cs {
		s.progs[c.t.Name] = c
	}
	s.mu.Unlock()
	s.Wake()
	return nil
}

// Put compiles and stores a trigger managed at run time (not declared in
// code); every started service carries it out from its next read.
func (s *Service) Put(ctx context.Context, t *store.Trigger) error {
	if _, _, err := Compile(t); err != nil {
		return err
	}
	c := *t
	c.Declared = false
	if err := s.cfg.Triggers.PutTriggers(ctx, &store.PutTriggersParams{Triggers: []*store.Trigger{&c}, Now: s.cfg.Clock.Now()}); err != nil {
		return err
	}
	s.Refresh()
	return nil
}

// Delete deletes a trigger and its pending firings; this service stops
// carrying it out (a trigger declared here is forgotten until declared
// again).
func (s *Service) Delete(ctx context.Context, name string) error {
	if err := s.cfg.Triggers.DeleteTrigger(ctx, name); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.progs, name)
	s.mu.Unlock()
	s.Refresh()
	return nil
}

// Refresh makes the next dispatch read the managed triggers again (one
// was put or deleted here).
func (s *Service) Refresh() {
	s.mu.Lock()
	s.stale = true
	s.mu.Unlock()
	s.Wake()
}

// refresh reads the managed triggers when they are stale or were read an
// Interval ago, compiling those that are new or changed. A stored trigger
// that does not compile (stored by another version of the program) is
// logged and left alone.
func (s *Service) refresh(ctx context.Context) error {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	due := s.stale || now.Sub(s.refreshed) >= s.cfg.Interval
	s.mu.Unlock()
	if !due {
		return nil
	}
	ts, err := s.cfg.Triggers.ListTriggers(ctx)
	if err != nil {
		return fmt.Errorf("list triggers: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]*compiled, len(ts))
	for _, t := range ts {
		if t.Declared {
			continue
		}
		if c := s.managed[t.Name]; c != nil && c.t.UpdatedAt.Equal(t.UpdatedAt) && *c.t == *t {
			next[t.Name] = c
			continue
		}
		c, err := compile(t)
		if err != nil {
			s.cfg.Logger.Error("triggers: a stored trigger does not compile", slog.String("trigger", t.Name), slog.Any("err", err))
			continue
		}
		next[t.Name] = c
	}
	s.managed, s.refreshed, s.stale = next, now, false
	return nil
}

// Wake makes the loop look for firings now (an event was sent here).
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start starts the loop; it runs until Stop. A second call is a no-op.
func (s *Service) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return
	}
	ctx, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Go(func() { s.loop(ctx) })
}

// Stop ends the loop and waits for it.
func (s *Service) Stop() {
	s.mu.Lock()
	stop := s.stop
	s.mu.Unlock()
	if stop != nil {
		stop()
		s.wg.Wait()
	}
}

func (s *Service) loop(ctx context.Context) {
	for {
		for {
			n, err := s.Dispatch(ctx)
			if err != nil && ctx.Err() == nil {
				s.cfg.Logger.Error("triggers", slog.Any("err", err))
			}
			if err != nil || n < claimBatch {
				break
			}
		}
		if _, err := s.DispatchWaits(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Error("event waits", slog.Any("err", err))
		}
		select {
		case <-s.wake:
		case <-s.cfg.Clock.After(s.nextWake(ctx)):
		case <-ctx.Done():
			return
		}
	}
}

// Dispatch claims one batch of firings of the declared triggers and acts
// on each; it returns how many it claimed. Tests call it to step the
// service without its loop.
func (s *Service) Dispatch(ctx context.Context) (int, error) {
	if err := s.refresh(ctx); err != nil {
		return 0, err
	}
	s.mu.Lock()
	progs := make(map[string]*compiled, len(s.progs)+len(s.managed))
	for n, c := range s.managed {
		progs[n] = c
	}
	for n, c := range s.progs {
		progs[n] = c // declared in code here: this process's definition wins
	}
	s.mu.Unlock()
	if len(progs) == 0 {
		return 0, nil
	}
	names := make([]string, 0, len(progs))
	for n := range progs {
		names = append(names, n)
	}
	ids := make([]string, claimBatch)
	for i := range ids {
		ids[i] = s.cfg.NewID()
	}
	fs, err := s.cfg.Triggers.ClaimFirings(ctx, &store.ClaimFiringsParams{Triggers: names, Owner: s.cfg.Owner,
		Now: s.cfg.Clock.Now(), LeaseFor: s.cfg.LeaseFor, RunIDs: ids, Limit: claimBatch})
	if err != nil {
		return 0, fmt.Errorf("claim firings: %w", err)
	}
	// The firings of a batch are independent (each has its run id and
	// its fenced end): fireParallel of them at once; but those of a
	// trigger that groups its events join in event order, one after the
	// other (a batch takes its events in that order).
	lanes := firingLanes(progs, fs)
	errs := parallel(len(lanes), func(i int) error {
		for _, f := range lanes[i] {
			if err := s.fire(ctx, progs[f.Trigger], f); err != nil {
				return err // the lane's later firings wait for their lease to end
			}
		}
		return nil
	})
	n, err := s.dispatchGroups(ctx, progs, names)
	return len(fs) + n, errors.Join(errs, err)
}

// firingLanes splits claimed firings (in event order) into lanes carried
// out at once: one per firing, or one per trigger that groups its events.
func firingLanes(progs map[string]*compiled, fs []*store.Firing) [][]*store.Firing {
	var lanes [][]*store.Firing
	grouped := map[string]int{}
	for _, f := range fs {
		if !progs[f.Trigger].t.Grouped() {
			lanes = append(lanes, []*store.Firing{f})
			continue
		}
		i, ok := grouped[f.Trigger]
		if !ok {
			i = len(lanes)
			grouped[f.Trigger] = i
			lanes = append(lanes, nil)
		}
		lanes[i] = append(lanes[i], f)
	}
	return lanes
}

// parallel runs do(0..n-1), fireParallel at once, and joins their errors.
func parallel(n int, do func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, fireParallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = do(i)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fire acts on one leased firing and ends it.
func (s *Service) fire(ctx context.Context, c *compiled, f *store.Firing) error {
	status, msg := store.FiringStarted, ""
	p, ok, err := c.evaluate(f.Event)
	if err == nil && ok && c.t.Grouped() {
		return s.join(ctx, c, f, p)
	}
	switch {
	case err != nil:
		status, msg = store.FiringFailed, err.Error()
	case !ok:
		status = store.FiringSkipped
	default:
		p.RunID, p.EventID = f.RunID, f.EventID
		if err := s.cfg.Start(ctx, c.t, p); errors.Is(err, ErrSkip) {
			status, msg = store.FiringSkipped, err.Error()
		} else if err != nil {
			if ctx.Err() != nil || !errors.Is(err, hephtype.ErrInvalidInput) && !isPermanent(err) {
				// Left pending: the next claim after the lease tries again,
				// with the same run id.
				return fmt.Errorf("trigger %q, event %s: start: %w", f.Trigger, f.EventID, err)
			}
			status, msg = store.FiringFailed, err.Error()
		}
	}
	err = s.cfg.Triggers.EndFiring(ctx, &store.EndFiringParams{EventID: f.EventID, Trigger: f.Trigger, Token: f.Token,
		Status: status, Error: msg, Now: s.cfg.Clock.Now()})
	if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrFiringNotFound) {
		return nil // another claim ended it, or the event was pruned
	}
	return err
}

// isPermanent: errors a retry would meet again.
func isPermanent(err error) bool {
	return errors.Is(err, hephtype.ErrFlowNotFound) || errors.Is(err, hephtype.ErrWorkflowNotFound)
}

// evaluate runs the filter (false: skip) and the input (the event's data
// when none) over the event.
func (c *compiled) evaluate(e *store.EventRecord) (*StartParams, bool, error) {
	var data any
	if len(e.Data) > 0 {
		if err := json.Unmarshal(e.Data, &data); err != nil {
			return nil, false, fmt.Errorf("event data: %w", err)
		}
	}
	vars := map[string]any{"event": map[string]any{"id": e.ID, "name": e.Name, "data": data, "at": e.At, "seq": e.Seq}}
	if c.filter != nil {
		out, _, err := c.filter.Eval(vars)
		if err != nil {
			return nil, false, fmt.Errorf("filter %q: %w", c.t.Filter, err)
		}
		b, ok := out.Value().(bool)
		if !ok {
			return nil, false, fmt.Errorf("filter %q gave %v, not a boolean", c.t.Filter, out.Value())
		}
		if !b {
			return nil, false, nil
		}
	}
	p := &StartParams{Input: e.Data}
	if c.input != nil {
		out, _, err := c.input.Eval(vars)
		if err != nil {
			return nil, false, fmt.Errorf("input %q: %w", c.t.Input, err)
		}
		if p.Input, err = toJSON(out); err != nil {
			return nil, false, fmt.Errorf("input %q: %w", c.t.Input, err)
		}
	}
	var err error
	if p.BusinessKey, err = keyOf(c.businessKey, "business key", c.t.BusinessKey, vars); err != nil {
		return nil, false, err
	}
	if p.ConcurrencyKey, err = keyOf(c.concurrency, "concurrency key", c.t.ConcurrencyKey, vars); err != nil {
		return nil, false, err
	}
	if p.Key, err = keyOf(c.key, "key", c.t.Key, vars); err != nil {
		return nil, false, err
	}
	if len(p.Key) > store.MaxGroupKeyBytes {
		return nil, false, fmt.Errorf("key %q is %d bytes, over the limit of %d", c.t.Key, len(p.Key), store.MaxGroupKeyBytes)
	}
	return p, true, nil
}

// keyOf evaluates a key expression: a string, or a number (an integral
// one without a fraction: 42, not 42.0).
func keyOf(p cel.Program, what, src string, vars map[string]any) (string, error) {
	if p == nil {
		return "", nil
	}
	out, _, err := p.Eval(vars)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", what, src, err)
	}
	var k string
	switch v := out.Value().(type) {
	case string:
		k = v
	case int64:
		k = strconv.FormatInt(v, 10)
	case uint64:
		k = strconv.FormatUint(v, 10)
	case float64:
		k = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return "", fmt.Errorf("%s %q gave %v, not a string or a number", what, src, out.Value())
	}
	if k == "" {
		return "", fmt.Errorf("%s %q is empty", what, src)
	}
	return k, nil
}

var valueType = reflect.TypeFor[*structpb.Value]()

func toJSON(v ref.Val) (json.RawMessage, error) {
	n, err := v.ConvertToNative(valueType)
	if err != nil {
		return nil, err
	}
	b, err := protojson.Marshal(n.(*structpb.Value))
	if err != nil {
		return nil, err
	}
	// protojson varies its spacing on purpose; the input is stored as
	// compact JSON.
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
