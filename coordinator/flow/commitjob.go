package flow

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// ---- commit-job ----

// UpsertCommit upserts the table's commit-job, due after the commit delay;
// a burst of commits coalesces into one row. eng must run the flow's kinds.
// created reports whether a new row was made (false: the commit coalesced
// into a pending row). It wakes this node's commit pool when the row falls
// due after the commit delay instead of at its next poll.
func (f *Flow) UpsertCommit(ctx context.Context, eng *scheduler.Engine, tableID int64) (created bool, err error) {
	created, due, err := f.commits.Upsert(ctx, engineUpserter{eng}, tableID, eng.Clock().Now())
	if err == nil && f.commits.delay > 0 {
		eng.WakeAt(KindCommitJob, due)
	}
	return created, err
}

// CommitJobs are the flow's commit-jobs as the ways in that upsert them in
// their own transaction see them (the webhook, through httpapi.Config):
// the same delay, resolved once from FlowConfig.CommitDelay.
func (f *Flow) CommitJobs() CommitJobs { return f.commits }

// CommitJobs is how a commit becomes a commit-job, whichever way it was
// heard of (the webhook, the catalog watcher, NOTIFY, enqueue-commit): the
// one place the commit delay is resolved and the one upsert of the row.
// The zero value makes commit-jobs due at once.
type CommitJobs struct{ delay time.Duration }

// NewCommitJobs resolves a configured commit delay (0: DefaultCommitDelay;
// negative: none, the row is due at once).
func NewCommitJobs(configured time.Duration) CommitJobs {
	if configured == 0 {
		return CommitJobs{delay: DefaultCommitDelay}
	}
	return CommitJobs{delay: max(0, configured)}
}

// Delay is how long a commit-job waits for more commits to its table.
func (c CommitJobs) Delay() time.Duration { return c.delay }

// TaskUpserter upserts a task row: a store.Scheduler, or the TxWriter of
// a transaction that records something with it (the webhook's events).
type TaskUpserter interface {
	UpsertTask(ctx context.Context, t store.NewTask, now time.Time) (created bool, err error)
}

// Upsert upserts the table's commit-job row through up, due the delay
// after now, so that a burst of commits coalesces into the pending row. It
// returns whether it made a new row and when the row is due.
func (c CommitJobs) Upsert(ctx context.Context, up TaskUpserter, tableID int64, now time.Time) (created bool, due time.Time, err error) {
	due = now.Add(c.delay)
	created, err = up.UpsertTask(ctx, store.NewTask{TaskKey: CommitJobKey(tableID), ExecutionTime: due}, now)
	return created, due, err
}

// engineUpserter upserts through an engine, which wakes its pool when the
// row is due at once; the engine's clock is now.
type engineUpserter struct{ eng *scheduler.Engine }

func (u engineUpserter) UpsertTask(ctx context.Context, t store.NewTask, _ time.Time) (bool, error) {
	return u.eng.Upsert(ctx, t)
}

// commitJob runs the table's onCommit types as one chain.
func (f *Flow) commitJob(ctx context.Context, x *scheduler.Execution) error {
	tableID, err := strconv.ParseInt(x.Task.Instance, 10, 64)
	if err != nil {
		f.skip(KindCommitJob, "bad instance")
		return x.Complete(ctx, nil)
	}
	if busy, err := f.busy(ctx, tableID); err != nil || busy {
		if err != nil {
			return err
		}
		return f.deferBusy(ctx, x, KindCommitJob, tableID, zap.Int64("table", tableID))
	}
	tbl, err := f.liveTable(ctx, tableID)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, errSuperseded) {
		f.skip(KindCommitJob, "table gone", zap.Int64("table", tableID), zap.Error(err))
		return x.Complete(ctx, nil)
	}
	if err != nil {
		return err
	}
	eff, err := f.st.EffectivePolicies(ctx, tbl.Catalog, tbl.Namespace, tbl.Name)
	if err != nil {
		return err
	}
	owed, err := owedTypes(x.Task.Data)
	if err != nil {
		f.cfg.Log.Warn("commit-job: unreadable task data; running every onCommit type", zap.Int64("table", tableID), zap.Error(err))
	}
	var types []gated
	for _, e := range eff {
		t, ok := policy.MaintenanceTypeOf(e.Policy.Type)
		if !ok || !e.Policy.Enabled || (owed != nil && !slices.Contains(owed, t)) {
			continue
		}
		c, err := policy.ParseContent(t, e.Policy.Content)
		if err != nil || !c.Schedule.OnCommit {
			continue
		}
		types = append(types, gated{e.Policy, c})
	}
	if len(types) == 0 {
		f.skip(KindCommitJob, "no onCommit policy", zap.Int64("table", tableID))
		return x.Complete(ctx, nil)
	}
	slices.SortFunc(types, func(a, b gated) int { return policy.Rank(a.c.Type) - policy.Rank(b.c.Type) })
	v, err := f.gate(ctx, tableID, types, x.Now())
	if err != nil {
		return err
	}
	field := zap.Int64("table", tableID)
	switch {
	case len(v.run) == 0:
		return f.deferUntil(ctx, x, KindCommitJob, "cooldown", v.until, owedData(v.cooling), field)
	case len(v.cooling) > 0:
		// The types inside their cooldown are owed this commit too: the
		// row stays, due when the first cooldown ends, for those only.
		x.NextAt(v.until)
		x.NextData(owedData(v.cooling))
	}
	return f.start(ctx, x, KindCommitJob, tbl, v.run, store.TriggerCommit)
}

// commitOwed is a commit-job's task data: the maintenance types a commit
// still owes after some of them ran (the others were inside their
// cooldown). No data means every onCommit type; a new commit resets the
// row to that.
type commitOwed struct {
	Types []policy.Type `json:"types"`
}

func owedData(gs []gated) []byte {
	var o commitOwed
	for _, g := range gs {
		o.Types = append(o.Types, g.c.Type)
	}
	b, _ := json.Marshal(o) // a struct of strings always marshals
	return b
}

// owedTypes reads a commit-job's task data; nil means every type.
func owedTypes(data []byte) ([]policy.Type, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var o commitOwed
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, err
	}
	return o.Types, nil
}
