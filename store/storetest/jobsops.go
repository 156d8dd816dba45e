package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// exerciseJobsOps covers the coordinator's ledger reads and housekeeping:
// LastFinished, ListInFlightJobs and PurgeJobs.
func exerciseJobsOps(t *testing.T, setup func(*testing.T) *bundle) {
	b := setup(t)
	ta, tb := b.table(t, "a"), b.table(t, "b")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	finish := func(j store.Job, at time.Time) {
		t.Helper()
		require.NoError(t, b.s.FinishJob(b.ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded, At: at}))
	}

	// RegisterTables: bulk and idempotent; a bad ref writes nothing.
	refs := []store.TableRef{{Catalog: "bulk", Namespace: "n", Name: "x", UUID: "u1"}, {Catalog: "bulk", Namespace: "n", Name: "y", UUID: "u2"}}
	n, err := b.s.RegisterTables(b.ctx, refs)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = b.s.RegisterTables(b.ctx, append(refs, store.TableRef{Catalog: "bulk", Namespace: "n", Name: "x", UUID: "u3"}))
	require.NoError(t, err)
	require.Equal(t, 1, n, "a new uuid is a new incarnation")
	x, err := b.s.FindTable(b.ctx, "bulk", "n", "x")
	require.NoError(t, err)
	require.Equal(t, "u3", x.UUID)
	_, err = b.s.RegisterTables(b.ctx, []store.TableRef{{Catalog: "bulk", Namespace: "n", Name: "z", UUID: "u4"}, {Catalog: "bulk", Name: "bad", UUID: "u5"}})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = b.s.FindTable(b.ctx, "bulk", "n", "z")
	require.ErrorIs(t, err, store.ErrNotFound)

	// LastFinished: zero until a row of that (table, policy) finishes.
	last, err := b.s.LastFinished(b.ctx, ta.ID, 7)
	require.NoError(t, err)
	require.True(t, last.IsZero())
	// Table a, policy 7: five finished rows, one a day; policy 8: one, on day 0.
	var a7 []store.Job
	for d := range 5 {
		j := b.job(t, ta.ID, 7)
		finish(j, base.Add(time.Duration(d)*24*time.Hour))
		a7 = append(a7, j)
	}
	a8 := b.job(t, ta.ID, 8)
	finish(a8, base)
	// Table b, policy 7: two finished on days 0 and 1, then one in flight.
	b1 := b.job(t, tb.ID, 7)
	finish(b1, base)
	b2 := b.job(t, tb.ID, 7)
	finish(b2, base.Add(24*time.Hour))
	bFlight := b.job(t, tb.ID, 7)
	aFlight := b.job(t, ta.ID, 9)

	last, err = b.s.LastFinished(b.ctx, ta.ID, 7)
	require.NoError(t, err)
	require.Equal(t, base.Add(4*24*time.Hour), last)
	last, err = b.s.LastFinished(b.ctx, tb.ID, 7)
	require.NoError(t, err)
	require.Equal(t, base.Add(24*time.Hour), last, "an in-flight row does not count")

	// TableInFlightJobs: only that table's open rows.
	open, err := b.s.TableInFlightJobs(b.ctx, ta.ID)
	require.NoError(t, err)
	require.Len(t, open, 1)
	require.Equal(t, aFlight.ID, open[0].ID)
	open, err = b.s.TableInFlightJobs(b.ctx, 1<<40)
	require.NoError(t, err)
	require.Empty(t, open)

	// LatestJobs: each table's newest row, newest first.
	latest, err := b.s.LatestJobs(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, latest, 2)
	require.Equal(t, []int64{aFlight.ID, bFlight.ID}, []int64{latest[0].ID, latest[1].ID})
	latest, err = b.s.LatestJobs(b.ctx, 1)
	require.NoError(t, err)
	require.Len(t, latest, 1)

	// TaskCounts: queue depth per kind.
	now := time.Now().UTC()
	for i, at := range []time.Time{now.Add(-time.Minute), now.Add(-time.Second), now.Add(time.Hour)} {
		_, err := b.s.ScheduleTask(b.ctx, store.NewTask{TaskKey: store.TaskKey{Name: "kind-x", Instance: fmt.Sprint(i)}, ExecutionTime: at}, now)
		require.NoError(t, err)
	}
	_, err = b.s.ScheduleTask(b.ctx, store.NewTask{TaskKey: store.TaskKey{Name: "kind-a", Instance: "1"}, ExecutionTime: now.Add(time.Hour)}, now)
	require.NoError(t, err)
	claimed, err := b.s.ClaimTasks(b.ctx, store.ClaimRequest{Names: []string{"kind-x"}, Node: "n1", Limit: 1, Now: now})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	counts, err := b.s.TaskCounts(b.ctx, now)
	require.NoError(t, err)
	require.Equal(t, []store.KindCount{{Name: "kind-a", Total: 1}, {Name: "kind-x", Total: 3, Due: 1, Picked: 1}}, counts)

	// ListInFlightJobs pages by id across tables.
	page, err := b.s.ListInFlightJobs(b.ctx, 0, 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, bFlight.ID, page[0].ID)
	page, err = b.s.ListInFlightJobs(b.ctx, page[0].ID, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, aFlight.ID, page[0].ID)
	require.True(t, page[0].InFlight())
	_, err = b.s.ListInFlightJobs(b.ctx, 0, 0)
	require.ErrorIs(t, err, store.ErrInvalidArgument)

	// Bad input changes nothing.
	_, err = b.s.PurgeJobs(b.ctx, store.Purge{KeepPerTable: -1})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	// No limits: nothing goes.
	purged, err := b.s.PurgeJobs(b.ctx, store.Purge{})
	require.NoError(t, err)
	require.Zero(t, purged)

	// Age: rows finished before day 2 go, except the newest of each (table,
	// policy): a7 days 0,1 go; a8 (day 0) is its policy's newest and stays;
	// b1 (day 0) goes, b2 stays.
	purged, err = b.s.PurgeJobs(b.ctx, store.Purge{FinishedBefore: base.Add(2 * 24 * time.Hour)})
	require.NoError(t, err)
	require.EqualValues(t, 3, purged)
	for _, j := range []store.Job{a7[0], a7[1], b1} {
		_, err := b.s.GetJob(b.ctx, j.ID)
		require.ErrorIs(t, err, store.ErrNotFound, "job %d", j.ID)
	}
	for _, j := range []store.Job{a7[2], a7[3], a7[4], a8, b2, bFlight, aFlight} {
		_, err := b.s.GetJob(b.ctx, j.ID)
		require.NoError(t, err, "job %d", j.ID)
	}

	// Count: keep 2 finished rows per table → table a keeps a7[4], a7[3]
	// and a8 (newest of policy 8); a7[2] goes. Table b is within the limit.
	purged, err = b.s.PurgeJobs(b.ctx, store.Purge{KeepPerTable: 2})
	require.NoError(t, err)
	require.EqualValues(t, 1, purged)
	_, err = b.s.GetJob(b.ctx, a7[2].ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	last, err = b.s.LastFinished(b.ctx, ta.ID, 7)
	require.NoError(t, err)
	require.Equal(t, base.Add(4*24*time.Hour), last, "purging never moves the cooldown")
	// In-flight rows are never purged, whatever the limits.
	_, err = b.s.PurgeJobs(b.ctx, store.Purge{FinishedBefore: base.Add(1000 * time.Hour), KeepPerTable: 1})
	require.NoError(t, err)
	for _, j := range []store.Job{bFlight, aFlight, a7[4], a8, b2} {
		_, err := b.s.GetJob(b.ctx, j.ID)
		require.NoError(t, err, "job %d", j.ID)
	}
}
