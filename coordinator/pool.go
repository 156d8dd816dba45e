package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/store"
)

// pool is a fixed number of threads running the claims of some task kinds.
// Its loop claims as many due rows as it has free threads, in one statement,
// and waits for a wake-up (a due row scheduled here or notified by another
// node), a freed thread after a full claim, or the poll interval.
type pool struct {
	e       *Engine
	name    string
	names   []string
	threads int
	busy    atomic.Int64
	wakeC   chan struct{} // buffered 1: "look for due rows now"
	freed   chan struct{} // buffered 1: a thread finished
}

func newPool(e *Engine, name string, threads int) *pool {
	return &pool{e: e, name: name, threads: threads, wakeC: make(chan struct{}, 1), freed: make(chan struct{}, 1)}
}

func (p *pool) signal() {
	select {
	case p.wakeC <- struct{}{}:
	default:
	}
}

// run is the pool's claim loop; it returns when ctx ends.
func (p *pool) run(ctx context.Context) {
	cfg := p.e.cfg
	for ctx.Err() == nil {
		free := p.threads - int(p.busy.Load())
		full := false
		if free > 0 {
			claims, err := p.claim(ctx, free)
			if err != nil && ctx.Err() == nil {
				p.e.log.Warn("claim failed; retrying after the poll interval", zap.String("pool", p.name), zap.Error(err))
			}
			p.e.stats.claimed.Add(int64(len(claims)))
			for _, c := range claims {
				p.start(c)
			}
			full = err == nil && len(claims) == free
			if full && p.threads-int(p.busy.Load()) > 0 {
				continue // more rows may be due and threads are free already
			}
		}
		var freed chan struct{}
		if full || free <= 0 {
			freed = p.freed // saturated: claim again as soon as a thread is free
		}
		wait, stop := cfg.Clock.After(cfg.PollInterval)
		select {
		case <-ctx.Done():
		case <-p.wakeC:
		case <-freed:
		case <-wait:
		}
		stop()
	}
}

// claim fetches up to n due rows. The statement is not cancelled with the
// pool: a claim that committed must reach the pool, or its rows would wait
// for the rescuer.
func (p *pool) claim(ctx context.Context, n int) ([]store.Task, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.e.cfg.HeartbeatInterval)
	defer cancel()
	return p.e.sch.ClaimTasks(cctx, store.ClaimRequest{Names: p.names, Node: p.e.cfg.NodeID, Limit: n, Now: p.e.cfg.Clock.Now()})
}

// start runs one claim on its own goroutine.
func (p *pool) start(c store.Task) {
	e := p.e
	ctx, cancel := context.WithCancel(e.execCtx)
	x := &Execution{Task: c, e: e, kind: e.kinds[c.Name], cancel: cancel}
	p.busy.Add(1)
	e.mu.Lock()
	e.running[c.TaskKey] = x
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer func() {
			cancel()
			e.mu.Lock()
			if e.running[c.TaskKey] == x {
				delete(e.running, c.TaskKey)
			}
			e.mu.Unlock()
			p.busy.Add(-1)
			select {
			case p.freed <- struct{}{}:
			default:
			}
		}()
		x.run(ctx)
	}()
}

// Execution is one claimed run of a task, handed to its Handler.
type Execution struct {
	// Task is the claimed row; Task.Version is the claim's fencing token.
	Task   store.Task
	e      *Engine
	kind   *Kind
	cancel context.CancelFunc
	done   atomic.Bool // a completion was applied or attempted
	next   time.Time   // overrides the recurring kind's next instant
}

// Node returns the id of the node running the execution.
func (x *Execution) Node() string { return x.e.cfg.NodeID }

// Now returns the engine clock's time.
func (x *Execution) Now() time.Time { return x.e.cfg.Clock.Now() }

// NextAt sets when a recurring task runs next, instead of its Schedule;
// for a one-shot kind it turns the success into a reschedule to at.
func (x *Execution) NextAt(at time.Time) { x.next = at }

// Complete applies the success completion (delete a one-shot row, move a
// recurring one to its next instant) and fn's writes in one transaction,
// guarded by the claim's version: if the claim is no longer held, nothing is
// written, fn is not called and the error wraps store.ErrStaleFence. fn may
// be nil. Rows fn schedules due at once wake their pools after the commit.
// After Complete the engine applies no completion of its own, whatever the
// handler returns.
func (x *Execution) Complete(ctx context.Context, fn func(ctx context.Context, tx store.TxWriter) error) error {
	x.done.Store(true)
	c := x.success()
	if fn == nil {
		err := x.e.complete(ctx, x.Task, c)
		if c.Action != store.CompleteDelete {
			x.e.countCompletion(err)
		}
		return err
	}
	w := &wakingTx{now: c.Now}
	err := x.e.sch.CompleteTaskWith(ctx, x.Task, c, func(ctx context.Context, tx store.TxWriter) error {
		w.TxWriter = tx
		return fn(ctx, w)
	})
	x.e.countCompletion(err)
	if err == nil {
		for _, name := range w.due {
			x.e.wake(name)
		}
	}
	return err
}

func (x *Execution) success() store.Completion {
	now := x.Now()
	switch {
	case !x.next.IsZero():
		return store.Completion{Action: store.CompleteReschedule, Next: x.next, Now: now}
	case x.kind.Schedule != nil:
		return store.Completion{Action: store.CompleteReschedule, Next: x.kind.Schedule.Next(now), Now: now}
	}
	return store.Completion{Action: store.CompleteDelete, Now: now}
}

// run calls the handler and applies the completion it leads to.
func (x *Execution) run(ctx context.Context) {
	e := x.e
	err := x.call(ctx)
	if x.done.Load() {
		if err != nil && !errors.Is(err, store.ErrStaleFence) {
			e.log.Warn("task handler failed after completing", zap.Stringer("task", x.Task.TaskKey), zap.Error(err))
		}
		return
	}
	if e.dead.Load() {
		return // cut off from the database: the rescuer elsewhere revives the row
	}
	var c store.Completion
	switch {
	case err == nil:
		c = x.success()
	case e.execCtx.Err() != nil:
		// The shutdown deadline cancelled the callback: give the row back
		// untouched, due at once for another node.
		c = store.Completion{Action: store.CompleteRelease}
	default:
		failures := x.Task.ConsecutiveFailures + 1
		e.log.Warn("task failed", zap.Stringer("task", x.Task.TaskKey), zap.Int("consecutiveFailures", failures), zap.Error(err))
		c = store.Completion{Action: store.CompleteFailure, Next: x.Now().Add(e.cfg.Backoff(failures)), Now: x.Now()}
		if x.kind.Schedule == nil && x.kind.MaxFailures > 0 && failures >= x.kind.MaxFailures {
			e.log.Error("task gave up after too many failures", zap.Stringer("task", x.Task.TaskKey), zap.Int("failures", failures))
			c = store.Completion{Action: store.CompleteDelete, Now: x.Now()}
		}
	}
	if c.Action == store.CompleteDelete {
		e.completeDeleteAsync(x.Task)
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), e.cfg.HeartbeatInterval)
	defer cancel()
	err = e.sch.CompleteTask(cctx, x.Task, c)
	e.countCompletion(err)
	if err != nil {
		e.logCompletionError(x.Task, err)
	}
}

func (e *Engine) logCompletionError(claim store.Task, err error) {
	if errors.Is(err, store.ErrStaleFence) {
		e.log.Warn("completion rejected: claim no longer held", zap.Stringer("task", claim.TaskKey), zap.Error(err))
		return
	}
	e.log.Error("completion failed; the rescuer will revive the row", zap.Stringer("task", claim.TaskKey), zap.Error(err))
}

// complete applies c, group-committing plain deletes through the completer.
func (e *Engine) complete(ctx context.Context, claim store.Task, c store.Completion) error {
	if c.Action == store.CompleteDelete {
		return e.completeDelete(ctx, claim)
	}
	return e.sch.CompleteTask(ctx, claim, c)
}

// call runs the handler, turning a panic into an error.
func (x *Execution) call(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("task handler panicked: %v", r)
		}
	}()
	return x.kind.Handler(ctx, x)
}

// wakingTx records which kinds a handler scheduled due at once, to wake
// their pools after the commit.
type wakingTx struct {
	store.TxWriter
	now time.Time
	due []string
}

func (w *wakingTx) ScheduleTask(ctx context.Context, t store.NewTask, now time.Time) (bool, error) {
	created, err := w.TxWriter.ScheduleTask(ctx, t, now)
	if err == nil && created && !t.ExecutionTime.After(w.now) {
		w.due = append(w.due, t.Name)
	}
	return created, err
}

func (w *wakingTx) UpsertTask(ctx context.Context, t store.NewTask, now time.Time) (bool, error) {
	created, err := w.TxWriter.UpsertTask(ctx, t, now)
	if err == nil && !t.ExecutionTime.After(w.now) {
		w.due = append(w.due, t.Name)
	}
	return created, err
}
