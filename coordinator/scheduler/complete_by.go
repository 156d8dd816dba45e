package scheduler

import (
	"context"
	"errors"

	"github.com/tms-dev/tms/store"
)

// CompleteBy settles the claim with one store call of the handler's own:
// fn must complete the claimed task under its version (a guarded
// completion, such as store.Expander.CompleteExpand, which moves the row and
// enqueues a batch in one statement) and return the names of the kinds
// whose rows it made due now, so their pools wake. It gives Complete's
// guarantees without a transaction's own round trips.
func (x *Execution) CompleteBy(ctx context.Context, fn func(ctx context.Context, claim store.Task) (wake []string, err error)) error {
	x.completing.Store(true)
	wake, err := fn(ctx, x.Task)
	x.e.countCompletion(err)
	if err == nil {
		for _, name := range wake {
			x.e.wake(name)
		}
	}
	x.settle(err)
	return err
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
