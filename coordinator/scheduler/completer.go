package scheduler

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/store"
)

// maxCompletionBatch bounds the completions one statement carries.
const maxCompletionBatch = 1000

// completion is a one-shot success waiting for its pool's next statement.
type completion struct {
	x *Execution
	// done receives the verdict of a caller waiting for it (Complete); nil
	// for a completion queued when the handler returned, whose execution
	// the verdict also removes from the running set (it stays there, and
	// heartbeated, until its row is deleted).
	done chan error
}

// The pool group-commits the plain deletes of one-shot successes: a thread
// whose handler returned nil queues its completion and is free at once, and
// the pool's next statement deletes every queued row, each guarded by its
// own claim's version, in the same transaction as the claim of the next due
// rows (store.Scheduler.CompleteAndClaim). A busy node pays one commit per
// batch, finishing one batch and taking the next; before each statement the
// pool waits up to gatherWindow for its other running callbacks, so short
// ones share it. The row stays picked, and heartbeated, until that commit,
// so no other node can claim it; a statement that fails is retried with the
// same completions after the poll interval.

// queue hands c to the pool's next statement.
func (p *pool) queue(c completion) {
	p.mu.Lock()
	p.pending = append(p.pending, c)
	p.mu.Unlock()
	select {
	case p.flushC <- struct{}{}:
	default:
	}
}

// takePending removes and returns up to maxCompletionBatch queued
// completions.
func (p *pool) takePending() []completion {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(p.pending), maxCompletionBatch)
	if n == 0 {
		return nil
	}
	batch := make([]completion, n)
	copy(batch, p.pending)
	p.pending = append(p.pending[:0], p.pending[n:]...)
	return batch
}

// requeue puts back completions whose statement failed, ahead of newer
// ones.
func (p *pool) requeue(batch []completion) {
	p.mu.Lock()
	p.pending = append(batch, p.pending...)
	p.mu.Unlock()
}

func (p *pool) hasPending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending) > 0
}

// step runs one statement: it completes batch and, when free is positive,
// claims up to free due rows. The statement is not cancelled with the pool
// (only by the watchdog, or after writeTimeout): a claim that committed must
// reach the pool, or its rows would wait for the rescuer. On an error the queued completions go back to the pool for the
// next try (a waiting caller gets the error instead).
func (p *pool) step(batch []completion, free int) ([]store.Task, error) {
	e := p.e
	ctx, cancel := e.writeTimeout()
	defer cancel()
	done := make([]store.Task, len(batch))
	for i, c := range batch {
		done[i] = c.x.Task
	}
	now := e.cfg.Clock.Now()
	r := store.ClaimRequest{Names: p.names, Node: e.cfg.NodeID, Limit: free, Now: now}
	claimed, stale, err := e.sch.CompleteAndClaim(ctx, done, now, r)
	if err != nil {
		var retry []completion
		for _, c := range batch {
			if c.done != nil {
				c.done <- err
			} else {
				retry = append(retry, c)
			}
		}
		if len(retry) > 0 {
			p.requeue(retry)
		}
		return nil, err
	}
	e.stats.claimed.Add(int64(len(claimed)))
	isStale := make(map[store.TaskKey]bool, len(stale))
	for _, k := range stale {
		isStale[k] = true
	}
	for _, c := range batch {
		var cerr error
		if isStale[c.x.Task.TaskKey] {
			cerr = fmt.Errorf("%w: complete task: task %s version %d is no longer held", store.ErrStaleFence, c.x.Task.TaskKey, c.x.Task.Version)
		}
		e.countCompletion(cerr)
		if c.done != nil {
			c.done <- cerr
			continue
		}
		e.forget(c.x)
		if cerr != nil {
			e.logCompletionError(c.x.Task, cerr)
		}
	}
	return claimed, nil
}

// flush completes what is queued, without claiming, until nothing is left
// or a statement fails. Run calls it through the pool's loop when it stops.
func (p *pool) flush() {
	for !p.e.dead.Load() {
		batch := p.takePending()
		if len(batch) == 0 {
			return
		}
		if _, err := p.step(batch, 0); err != nil {
			p.e.log.Error("completions not written at shutdown; the rescuer will revive their rows",
				zap.String("pool", p.name), zap.Error(err))
			for _, c := range p.takePending() {
				p.e.forget(c.x)
			}
			return
		}
	}
}

// completeDelete hands a one-shot success to its pool and waits for its
// verdict.
func (e *Engine) completeDelete(ctx context.Context, x *Execution) error {
	p := e.poolOf[x.Task.Name]
	c := completion{x: x, done: make(chan error, 1)}
	p.queue(c)
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-p.exited:
		select {
		case err := <-c.done:
			return err
		default:
			return fmt.Errorf("complete task %s: the node stopped before writing the completion", x.Task.TaskKey)
		}
	}
}

func (e *Engine) logCompletionError(claim store.Task, err error) {
	if errors.Is(err, store.ErrStaleFence) {
		e.log.Warn("completion rejected: claim no longer held", zap.Stringer("task", claim.TaskKey), zap.Error(err))
		return
	}
	e.log.Error("completion failed; the rescuer will revive the row", zap.Stringer("task", claim.TaskKey), zap.Error(err))
}
