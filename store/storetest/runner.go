package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// exerciseRunnerSupport covers what the runner needs beyond plain fenced
// writes: per-type outcomes on finish, the read-only fence check it makes
// before every Iceberg commit, and the snapshots other in-flight jobs planned
// from.
func exerciseRunnerSupport(t *testing.T, setup func(*testing.T) *bundle) {
	t.Run("FinishStoresOutcomes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.job(t, b.table(t, "t").ID, 1)
		require.Nil(t, j.Outcomes)
		outcomes := json.RawMessage(`[{"type":"compaction","outcome":"done","reason":"mse above threshold","before_snapshot_id":1,"after_snapshot_id":2,"duration_ms":12},
			{"type":"snapshot-expiry","outcome":"skipped","reason":"nothing to expire","duration_ms":0}]`)
		require.NoError(t, b.s.FinishJob(b.ctx, j.ID, j.Fence, store.Finish{
			Status: store.StatusSucceeded, AfterSnapshotID: ptr(int64(2)), Outcomes: outcomes,
		}))
		got := b.get(t, j.ID)
		require.JSONEq(t, string(outcomes), string(got.Outcomes))
		require.Equal(t, store.StatusSucceeded, got.Status)

		// Without outcomes the column stays empty.
		k := b.job(t, b.table(t, "u").ID, 1)
		require.NoError(t, b.s.FinishJob(b.ctx, k.ID, k.Fence, store.Finish{Status: store.StatusLost}))
		require.Nil(t, b.get(t, k.ID).Outcomes)
	})

	t.Run("FinishRejectsBadOutcomes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.job(t, b.table(t, "t").ID, 1)
		for _, bad := range []string{`{"type":"compaction"}`, `[{"type":`, `"done"`} {
			err := b.s.FinishJob(b.ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded, Outcomes: json.RawMessage(bad)})
			require.ErrorIs(t, err, store.ErrInvalidArgument, bad)
		}
		require.Equal(t, j, b.get(t, j.ID), "a rejected finish changes nothing")
	})

	t.Run("StartJobOncePerFence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.job(t, b.table(t, "t").ID, 1)
		require.NoError(t, b.s.StartJob(b.ctx, j.ID, j.Fence, time.Now()))
		started := b.get(t, j.ID)

		err := b.s.StartJob(b.ctx, j.ID, j.Fence, time.Now().Add(time.Minute))
		require.ErrorIs(t, err, store.ErrStaleFence, "a second runner with the same fence may not start")
		require.ErrorContains(t, err, "already started")
		require.Equal(t, started, b.get(t, j.ID))

		// After a bump (the coordinator re-submits), the new holder still
		// cannot restart a running row; other fenced writes work.
		fence, err := b.s.BumpFence(b.ctx, j.ID)
		require.NoError(t, err)
		require.ErrorIs(t, b.s.StartJob(b.ctx, j.ID, fence, time.Now()), store.ErrStaleFence)
		require.NoError(t, b.s.SetBeforeSnapshot(b.ctx, j.ID, fence, 7))
	})

	t.Run("CheckFence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.job(t, b.table(t, "t").ID, 1)
		require.NoError(t, b.s.CheckFence(b.ctx, j.ID, j.Fence))
		require.NoError(t, b.s.StartJob(b.ctx, j.ID, j.Fence, time.Now()))
		require.NoError(t, b.s.CheckFence(b.ctx, j.ID, j.Fence), "running is still in flight")
		before := b.get(t, j.ID)

		fence, err := b.s.BumpFence(b.ctx, j.ID)
		require.NoError(t, err)
		require.ErrorIs(t, b.s.CheckFence(b.ctx, j.ID, j.Fence), store.ErrStaleFence)
		require.ErrorIs(t, b.s.CheckFence(b.ctx, j.ID, fence+1), store.ErrStaleFence, "a future fence is stale too")
		require.NoError(t, b.s.CheckFence(b.ctx, j.ID, fence))
		before.Fence = fence
		require.Equal(t, before, b.get(t, j.ID), "CheckFence writes nothing")

		require.NoError(t, b.s.FinishJob(b.ctx, j.ID, fence, store.Finish{Status: store.StatusSucceeded}))
		err = b.s.CheckFence(b.ctx, j.ID, fence)
		require.ErrorIs(t, err, store.ErrStaleFence)
		require.ErrorContains(t, err, "already finished")

		require.ErrorIs(t, b.s.CheckFence(b.ctx, 1<<40, 1), store.ErrNotFound)
	})

	t.Run("InFlightBaseSnapshots", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl, other := b.table(t, "t"), b.table(t, "other")
		self := b.job(t, tbl.ID, 1)
		require.NoError(t, b.s.SetBeforeSnapshot(b.ctx, self.ID, self.Fence, 100))

		got, err := b.s.InFlightBaseSnapshots(b.ctx, tbl.ID, self.ID)
		require.NoError(t, err)
		require.Empty(t, got, "the asking job's own snapshot is excluded")

		// A table has one job in flight at a time (the partial unique
		// index), so the others' bases are empty today; a finished row and
		// another table's in-flight row never count.
		self2, err := b.s.CreateJob(b.ctx, store.NewJob{TableID: tbl.ID, PolicyID: 2, Types: []string{"compaction"}, Trigger: store.TriggerCron})
		require.ErrorIs(t, err, store.ErrInFlight)
		require.Zero(t, self2.ID)
		require.NoError(t, b.s.FinishJob(b.ctx, self.ID, self.Fence, store.Finish{Status: store.StatusSucceeded}))
		cur := b.job(t, tbl.ID, 3)
		require.NoError(t, b.s.SetBeforeSnapshot(b.ctx, cur.ID, cur.Fence, 300))
		elsewhere := b.job(t, other.ID, 1)
		require.NoError(t, b.s.SetBeforeSnapshot(b.ctx, elsewhere.ID, elsewhere.Fence, 500))

		got, err = b.s.InFlightBaseSnapshots(b.ctx, tbl.ID, cur.ID)
		require.NoError(t, err)
		require.Empty(t, got, "the finished row's base does not count")

		got, err = b.s.InFlightBaseSnapshots(b.ctx, tbl.ID, 0)
		require.NoError(t, err)
		require.Equal(t, []int64{300}, got, "excluding no job lists the in-flight base")

		got, err = b.s.InFlightBaseSnapshots(b.ctx, 1<<40, 0)
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("PendingDeletes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl, other := b.table(t, "t"), b.table(t, "other")
		j := b.job(t, tbl.ID, 1)
		got, err := b.s.PendingDeletes(b.ctx, tbl.ID)
		require.NoError(t, err)
		require.Empty(t, got)

		plan := []string{"s3://b/t/metadata/snap-2.avro", "s3://b/t/data/a.parquet", "s3://b/t/metadata/m1.avro"}
		require.NoError(t, b.s.AddPendingDeletes(b.ctx, j.ID, j.Fence, plan))
		require.NoError(t, b.s.AddPendingDeletes(b.ctx, j.ID, j.Fence, plan[:1]), "a path recorded again is kept once")
		got, err = b.s.PendingDeletes(b.ctx, tbl.ID)
		require.NoError(t, err)
		require.Equal(t, []string{"s3://b/t/data/a.parquet", "s3://b/t/metadata/m1.avro", "s3://b/t/metadata/snap-2.avro"}, got)
		got, err = b.s.PendingDeletes(b.ctx, other.ID)
		require.NoError(t, err)
		require.Empty(t, got, "plans are per table")

		require.NoError(t, b.s.DonePendingDeletes(b.ctx, tbl.ID, []string{"s3://b/t/data/a.parquet", "s3://b/t/unknown"}))
		got, err = b.s.PendingDeletes(b.ctx, tbl.ID)
		require.NoError(t, err)
		require.Equal(t, []string{"s3://b/t/metadata/m1.avro", "s3://b/t/metadata/snap-2.avro"}, got)

		// Fenced: a stale fence, a finished row and an unknown row record nothing.
		bumped, err := b.s.BumpFence(b.ctx, j.ID)
		require.NoError(t, err)
		require.ErrorIs(t, b.s.AddPendingDeletes(b.ctx, j.ID, j.Fence, []string{"x"}), store.ErrStaleFence)
		require.NoError(t, b.s.FinishJob(b.ctx, j.ID, bumped, store.Finish{Status: store.StatusLost}))
		require.ErrorIs(t, b.s.AddPendingDeletes(b.ctx, j.ID, bumped, []string{"x"}), store.ErrStaleFence)
		require.ErrorIs(t, b.s.AddPendingDeletes(b.ctx, 1<<40, 1, []string{"x"}), store.ErrNotFound)
		k := b.job(t, tbl.ID, 2)
		require.ErrorIs(t, b.s.AddPendingDeletes(b.ctx, k.ID, k.Fence, []string{"ok", " "}), store.ErrInvalidArgument)
		got, err = b.s.PendingDeletes(b.ctx, tbl.ID)
		require.NoError(t, err)
		require.Len(t, got, 2, "nothing recorded by the refused calls")
	})
}
