package coordinator

import (
	"context"
	"errors"

	"github.com/tms-dev/tms/store"
)

// completeExpand settles a policy-expand claim with one store call that
// enqueues the batch and moves the row (store.Expander.CompleteExpand):
// the same guarantees as Complete, without a transaction's own round trips.
// A row due again at once (more tables in the instant) wakes its pool.
func (x *Execution) completeExpand(ctx context.Context, ex store.Expander, e store.PolicyEnqueue, m store.ExpandMove) (int64, error) {
	x.completing.Store(true)
	created, next, err := ex.CompleteExpand(ctx, x.Task, e, m)
	x.e.countCompletion(err)
	if err == nil && (next != 0 || !m.Done.After(m.Now)) {
		x.e.wake(x.Task.Name)
	}
	if err == nil && created > 0 && !e.At.After(m.Now) {
		x.e.wake(e.TaskName)
	}
	x.settle(err)
	return next, err
}

// settle records a completion's result: a committed or stale completion
// settles the claim, another error is kept unless one already settled it.
func (x *Execution) settle(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err == nil || errors.Is(err, store.ErrStaleFence) {
		x.settled, x.completeErr = true, nil
	} else if !x.settled {
		x.completeErr = err
	}
}
