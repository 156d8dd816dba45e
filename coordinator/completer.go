package coordinator

import (
	"context"
	"fmt"

	"github.com/tms-dev/tms/store"
)

// maxCompletionBatch bounds the rows of one group-committed completion.
const maxCompletionBatch = 1000

// completion is one one-shot success waiting in the completer.
type completion struct {
	claim store.Task
	done  chan error
}

// completer group-commits the plain deletes of one-shot successes: it takes
// one request, adds whatever else is already waiting, and deletes them all
// in one statement, each row guarded by its own claim's version. While a
// batch commits the next one gathers, so a busy node pays one commit per
// batch instead of per task, and an idle one adds no delay.
//
// When ctx ends it flushes what is queued and returns; Run stops it only
// after every callback returned, so nothing is queued after that.
func (e *Engine) completer(ctx context.Context) {
	for {
		var batch []completion
		select {
		case <-ctx.Done():
			if e.dead.Load() {
				return // cut off: the rows are revived elsewhere
			}
			select {
			case c := <-e.completions:
				batch = append(batch, c)
			default:
				return
			}
		case c := <-e.completions:
			batch = append(batch, c)
		}
	gather:
		for len(batch) < maxCompletionBatch {
			select {
			case c := <-e.completions:
				batch = append(batch, c)
			default:
				break gather
			}
		}
		claims := make([]store.Task, len(batch))
		for i, c := range batch {
			claims[i] = c.claim
		}
		cctx, cancel := context.WithTimeout(context.Background(), e.cfg.HeartbeatInterval)
		stale, err := e.sch.CompleteTasks(cctx, claims, e.cfg.Clock.Now())
		cancel()
		isStale := make(map[store.TaskKey]bool, len(stale))
		for _, k := range stale {
			isStale[k] = true
		}
		for _, c := range batch {
			var cerr error
			switch {
			case err != nil:
				cerr = err
			case isStale[c.claim.TaskKey]:
				cerr = fmt.Errorf("%w: complete task: task %s version %d is no longer held", store.ErrStaleFence, c.claim.TaskKey, c.claim.Version)
			}
			e.countCompletion(cerr)
			if c.done != nil {
				c.done <- cerr
			} else if cerr != nil {
				e.logCompletionError(c.claim, cerr)
			}
		}
	}
}

// completeDeleteAsync queues a one-shot success and returns at once: the
// row stays picked (so nobody else claims it) until the completer commits,
// milliseconds later, so the thread is free for the next claim.
func (e *Engine) completeDeleteAsync(claim store.Task) {
	e.completions <- completion{claim: claim}
}

// completeDelete hands a one-shot success to the completer and waits for
// its verdict.
func (e *Engine) completeDelete(ctx context.Context, claim store.Task) error {
	c := completion{claim: claim, done: make(chan error, 1)}
	select {
	case e.completions <- c:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
