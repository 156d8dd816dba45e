package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// rounds is how often the race tests repeat their race.
const rounds = 50

// fencedWrites returns every fenced write, each as a func of (job id, fence).
func fencedWrites(b *bundle) map[string]func(id, fence int64) error {
	return map[string]func(id, fence int64) error{
		"StartJob": func(id, fence int64) error {
			return b.s.StartJob(b.ctx, id, fence, time.Now())
		},
		"SetBeforeSnapshot": func(id, fence int64) error {
			return b.s.SetBeforeSnapshot(b.ctx, id, fence, 555)
		},
		"SetJobID": func(id, fence int64) error {
			return b.s.SetJobID(b.ctx, id, fence, "zombie-job", "command")
		},
		"FinishJob": func(id, fence int64) error {
			return b.s.FinishJob(b.ctx, id, fence, store.Finish{
				Status: store.StatusSucceeded, AfterSnapshotID: ptr(int64(556)), Error: "zombie",
			})
		},
	}
}

func exerciseFencing(t *testing.T, setup func(*testing.T) *bundle) {
	t.Run("StaleFenceChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "t")
		for name, write := range fencedWrites(b) {
			j := b.job(t, tbl.ID, 1)
			require.NoError(t, b.s.StartJob(b.ctx, j.ID, 1, time.Now()))
			fence, err := b.s.BumpFence(b.ctx, j.ID)
			require.NoError(t, err)
			require.Equal(t, int64(2), fence)
			want := b.get(t, j.ID)

			require.ErrorIs(t, write(j.ID, 1), store.ErrStaleFence, name)
			require.ErrorIs(t, write(j.ID, 3), store.ErrStaleFence, name+" with a future fence")
			require.Equal(t, want, b.get(t, j.ID), name+" must not change the row")

			// The current fence still works, and closes the row for the next case.
			require.NoError(t, b.s.FinishJob(b.ctx, j.ID, fence, store.Finish{Status: store.StatusLost, Error: "runner gone"}))
		}
	})

	t.Run("WritesAfterFinishRejected", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.job(t, b.table(t, "t").ID, 1)
		require.NoError(t, b.s.FinishJob(b.ctx, j.ID, j.Fence, store.Finish{Status: store.StatusCancelled, Error: "operator"}))
		want := b.get(t, j.ID)
		for name, write := range fencedWrites(b) {
			require.ErrorIs(t, write(j.ID, j.Fence), store.ErrStaleFence, name)
		}
		require.Equal(t, want, b.get(t, j.ID), "a finished row is decided")

		// Bumping a finished row is allowed and still leaves it closed.
		fence, err := b.s.BumpFence(b.ctx, j.ID)
		require.NoError(t, err)
		require.ErrorIs(t, b.s.FinishJob(b.ctx, j.ID, fence, store.Finish{Status: store.StatusLost}), store.ErrStaleFence)
		got := b.get(t, j.ID)
		require.Equal(t, store.StatusCancelled, got.Status)
		require.Equal(t, fence, got.Fence)
	})

	t.Run("BumpFenceIncrements", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.job(t, b.table(t, "t").ID, 1)
		for want := int64(2); want <= 4; want++ {
			fence, err := b.s.BumpFence(b.ctx, j.ID)
			require.NoError(t, err)
			require.Equal(t, want, fence)
		}
		require.Equal(t, int64(4), b.get(t, j.ID).Fence)
		require.NoError(t, b.s.StartJob(b.ctx, j.ID, 4, time.Now()))
	})

	t.Run("FinishRejectsNonTerminalStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.job(t, b.table(t, "t").ID, 1)
		for _, status := range []store.JobStatus{store.StatusPending, store.StatusRunning, "", "done"} {
			err := b.s.FinishJob(b.ctx, j.ID, j.Fence, store.Finish{Status: status})
			require.ErrorIs(t, err, store.ErrInvalidArgument, string(status))
		}
		require.Equal(t, j, b.get(t, j.ID))
	})

	// A runner finishing its job races the reconciler, which bumps the fence
	// and closes the row as lost. Exactly one of the two decides the row.
	t.Run("RunnerRacesReconciler", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "t")
		for round := range rounds {
			j := b.job(t, tbl.ID, 1)
			var (
				wg                       sync.WaitGroup
				runnerErr, reconcilerErr error
			)
			start := make(chan struct{})
			wg.Go(func() {
				<-start
				runnerErr = b.s.FinishJob(b.ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded, AfterSnapshotID: ptr(int64(round))})
			})
			wg.Go(func() {
				<-start
				_, reconcilerErr = b.s.CloseJob(b.ctx, j.ID, store.Finish{Status: store.StatusLost, Error: "heartbeat missed"})
			})
			close(start)
			wg.Wait()

			got := b.get(t, j.ID)
			require.False(t, got.InFlight())
			if runnerErr == nil {
				require.ErrorIs(t, reconcilerErr, store.ErrStaleFence, "round %d", round)
				require.Equal(t, store.StatusSucceeded, got.Status)
				require.Equal(t, ptr(int64(round)), got.AfterSnapshotID)
			} else {
				require.ErrorIs(t, runnerErr, store.ErrStaleFence, "round %d", round)
				require.NoError(t, reconcilerErr, "round %d", round)
				require.Equal(t, store.StatusLost, got.Status)
				require.Nil(t, got.AfterSnapshotID)
			}
		}
	})
}

func exerciseCloseJob(t *testing.T, setup func(*testing.T) *bundle) {
	// CloseJob is how the reconciler, the API, the CLI and the console
	// close a row: fenced out and finished in one transaction.
	t.Run("CloseJobFencesOutAndFinishes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.job(t, b.table(t, "t").ID, 1)
		require.NoError(t, b.s.StartJob(b.ctx, j.ID, j.Fence, time.Now()))
		at := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
		got, err := b.s.CloseJob(b.ctx, j.ID, store.Finish{Status: store.StatusCancelled, Error: "operator", At: at})
		require.NoError(t, err)
		require.Equal(t, b.get(t, j.ID), got, "it returns the row as closed")
		require.Equal(t, store.StatusCancelled, got.Status)
		require.Equal(t, "operator", got.Error)
		require.Equal(t, j.Fence+1, got.Fence, "the runner is fenced out")
		require.True(t, at.Equal(got.FinishedAt), "finished at %s", got.FinishedAt)
		for name, write := range fencedWrites(b) {
			require.ErrorIs(t, write(j.ID, j.Fence), store.ErrStaleFence, "%s by the fenced-out runner", name)
		}
		require.Equal(t, got, b.get(t, j.ID))

		again, err := b.s.CloseJob(b.ctx, j.ID, store.Finish{Status: store.StatusLost, Error: "late"})
		require.ErrorIs(t, err, store.ErrNotInFlight)
		require.ErrorIs(t, err, store.ErrStaleFence)
		require.Equal(t, got, again, "a finished row is returned as it is")
		require.Equal(t, got, b.get(t, j.ID), "and left as it is")

		_, err = b.s.CloseJob(b.ctx, j.ID+1000, store.Finish{Status: store.StatusLost})
		require.ErrorIs(t, err, store.ErrNotFound)
		open := b.job(t, b.table(t, "u").ID, 1)
		_, err = b.s.CloseJob(b.ctx, open.ID, store.Finish{Status: store.StatusRunning})
		require.ErrorIs(t, err, store.ErrInvalidArgument)
		require.Equal(t, open, b.get(t, open.ID))
	})
}

func exerciseInFlight(t *testing.T, setup func(*testing.T) *bundle) {
	t.Run("OneInFlightRowPerTable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl, other := b.table(t, "t"), b.table(t, "other")
		first := b.job(t, tbl.ID, 1)

		_, err := b.s.CreateJob(b.ctx, store.NewJob{TableID: tbl.ID, PolicyID: 1, Types: []string{"snapshot-expiry"}, Trigger: store.TriggerCommit})
		require.ErrorIs(t, err, store.ErrInFlight)
		require.ErrorContains(t, err, fmt.Sprintf("table %d already has a job in flight", tbl.ID))

		// Another policy, trigger or type on the same table waits too; the
		// same policy on another table is independent.
		for _, nj := range []store.NewJob{
			{TableID: tbl.ID, PolicyID: 2, Types: []string{"compaction"}, Trigger: store.TriggerCron},
			{TableID: tbl.ID, PolicyID: store.NoPolicy, Types: []string{"orphan-cleanup"}, Trigger: store.TriggerManual},
		} {
			_, err := b.s.CreateJob(b.ctx, nj)
			require.ErrorIs(t, err, store.ErrInFlight, "%+v", nj)
		}
		b.job(t, other.ID, 1)

		// A running row is still in flight.
		require.NoError(t, b.s.StartJob(b.ctx, first.ID, first.Fence, time.Now()))
		_, err = b.s.CreateJob(b.ctx, store.NewJob{TableID: tbl.ID, PolicyID: 1, Types: []string{"compaction"}, Trigger: store.TriggerCron})
		require.ErrorIs(t, err, store.ErrInFlight)

		require.NoError(t, b.s.FinishJob(b.ctx, first.ID, first.Fence, store.Finish{Status: store.StatusSucceeded}))
		second := b.job(t, tbl.ID, 1)
		require.NotEqual(t, first.ID, second.ID)
		require.Equal(t, int64(1), second.Fence)

		jobs, err := b.s.ListJobs(b.ctx, tbl.ID, 10)
		require.NoError(t, err)
		require.Len(t, jobs, 2, "rejected creates leave no rows")
	})

	t.Run("NoPolicyRowsAreInFlightToo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "t")
		j := b.job(t, tbl.ID, store.NoPolicy)
		require.Equal(t, store.NoPolicy, j.PolicyID)
		_, err := b.s.CreateJob(b.ctx, store.NewJob{TableID: tbl.ID, PolicyID: store.NoPolicy, Types: []string{"compaction"}, Trigger: store.TriggerManual})
		require.ErrorIs(t, err, store.ErrInFlight)
	})

	// Two coordinators decide at the same instant to run the same (table,
	// policy). The database lets exactly one row in, every time.
	t.Run("ConcurrentCreateOneWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "t")
		for round := range rounds {
			var (
				wg   sync.WaitGroup
				jobs [2]store.Job
				errs [2]error
			)
			start := make(chan struct{})
			for i := range 2 {
				wg.Go(func() {
					<-start
					jobs[i], errs[i] = b.s.CreateJob(b.ctx, store.NewJob{
						TableID: tbl.ID, PolicyID: 9, Types: []string{"compaction"}, Trigger: store.TriggerCron,
					})
				})
			}
			close(start)
			wg.Wait()

			winner := -1
			for i, err := range errs {
				if err == nil {
					require.Equal(t, -1, winner, "round %d: both creates won", round)
					winner = i
					continue
				}
				require.ErrorIs(t, err, store.ErrInFlight, "round %d", round)
			}
			require.NotEqual(t, -1, winner, "round %d: no create won", round)
			require.NoError(t, b.s.FinishJob(b.ctx, jobs[winner].ID, jobs[winner].Fence, store.Finish{Status: store.StatusSucceeded}))
		}
		jobs, err := b.s.ListJobs(b.ctx, tbl.ID, 2*rounds)
		require.NoError(t, err)
		require.Len(t, jobs, rounds)
	})
}
