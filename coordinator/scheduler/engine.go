package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
)

// Engine runs task kinds on one node. Create it with New, start it with Run;
// the scheduling methods (Schedule, Upsert, Reschedule, Cancel) may be used
// before, during and after Run.
type Engine struct {
	cfg    Config
	sch    store.Scheduler
	log    *zap.Logger
	kinds  map[string]*Kind
	pools  map[string]*pool
	poolOf map[string]*pool // by kind name

	// execCtx is the parent of every callback's context. It is cancelled at
	// the shutdown deadline or by the watchdog, not when Run's ctx ends, so
	// callbacks get to finish during a graceful shutdown.
	execCtx    context.Context
	execCancel context.CancelFunc
	// writeCtx bounds the engine's own writes; the watchdog cancels it, so
	// a node cut off from the database stops waiting for it at once.
	writeCtx   context.Context
	stopWrites context.CancelFunc

	mu      sync.Mutex
	running map[store.TaskKey]*Execution
	wg      sync.WaitGroup // running callbacks

	stats counters

	dead      atomic.Bool                 // the watchdog fired: write nothing more
	beatErr   atomic.Pointer[beatFailure] // the node heartbeat failing since, nil when the last one was written
	ready     chan struct{}               // closed once Run is claiming and listening
	readyOnce sync.Once
	runOnce   sync.Once
	fatal     chan error // the watchdog's verdict, buffered 1
}

// New returns an engine for kinds on sch. It validates cfg and the kinds
// once, here.
func New(sch store.Scheduler, cfg Config, kinds ...Kind) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg: cfg, sch: sch, log: cfg.Log.With(zap.String("node", cfg.NodeID)),
		kinds: map[string]*Kind{}, pools: map[string]*pool{}, poolOf: map[string]*pool{},
		running: map[store.TaskKey]*Execution{}, fatal: make(chan error, 1),
		ready: make(chan struct{}),
	}
	e.execCtx, e.execCancel = context.WithCancel(context.Background())
	e.writeCtx, e.stopWrites = context.WithCancel(context.Background())
	for i := range kinds {
		k := kinds[i]
		switch {
		case k.Name == "":
			return nil, fmt.Errorf("%w: task kind needs a name", invalid.ErrArgument)
		case k.Handler == nil:
			return nil, fmt.Errorf("%w: task kind %q needs a handler", invalid.ErrArgument, k.Name)
		case e.kinds[k.Name] != nil:
			return nil, fmt.Errorf("%w: task kind %q registered twice", invalid.ErrArgument, k.Name)
		}
		if k.Pool == "" {
			k.Pool = k.Name
		}
		k.Handler = observed(cfg, k.Name, k.Handler)
		e.kinds[k.Name] = &k
		p := e.pools[k.Pool]
		if p == nil {
			threads := cfg.Pools[k.Pool]
			if threads == 0 {
				threads = DefaultThreads
			}
			p = newPool(e, k.Pool, threads)
			e.pools[k.Pool] = p
		}
		p.names = append(p.names, k.Name)
		e.poolOf[k.Name] = p
	}
	if len(e.kinds) == 0 {
		return nil, fmt.Errorf("%w: the engine needs at least one task kind", invalid.ErrArgument)
	}
	return e, nil
}

// NodeID returns the node's id (picked_by of its claims).
func (e *Engine) NodeID() string { return e.cfg.NodeID }

// Clock returns the engine's clock (Config.Clock).
func (e *Engine) Clock() Clock { return e.cfg.Clock }

// ListNodes returns the coordinator nodes' rows (store.Scheduler.ListNodes).
func (e *Engine) ListNodes(ctx context.Context) ([]store.Node, error) { return e.sch.ListNodes(ctx) }

// DeadNodeAfter is how old a node's heartbeat is when the node counts as
// dead: HeartbeatInterval × MissedHeartbeatsLimit, as db-scheduler defines
// a dead execution.
func (e *Engine) DeadNodeAfter() time.Duration { return e.cfg.staleAfter() }

// Schedule inserts a one-shot or first recurring row unless one exists for
// the key; created says which. A row due at once wakes the kind's pool here
// and, on PostgreSQL, every node's.
func (e *Engine) Schedule(ctx context.Context, t store.NewTask) (created bool, err error) {
	if err := e.known(t.Name); err != nil {
		return false, err
	}
	now := e.cfg.Clock.Now()
	created, err = e.sch.ScheduleTask(ctx, t, now)
	if err == nil && created && !t.ExecutionTime.After(now) {
		e.wake(t.Name)
	}
	return created, err
}

// ScheduleRecurring inserts the row of a recurring kind, due at the kind's
// next instant, unless it exists.
func (e *Engine) ScheduleRecurring(ctx context.Context, name, instance string, data []byte) (bool, error) {
	k := e.kinds[name]
	if k == nil || k.Schedule == nil {
		return false, fmt.Errorf("%w: %q is not a recurring task kind", invalid.ErrArgument, name)
	}
	next := k.Schedule.Next(e.cfg.Clock.Now())
	return e.Schedule(ctx, store.NewTask{TaskKey: store.TaskKey{Name: name, Instance: instance}, Data: data, ExecutionTime: next})
}

// Upsert inserts a row or coalesces it into the existing one (see
// store.Scheduler.UpsertTask), waking the pool when it is due at once.
func (e *Engine) Upsert(ctx context.Context, t store.NewTask) (created bool, err error) {
	if err := e.known(t.Name); err != nil {
		return false, err
	}
	now := e.cfg.Clock.Now()
	created, err = e.sch.UpsertTask(ctx, t, now)
	if err == nil && !t.ExecutionTime.After(now) {
		e.wake(t.Name)
	}
	return created, err
}

// Reschedule moves a row to at (see store.Scheduler.RescheduleTask).
func (e *Engine) Reschedule(ctx context.Context, key store.TaskKey, at time.Time, data []byte) error {
	if err := e.sch.RescheduleTask(ctx, key, at, data); err != nil {
		return err
	}
	if !at.After(e.cfg.Clock.Now()) {
		e.wake(key.Name)
	}
	return nil
}

// Cancel deletes a row. If a node is running it, that run's completion is
// rejected with store.ErrStaleFence and its callback's context is cancelled
// at the next heartbeat.
func (e *Engine) Cancel(ctx context.Context, key store.TaskKey) error {
	return e.sch.CancelTask(ctx, key)
}

func (e *Engine) known(name string) error {
	if e.kinds[name] == nil {
		return fmt.Errorf("%w: unknown task kind %q", invalid.ErrArgument, name)
	}
	return nil
}

// wake makes the pool running kind name claim at once.
func (e *Engine) wake(name string) {
	if p := e.poolOf[name]; p != nil {
		p.signal()
	}
}

// Run registers the node, starts the pools, the heartbeats, the rescuer and
// (on PostgreSQL) the listener, and blocks until ctx ends or the watchdog
// fires. When ctx ends it shuts down gracefully: pools stop claiming,
// running callbacks get ShutdownTimeout to finish, then their contexts are
// cancelled and rows they did not complete are released; heartbeats stop
// last and the node row is removed. It returns nil then. When the watchdog
// fires it stops claiming, cancels every callback at once and returns an
// error wrapping ErrWatchdog. Run may be called once.
func (e *Engine) Run(ctx context.Context) error {
	first := false
	e.runOnce.Do(func() { first = true })
	if !first {
		return errors.New("coordinator: Run called twice")
	}
	if err := e.sch.RegisterNode(ctx, e.cfg.NodeID, e.cfg.Clock.Now()); err != nil {
		return fmt.Errorf("coordinator: register node: %w", err)
	}
	e.log.Info("coordinator node started", zap.Int("pools", len(e.pools)))

	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	liveCtx, stopLiveness := context.WithCancel(context.Background())
	defer stopLiveness()

	var bg sync.WaitGroup
	bg.Go(func() { e.listen(pollCtx) })
	// The pools outlive polling: they complete what callbacks queue while
	// the node drains, and flush it when liveness stops.
	var live sync.WaitGroup
	for _, p := range e.pools {
		live.Go(func() { p.run(pollCtx, liveCtx) })
	}
	live.Go(func() { e.liveness(liveCtx) })

	var result error
	select {
	case <-ctx.Done():
		stopPolling()
		bg.Wait()
		for _, p := range e.pools {
			<-p.claimsDone // no claim is started after this
		}
		result = e.drain()
		if result == nil && e.cfg.OnDrained != nil {
			done := make(chan struct{})
			go func() {
				defer close(done)
				e.cfg.OnDrained()
			}()
			select {
			case <-done:
			case err := <-e.fatal:
				result = err
			}
		}
	case err := <-e.fatal:
		result = err
	}
	if result != nil {
		e.log.Error("watchdog: stopping node", zap.Error(result))
		e.dead.Store(true)
		e.stopWrites()
		stopPolling()
		e.execCancel()
		bg.Wait()
		for _, p := range e.pools {
			<-p.claimsDone
		}
		e.wg.Wait()
	}
	stopLiveness()
	live.Wait()
	e.execCancel()
	e.stopWrites()
	if result == nil {
		rmCtx, cancel := context.WithTimeout(context.Background(), e.cfg.HeartbeatInterval)
		defer cancel()
		if err := e.sch.RemoveNode(rmCtx, e.cfg.NodeID); err != nil {
			e.log.Warn("remove node row", zap.Error(err))
		}
	}
	return result
}

// drain waits up to ShutdownTimeout for running callbacks, then cancels them
// and waits for them to return (they release their rows). The watchdog
// still applies meanwhile: its error is returned at once.
func (e *Engine) drain() error {
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	timeout, stop := e.cfg.Clock.After(e.cfg.ShutdownTimeout)
	defer stop()
	select {
	case <-done:
		return nil
	case err := <-e.fatal:
		return err
	case <-timeout:
	}
	e.mu.Lock()
	n := len(e.running)
	e.mu.Unlock()
	e.log.Warn("shutdown deadline passed; cancelling running callbacks", zap.Int("running", n))
	e.execCancel()
	select {
	case <-done:
		return nil
	case err := <-e.fatal:
		return err
	}
}

// Ready returns a channel closed once Run has registered the node, started
// its pools and (on PostgreSQL) is listening for other nodes' due rows.
func (e *Engine) Ready() <-chan struct{} { return e.ready }

func (e *Engine) markReady() { e.readyOnce.Do(func() { close(e.ready) }) }

// listen wakes pools on the database's notifications until ctx ends. A
// backend without them (SQLite) leaves the pools to their poll interval.
func (e *Engine) listen(ctx context.Context) {
	for {
		err := e.sch.ListenTasks(ctx, func() {
			for _, p := range e.pools {
				p.signal()
			}
			e.markReady()
		}, func(name string, at time.Time) {
			if at.IsZero() {
				e.wake(name)
			} else {
				e.WakeAt(name, at)
			}
		})
		if errors.Is(err, store.ErrNotSupported) {
			e.markReady()
			return
		}
		if ctx.Err() != nil {
			return
		}
		e.log.Warn("task listener stopped; reconnecting after the poll interval", zap.Error(err))
		wait, stop := e.cfg.Clock.After(e.cfg.PollInterval)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-wait:
		}
		// Rows may have become due while nobody listened.
		for _, p := range e.pools {
			p.signal()
		}
	}
}

// runningClaims returns the claims of the callbacks now running.
func (e *Engine) runningClaims() []store.Task {
	e.mu.Lock()
	defer e.mu.Unlock()
	claims := make([]store.Task, 0, len(e.running))
	for _, x := range e.running {
		if settled, _ := x.outcome(); settled {
			continue // its Complete ended the claim: nothing to heartbeat
		}
		claims = append(claims, x.Task)
	}
	return claims
}

// dropClaims cancels the callbacks of claims this node no longer holds.
// A claim whose completion is under way is not reported: its own commit
// may be what ended it, and if not, the completion's verdict tells.
func (e *Engine) dropClaims(lost []store.TaskKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range lost {
		x := e.running[k]
		if x == nil {
			continue
		}
		if settled, _ := x.outcome(); settled {
			// Its own Complete committed (or was found stale, and then the
			// handler knows): the callback may still be finishing work that
			// its committed rows ask for, such as submitting a job.
			continue
		}
		if !x.completing.Load() && !x.queued.Load() {
			e.log.Warn("claim lost; cancelling its callback", zap.Stringer("task", k))
		}
		x.cancel()
	}
}

// writeTimeout bounds one statement of a pool or a completion: long enough
// for a slow database, short enough that claimed rows start (and are
// heartbeated) before anyone could find them stale.
func (e *Engine) writeTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.writeCtx, e.cfg.WatchdogTimeout)
}

// Stats are counters of one engine since New, for metrics and benchmarks.
type Stats struct {
	// Claimed is how many rows this node claimed.
	Claimed int64
	// Completed is how many completions committed (success, failure or
	// release), Stale how many were rejected because the claim was no
	// longer held, and Failed how many failed for another reason.
	Completed, Stale, Failed int64
	// Rescued is how many rows this node's rescuer revived.
	Rescued int64
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{
		Claimed: e.stats.claimed.Load(), Completed: e.stats.completed.Load(),
		Stale: e.stats.stale.Load(), Failed: e.stats.failed.Load(), Rescued: e.stats.rescued.Load(),
	}
}

type counters struct {
	claimed, completed, stale, failed, rescued atomic.Int64
}

func (e *Engine) countCompletion(err error) {
	switch {
	case err == nil:
		e.stats.completed.Add(1)
	case errors.Is(err, store.ErrStaleFence):
		e.stats.stale.Add(1)
	default:
		e.stats.failed.Add(1)
	}
}

// The outcomes Config.OnExecuted reports: the handler returned nil, an
// error, an error wrapping store.ErrStaleFence (its claim was taken over),
// an error after its context was cancelled (lost claim, shutdown, watchdog),
// or it panicked.
const (
	ExecSuccess   = "success"
	ExecFailure   = "failure"
	ExecStale     = "stale"
	ExecCancelled = "cancelled"
	ExecPanic     = "panic"
)

// observed wraps h so that cfg.OnClaim and cfg.OnExecuted see each run of
// kind; it returns h itself when neither is set.
func observed(cfg Config, kind string, h Handler) Handler {
	if cfg.OnClaim == nil && cfg.OnExecuted == nil {
		return h
	}
	return func(ctx context.Context, x *Execution) (err error) {
		if cfg.OnClaim != nil {
			// A claim stamps the row's first heartbeat with the claim time.
			cfg.OnClaim(kind, x.Task.LastHeartbeat.Sub(x.Task.ExecutionTime))
		}
		if cfg.OnExecuted == nil {
			return h(ctx, x)
		}
		outcome := ExecPanic // unless h returns
		defer func() { cfg.OnExecuted(kind, outcome) }()
		err = h(ctx, x)
		switch {
		case err == nil:
			outcome = ExecSuccess
		case errors.Is(err, store.ErrStaleFence):
			outcome = ExecStale
		case ctx.Err() != nil:
			outcome = ExecCancelled
		default:
			outcome = ExecFailure
		}
		return err
	}
}
