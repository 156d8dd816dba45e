package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// exerciseCommitEvents covers the commit ingress's store side: event ids
// recorded with the commit-job in one transaction (Scheduler.WithTx,
// TxWriter.RecordCommitEvent), PurgeCommitEvents, and the ledger counts of
// JobStats and SchemaCurrent that the HTTP server reads.
func exerciseCommitEvents(t *testing.T, setup func(*testing.T) *bundle) {
	t.Run("RecordOnceWithItsJob", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "orders")
		key := store.TaskKey{Name: "commit-job", Instance: "t1"}
		now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		ingest := func(eventID string, at time.Time) (fresh, created bool) {
			t.Helper()
			err := b.s.WithTx(b.ctx, func(ctx context.Context, tx store.TxWriter) error {
				var err error
				fresh, err = tx.RecordCommitEvent(ctx, store.CommitEvent{EventID: eventID, TableID: tbl.ID, SnapshotID: ptr(int64(42)), ReceivedAt: now})
				if err != nil || !fresh {
					return err
				}
				created, err = tx.UpsertTask(ctx, store.NewTask{TaskKey: key, ExecutionTime: at}, now)
				return err
			})
			require.NoError(t, err)
			return fresh, created
		}

		fresh, created := ingest("ev-1", now.Add(5*time.Second))
		require.True(t, fresh)
		require.True(t, created)
		fresh, created = ingest("ev-1", now.Add(time.Second))
		require.False(t, fresh, "a repeated event id is not fresh")
		require.False(t, created)
		task, err := b.s.GetTask(b.ctx, key)
		require.NoError(t, err)
		require.Equal(t, now.Add(5*time.Second), task.ExecutionTime, "a duplicate must not touch the job")

		fresh, created = ingest("ev-2", now.Add(3*time.Second))
		require.True(t, fresh)
		require.False(t, created, "a second event coalesces into the row")
		task, err = b.s.GetTask(b.ctx, key)
		require.NoError(t, err)
		require.Equal(t, now.Add(3*time.Second), task.ExecutionTime, "the earlier due time wins")
		tasks, err := b.s.ListTasks(b.ctx, "commit-job", 10)
		require.NoError(t, err)
		require.Len(t, tasks, 1)
	})

	t.Run("RollbackForgetsTheEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "t")
		key := store.TaskKey{Name: "commit-job", Instance: "rb"}
		boom := errors.New("boom")
		err := b.s.WithTx(b.ctx, func(ctx context.Context, tx store.TxWriter) error {
			fresh, err := tx.RecordCommitEvent(ctx, store.CommitEvent{EventID: "ev", TableID: tbl.ID})
			require.NoError(t, err)
			require.True(t, fresh)
			_, err = tx.UpsertTask(ctx, store.NewTask{TaskKey: key}, time.Time{})
			require.NoError(t, err)
			return boom
		})
		require.ErrorIs(t, err, boom)
		_, err = b.s.GetTask(b.ctx, key)
		require.ErrorIs(t, err, store.ErrNotFound, "the job was rolled back")
		err = b.s.WithTx(b.ctx, func(ctx context.Context, tx store.TxWriter) error {
			fresh, err := tx.RecordCommitEvent(ctx, store.CommitEvent{EventID: "ev", TableID: tbl.ID})
			require.True(t, fresh, "a rolled-back event was never seen")
			return err
		})
		require.NoError(t, err)
	})

	t.Run("RejectsBadEventsAndMoves", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for name, ev := range map[string]store.CommitEvent{
			"empty id": {EventID: " ", TableID: 1},
			"long id":  {EventID: strings.Repeat("x", store.MaxEventIDLen+1), TableID: 1},
			"no table": {EventID: "ev"},
		} {
			err := b.s.WithTx(b.ctx, func(ctx context.Context, tx store.TxWriter) error {
				_, err := tx.RecordCommitEvent(ctx, ev)
				return err
			})
			require.ErrorIs(t, err, store.ErrInvalidArgument, name)
		}
		err := b.s.WithTx(b.ctx, func(ctx context.Context, tx store.TxWriter) error {
			return tx.MoveCompleted(ctx, time.Now(), nil)
		})
		require.ErrorIs(t, err, store.ErrInvalidArgument, "no claim is completed in WithTx")
	})

	t.Run("PurgeByAge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "t")
		day := time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC)
		record := func(id string, at time.Time) bool {
			t.Helper()
			var fresh bool
			require.NoError(t, b.s.WithTx(b.ctx, func(ctx context.Context, tx store.TxWriter) error {
				var err error
				fresh, err = tx.RecordCommitEvent(ctx, store.CommitEvent{EventID: id, TableID: tbl.ID, ReceivedAt: at})
				return err
			}))
			return fresh
		}
		require.True(t, record("old", day))
		require.True(t, record("new", day.Add(24*time.Hour)))
		n, err := b.s.PurgeCommitEvents(b.ctx, day.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.True(t, record("old", day.Add(25*time.Hour)), "a purged id is new again")
		require.False(t, record("new", day.Add(25*time.Hour)), "a kept id is still a duplicate")
		n, err = b.s.PurgeCommitEvents(b.ctx, day)
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("JobStats", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, store.SchemaCurrent(b.ctx, b.s))
		st, err := b.s.JobStats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, store.JobStats{Outcomes: []store.OutcomeCount{}}, st)

		tbl := b.table(t, "t")
		chained := func(policy int64) store.Job {
			t.Helper()
			j, err := b.s.CreateJob(b.ctx, store.NewJob{TableID: tbl.ID, PolicyID: policy,
				Types: []string{"compaction", "snapshot-expiry"}, Trigger: store.TriggerCommit})
			require.NoError(t, err)
			return j
		}
		j1 := chained(1)
		require.NoError(t, b.s.FinishJob(b.ctx, j1.ID, j1.Fence, store.Finish{Status: store.StatusSucceeded,
			Outcomes: []byte(`[{"type":"compaction","outcome":"done"},{"type":"snapshot-expiry","outcome":"skipped","reason":"below threshold"}]`)}))
		j2 := chained(2)
		require.NoError(t, b.s.FinishJob(b.ctx, j2.ID, j2.Fence, store.Finish{Status: store.StatusFailed,
			Outcomes: []byte(`[{"type":"compaction","outcome":"failed"},{"type":"snapshot-expiry","outcome":"skipped"}]`)}))
		j3 := chained(3)
		require.NoError(t, b.s.FinishJob(b.ctx, j3.ID, j3.Fence, store.Finish{Status: store.StatusLost, Error: "job vanished"}))
		chained(4) // in flight
		b.job(t, b.table(t, "other").ID, 5)

		st, err = b.s.JobStats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, int64(2), st.InFlight)
		require.Equal(t, []store.OutcomeCount{
			{Type: "compaction", Outcome: "done", Count: 1},
			{Type: "compaction", Outcome: "failed", Count: 1},
			{Type: "compaction", Outcome: "lost", Count: 1},
			{Type: "snapshot-expiry", Outcome: "lost", Count: 1},
			{Type: "snapshot-expiry", Outcome: "skipped", Count: 2},
		}, st.Outcomes)
	})
}
