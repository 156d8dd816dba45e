package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// This file is the gates every cron-job and commit-job passes before it
// starts a job: the table still the one the row names, no job in flight on
// it, each type outside its cooldown; and the deferrals when one holds.

// errSuperseded is liveTable's error for a dropped and recreated table's
// old row.
var errSuperseded = errors.New("table was dropped and recreated")

// liveTable returns table row id if it is its name's live incarnation (the
// newest row): the old row of a dropped and recreated table gets no more
// jobs, its name's new row does (policy-expand enqueues only live rows).
func (f *Flow) liveTable(ctx context.Context, id int64) (store.Table, error) {
	tbl, err := f.st.GetTable(ctx, id)
	if err != nil {
		return store.Table{}, err
	}
	cur, err := f.st.FindTable(ctx, tbl.Catalog, tbl.Namespace, tbl.Name)
	if err != nil {
		return store.Table{}, err
	}
	if cur.ID != tbl.ID {
		return store.Table{}, fmt.Errorf("%w: table %d is now table %d (table-uuid %s)", errSuperseded, tbl.ID, cur.ID, cur.UUID)
	}
	return tbl, nil
}

// gated is one maintenance type to run: its policy and parsed content.
type gated struct {
	p store.Policy
	c policy.Content
}

// verdict is what gate decided for one table.
type verdict struct {
	// run are the types that may run now; cooling the ones inside their
	// cooldown, which ends for the first of them at until.
	run, cooling []gated
	until        time.Time
}

// busy reports whether the table has a job in flight. The handlers ask
// first, as a fast path: the partial unique index over in-flight rows
// decides (start turns losing that race into a deferral too).
func (f *Flow) busy(ctx context.Context, tableID int64) (bool, error) {
	open, err := f.st.TableInFlightJobs(ctx, tableID)
	return len(open) > 0, err
}

// gate says which of types may run on the table now (the table was found
// free): those outside their cooldown.
func (f *Flow) gate(ctx context.Context, tableID int64, types []gated, now time.Time) (verdict, error) {
	var v verdict
	for _, g := range types {
		end, err := f.coolingUntil(ctx, tableID, g, now)
		if err != nil {
			return verdict{}, err
		}
		if end.IsZero() {
			v.run = append(v.run, g)
			continue
		}
		v.cooling = append(v.cooling, g)
		if v.until.IsZero() || end.Before(v.until) {
			v.until = end
		}
	}
	return v, nil
}

// deferBusy puts the claimed cron-job or commit-job back because its table
// has a job in flight: due when that job's row finishes (FinishJob wakes
// rows waiting for the table), and at the latest after BusyRecheck. Its
// data (a commit-job's owed types) is kept. A job row that finished between
// the gate and this reschedule woke nobody, so the table is looked at once
// more afterwards and the row made due at once if it is free.
func (f *Flow) deferBusy(ctx context.Context, x *scheduler.Execution, kind string, tableID int64, fields ...zap.Field) error {
	x.NextData(x.Task.Data)
	x.WaitFor(store.TableWaitKey(tableID))
	if err := f.deferUntil(ctx, x, kind, "in flight", x.Now().Add(f.cfg.BusyRecheck), nil, fields...); err != nil {
		return err
	}
	if busy, err := f.busy(ctx, tableID); err != nil || busy {
		return nil // the finish of the job in flight wakes it
	}
	if err := x.Engine().Reschedule(ctx, x.Task.TaskKey, x.Now(), nil); err != nil && !errors.Is(err, store.ErrNotFound) {
		f.cfg.Log.Warn("deferred job: the table is free again but its row could not be made due; it runs at its fallback time",
			append(fields, zap.String("kind", kind), zap.Error(err))...)
	}
	return nil
}

// deferUntil puts the claimed row back due at at (with data, nil keeping
// the row's) instead of deleting it: a job that cannot run now is deferred,
// never dropped. A later trigger of the same row coalesces into it.
func (f *Flow) deferUntil(ctx context.Context, x *scheduler.Execution, kind, reason string, at time.Time, data []byte, fields ...zap.Field) error {
	f.mu.Lock()
	f.skipped[kind+"/"+reason]++
	f.mu.Unlock()
	x.NextAt(at)
	if data != nil {
		x.NextData(data)
	}
	f.cfg.Log.Info("deferred", append([]zap.Field{zap.String("kind", kind), zap.String("reason", reason),
		zap.Time("due", at)}, fields...)...)
	return x.Complete(ctx, nil)
}

// coolingUntil returns when the (table, policy)'s cooldown ends, zero if
// it is not inside one: its last job finished less than its minimum
// interval ago.
func (f *Flow) coolingUntil(ctx context.Context, tableID int64, g gated, now time.Time) (time.Time, error) {
	d := f.minInterval(g.c)
	if d <= 0 {
		return time.Time{}, nil
	}
	last, err := f.st.LastFinished(ctx, tableID, g.p.ID)
	if err != nil {
		return time.Time{}, err
	}
	return coolingEnd(last, now, d), nil
}

// minInterval is a policy's cooldown: its minIntervalMs, else the
// coordinator's task.<type>.minIntervalMs, else the type's default.
func (f *Flow) minInterval(c policy.Content) time.Duration {
	d := policy.DefaultMinInterval(c.Type)
	if v, ok := f.cfg.MinInterval[c.Type]; ok {
		d = v
	}
	if c.MinInterval != nil {
		d = *c.MinInterval
	}
	return d
}

// coolingEnd is when a cooldown of d after a job that finished at last
// ends, zero if it has ended by now (or there was no job, or no cooldown).
func coolingEnd(last, now time.Time, d time.Duration) time.Time {
	if d <= 0 || last.IsZero() || now.Sub(last) >= d {
		return time.Time{}
	}
	return last.Add(d)
}
