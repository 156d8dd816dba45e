package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/store"
)

// pool is a fixed number of threads running the claims of some task kinds.
// Its loop runs one statement at a time, which completes the one-shot
// successes queued since the last one and claims as many due rows as the
// pool has free threads (see completer.go). Between statements it waits for
// a wake-up (a due row scheduled here or notified by another node), a queued
// completion, a freed thread after a full claim, or the poll interval.
type pool struct {
	e       *Engine
	name    string
	names   []string
	threads int
	busy    atomic.Int64
	wakeC   chan struct{} // buffered 1: "look for due rows now"
	freed   chan struct{} // buffered 1: a thread finished
	flushC  chan struct{} // buffered 1: a completion was queued
	exited  chan struct{} // closed when run returns
	// claimsDone is closed once the loop has stopped claiming: every claim
	// it made has been started.
	claimsDone     chan struct{}
	claimsDoneOnce sync.Once

	mu      sync.Mutex
	pending []completion // one-shot successes for the next statement
	dueAts  []time.Time  // due times of rows this node scheduled for later (wakeAt), ascending
}

func newPool(e *Engine, name string, threads int) *pool {
	return &pool{
		e: e, name: name, threads: threads,
		wakeC: make(chan struct{}, 1), freed: make(chan struct{}, 1), flushC: make(chan struct{}, 1),
		exited: make(chan struct{}), claimsDone: make(chan struct{}),
	}
}

func (p *pool) signal() {
	select {
	case p.wakeC <- struct{}{}:
	default:
	}
}

// run is the pool's loop. It claims until pollCtx ends, then only completes
// what its callbacks queue, until liveCtx ends; then it flushes the queue
// and returns. A node stopped by the watchdog writes nothing more.
func (p *pool) run(pollCtx, liveCtx context.Context) {
	defer close(p.exited)
	defer p.stopClaiming()
	cfg := p.e.cfg
	for !p.e.dead.Load() {
		claiming := pollCtx.Err() == nil
		if !claiming {
			p.stopClaiming()
		}
		if !claiming && liveCtx.Err() != nil {
			p.flush()
			return
		}
		p.gather()
		free := 0
		if claiming {
			free = p.threads - int(p.busy.Load())
		}
		batch := p.takePending()
		full, failed := false, false
		var covered time.Time // rows due by then were looked for by this pass
		if free > 0 || len(batch) > 0 {
			covered = cfg.Clock.Now()
			claims, err := p.step(batch, free)
			if err != nil {
				failed = true
				if !p.e.dead.Load() {
					p.e.log.Warn("claim or completion failed; retrying after the poll interval",
						zap.String("pool", p.name), zap.Int("completions", len(batch)), zap.Error(err))
				}
			}
			if p.e.dead.Load() {
				return // cut off: claims that reached us anyway are revived elsewhere
			}
			for _, c := range claims {
				p.start(c)
			}
			full = err == nil && free > 0 && len(claims) == free
			if !failed && (p.hasPending() || full && p.threads-int(p.busy.Load()) > 0) {
				continue // more to do at once
			}
		}
		var wake, flush, freed <-chan struct{}
		if !failed {
			// After a failure only the poll interval ends the wait, so a
			// database that is down is not hammered.
			wake, flush = p.wakeC, p.flushC
			if full || free <= 0 {
				freed = p.freed // saturated: claim again as soon as a thread is free
			}
		}
		done := pollCtx.Done()
		if !claiming {
			done = liveCtx.Done()
		}
		interval := cfg.PollInterval
		if !failed {
			interval = p.untilDue(interval, covered)
		}
		wait, stop := cfg.Clock.After(interval)
		select {
		case <-done:
		case <-wake:
		case <-flush:
		case <-freed:
		case <-wait:
		}
		stop()
	}
}

// wakeGranularity rounds the due times wakeAt keeps up to a multiple, so
// a stream of enqueues with one delay keeps at most delay/granularity of
// them.
const wakeGranularity = 10 * time.Millisecond

// wakeAt makes the pool look for due rows at at, if that is before its
// next poll: a row this node scheduled for later (a commit-job after its
// coalescing delay) is claimed when it falls due, not up to a poll
// interval after. Other nodes still find it by polling.
func (p *pool) wakeAt(at time.Time) {
	if r := at.Truncate(wakeGranularity); !r.Equal(at) {
		at = r.Add(wakeGranularity)
	}
	p.mu.Lock()
	i, found := slices.BinarySearchFunc(p.dueAts, at, time.Time.Compare)
	if !found {
		p.dueAts = slices.Insert(p.dueAts, i, at)
	}
	p.mu.Unlock()
	if !found && i == 0 {
		p.signal() // earlier than the current wait planned for
	}
}

// untilDue returns how long the pool waits: poll, or less when a row
// scheduled through wakeAt falls due sooner; zero when one fell due after
// covered, the time of the pass that just looked for due rows. Due times
// that passed are dropped.
func (p *pool) untilDue(poll time.Duration, covered time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.e.cfg.Clock.Now()
	n, missed := 0, false
	for n < len(p.dueAts) && !p.dueAts[n].After(now) {
		missed = missed || p.dueAts[n].After(covered)
		n++
	}
	p.dueAts = slices.Delete(p.dueAts, 0, n)
	switch {
	case missed:
		return 0
	case len(p.dueAts) == 0:
		return poll
	}
	return min(poll, p.dueAts[0].Sub(now))
}

// WakeAt makes this node's pool running kind name look for due rows at
// at, if that is before its next poll. Call it after scheduling a row of
// name due later (a commit-job after its coalescing delay), so the row is
// claimed when it falls due instead of up to a poll interval after: on
// PostgreSQL only rows due at once are NOTIFYed, and SQLite has no NOTIFY.
// An unknown name is ignored.
func (e *Engine) WakeAt(name string, at time.Time) {
	if p := e.poolOf[name]; p != nil {
		p.wakeAt(at)
	}
}

func (p *pool) stopClaiming() { p.claimsDoneOnce.Do(func() { close(p.claimsDone) }) }

// gatherWindow is how long a pool woken by a finished callback waits for
// the others still running, so that one statement carries all of their
// completions and claims their threads' next rows. Short callbacks finish
// within it and share a commit; long ones lose at most this much.
const gatherWindow = time.Millisecond

// gather waits up to gatherWindow (real time: it batches statements and
// decides nothing) for the pool's running callbacks to finish.
func (p *pool) gather() {
	if p.busy.Load() == 0 {
		return
	}
	t := time.NewTimer(gatherWindow)
	defer t.Stop()
	for p.busy.Load() > 0 {
		select {
		case <-p.freed:
		case <-t.C:
			return
		}
	}
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
		queued := x.run(ctx)
		cancel()
		if queued == nil {
			e.forget(x)
		}
		p.busy.Add(-1)
		if queued != nil {
			p.queue(*queued)
		}
		select {
		case p.freed <- struct{}{}:
		default:
		}
	}()
}

// forget removes x from the running set, whose claims are heartbeated.
func (e *Engine) forget(x *Execution) {
	e.mu.Lock()
	if e.running[x.Task.TaskKey] == x {
		delete(e.running, x.Task.TaskKey)
	}
	e.mu.Unlock()
}

// Execution is one claimed run of a task, handed to its Handler.
type Execution struct {
	// Task is the claimed row; Task.Version is the claim's fencing token.
	Task   store.Task
	e      *Engine
	kind   *Kind
	cancel context.CancelFunc
	next   time.Time // overrides the recurring kind's next instant
	data   []byte    // replaces task_data when the row is rescheduled
	wait   string    // what the rescheduled row waits for (store.Completion.WaitFor)

	queued      atomic.Bool // its success waits for the pool's statement
	completing  atomic.Bool // Complete was called
	mu          sync.Mutex
	settled     bool  // a Complete committed or found the claim stale
	completeErr error // the last Complete's other error (nothing written)
}

// Node returns the id of the node running the execution.
func (x *Execution) Node() string { return x.e.cfg.NodeID }

// Now returns the engine clock's time.
func (x *Execution) Now() time.Time { return x.e.cfg.Clock.Now() }

// Engine returns the engine running the execution, for a handler that
// schedules or reschedules other rows.
func (x *Execution) Engine() *Engine { return x.e }

// Store returns the engine's store.
func (x *Execution) Store() store.Scheduler { return x.e.sch }

// NextAt sets when a recurring task runs next, instead of its Schedule;
// for a one-shot kind it turns the success into a reschedule to at.
func (x *Execution) NextAt(at time.Time) { x.next = at }

// NextData replaces the row's task_data when its success reschedules it
// (a recurring kind, or NextAt), e.g. a cursor for the next pick. Nil
// keeps the data.
func (x *Execution) NextData(data []byte) { x.data = data }

// WaitFor makes the reschedule that NextAt asked for wait for key as well
// (store.Completion.WaitFor): the event key names, such as the table's job
// row finishing, makes the row due before at.
func (x *Execution) WaitFor(key string) { x.wait = key }

// Complete applies the success completion (delete a one-shot row, move a
// recurring one to its next instant) and fn's writes in one transaction,
// guarded by the claim's version: if the claim is no longer held, nothing is
// written, fn is not called and the error wraps store.ErrStaleFence. fn may
// be nil. Rows fn schedules due at once wake their pools after the commit.
// Once a Complete committed, or was rejected with ErrStaleFence, the engine
// applies no completion of its own, whatever the handler returns. A
// Complete that failed otherwise (fn's error, the database unreachable)
// wrote nothing: unless a later call succeeds, the run counts as a failure
// (consecutive_failures, backoff, Kind.MaxFailures) even if the handler
// returns nil, so the task runs again and fn's writes are not lost.
func (x *Execution) Complete(ctx context.Context, fn func(ctx context.Context, tx store.TxWriter) error) error {
	x.completing.Store(true)
	c := x.success()
	var err error
	switch {
	case fn == nil && c.Action == store.CompleteDelete:
		err = x.e.completeDelete(ctx, x) // counted by the pool
	case fn == nil:
		err = x.e.sch.CompleteTask(ctx, x.Task, c)
		x.e.countCompletion(err)
	default:
		w := &wakingTx{now: c.Now}
		err = x.e.sch.CompleteTaskWith(ctx, x.Task, c, func(ctx context.Context, tx store.TxWriter) error {
			w.TxWriter = tx
			return fn(ctx, w)
		})
		x.e.countCompletion(err)
		if err == nil {
			for _, name := range w.due {
				x.e.wake(name)
			}
		}
	}
	if err == nil && c.Action == store.CompleteReschedule && !c.Next.After(c.Now) {
		x.e.wake(x.Task.Name) // due again at once (a cursor's next batch)
	}
	x.settle(err)
	return err
}

// outcome returns whether a Complete settled the claim, and else the error
// of a Complete that failed.
func (x *Execution) outcome() (settled bool, completeErr error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.settled, x.completeErr
}

func (x *Execution) success() store.Completion {
	now := x.Now()
	switch {
	case !x.next.IsZero():
		return store.Completion{Action: store.CompleteReschedule, Next: x.next, Data: x.data, WaitFor: x.wait, Now: now}
	case x.kind.Schedule != nil:
		return store.Completion{Action: store.CompleteReschedule, Next: x.kind.Schedule.Next(now), Data: x.data, Now: now}
	}
	return store.Completion{Action: store.CompleteDelete, Now: now}
}

// run calls the handler and applies the completion it leads to. A plain
// one-shot success is not applied here: run returns it for the pool's next
// statement, and the thread is free at once.
func (x *Execution) run(ctx context.Context) *completion {
	e := x.e
	err := x.call(ctx)
	settled, completeErr := x.outcome()
	if settled {
		if err != nil && !errors.Is(err, store.ErrStaleFence) {
			e.log.Warn("task handler failed after completing", zap.Stringer("task", x.Task.TaskKey), zap.Error(err))
		}
		return nil
	}
	if completeErr != nil && err == nil {
		err = fmt.Errorf("the handler returned nil after its completion failed: %w", completeErr)
	}
	if e.dead.Load() {
		return nil // cut off from the database: the rescuer elsewhere revives the row
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
		x.queued.Store(true)
		return &completion{x: x}
	}
	cctx, cancel := e.writeTimeout()
	defer cancel()
	err = e.sch.CompleteTask(cctx, x.Task, c)
	e.countCompletion(err)
	if err != nil {
		e.logCompletionError(x.Task, err)
	}
	return nil
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

func (w *wakingTx) ScheduleTasks(ctx context.Context, ts []store.NewTask, now time.Time) (int, error) {
	created, err := w.TxWriter.ScheduleTasks(ctx, ts, now)
	if err == nil && created > 0 {
		for _, t := range ts {
			if !t.ExecutionTime.After(w.now) {
				w.due = append(w.due, t.Name)
				break // one wake per call is enough for the common one-kind batch
			}
		}
	}
	return created, err
}

func (w *wakingTx) EnqueueTablesForPolicy(ctx context.Context, e store.PolicyEnqueue) (int, int64, error) {
	created, next, err := w.TxWriter.EnqueueTablesForPolicy(ctx, e)
	if err == nil && created > 0 && !e.At.After(w.now) {
		w.due = append(w.due, e.TaskName)
	}
	return created, next, err
}

func (w *wakingTx) UpsertTask(ctx context.Context, t store.NewTask, now time.Time) (bool, error) {
	created, err := w.TxWriter.UpsertTask(ctx, t, now)
	if err == nil && !t.ExecutionTime.After(w.now) {
		w.due = append(w.due, t.Name)
	}
	return created, err
}
