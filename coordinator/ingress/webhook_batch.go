package ingress

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/store"
)

// This file is the webhook's group commit. Every request's events must be
// recorded together with their commit-jobs in one transaction, and on
// PostgreSQL a transaction's cost is mostly its commit (a WAL flush). So
// requests that arrive while a transaction runs queue up, and the next
// transaction carries all of them: under load many requests share one
// commit, and a lone request waits for nothing.

// maxBatchEvents bounds the events of one transaction.
const maxBatchEvents = 2000

// batchTimeout bounds one transaction. It does not depend on the requests'
// contexts: a sender that hung up gets no answer, retries, and its events
// are then duplicates.
const batchTimeout = 30 * time.Second

// ingestRequest is one request's events of known tables, with where their
// results go.
type ingestRequest struct {
	events  []store.CommitEvent
	results []*EventResult // parallel to events
	done    chan error     // buffered 1
}

// batcher runs queued requests' events in shared transactions, one at a
// time, on a goroutine that exists only while there is work.
type batcher struct {
	sch     store.Scheduler
	now     func() time.Time
	commits flow.CommitJobs
	onDue   func(at time.Time) // Config.OnCommitJobDue; may be nil

	mu      sync.Mutex
	queue   []*ingestRequest
	running bool
}

// submit queues req and waits until its transaction committed or failed,
// or ctx ends.
func (b *batcher) submit(ctx context.Context, req *ingestRequest) error {
	b.mu.Lock()
	b.queue = append(b.queue, req)
	if !b.running {
		b.running = true
		go b.drain()
	}
	b.mu.Unlock()
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drain runs transactions until the queue is empty.
func (b *batcher) drain() {
	for {
		b.mu.Lock()
		n, events := 0, 0
		for n < len(b.queue) && (n == 0 || events+len(b.queue[n].events) <= maxBatchEvents) {
			events += len(b.queue[n].events)
			n++
		}
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		if n == 0 {
			b.queue = nil
			b.running = false
		}
		b.mu.Unlock()
		if n == 0 {
			return
		}
		err := b.commit(batch)
		for _, req := range batch {
			req.done <- err
		}
	}
}

// commit records the batch's events and upserts their tables'
// commit-jobs in one transaction. Keys are recorded in event-id order and
// jobs upserted in table order, so concurrent nodes lock rows in one order
// and cannot deadlock. Results are written only when it committed.
func (b *batcher) commit(batch []*ingestRequest) error {
	type item struct {
		ev  store.CommitEvent
		res *EventResult
		seq int // position in the batch, for stable orders
	}
	var items []item
	for _, req := range batch {
		for i, ev := range req.events {
			items = append(items, item{ev: ev, res: req.results[i], seq: len(items)})
		}
	}
	now := b.now()
	var due time.Time
	status := make([]string, len(items))
	upserted := false
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	err := b.sch.WithTx(ctx, func(ctx context.Context, tx store.TxWriter) error {
		clear(status)
		upserted = false
		order := slices.Clone(items)
		slices.SortStableFunc(order, func(x, y item) int { return strings.Compare(x.ev.EventID, y.ev.EventID) })
		var fresh []item
		for _, it := range order {
			it.ev.ReceivedAt = now
			ok, err := tx.RecordCommitEvent(ctx, it.ev)
			if err != nil {
				return err
			}
			if ok {
				fresh = append(fresh, it)
				status[it.seq] = StatusCoalesced
			} else {
				status[it.seq] = StatusDuplicate
			}
		}
		// One upsert per table; its first fresh event in arrival order is
		// the one "enqueued" when the row was created.
		slices.SortStableFunc(fresh, func(x, y item) int {
			if x.ev.TableID != y.ev.TableID {
				return cmpInt64(x.ev.TableID, y.ev.TableID)
			}
			return x.seq - y.seq
		})
		for j, it := range fresh {
			if j > 0 && fresh[j-1].ev.TableID == it.ev.TableID {
				continue
			}
			created, at, err := b.commits.Upsert(ctx, tx, it.ev.TableID, now)
			if err != nil {
				return err
			}
			if created {
				status[it.seq] = StatusEnqueued
			}
			due, upserted = at, true
		}
		return nil
	})
	if err != nil {
		return err
	}
	if upserted && b.onDue != nil {
		b.onDue(due)
	}
	for i, it := range items {
		it.res.Status = status[i]
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
