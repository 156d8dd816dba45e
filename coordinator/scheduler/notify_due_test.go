package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
)

// TestUpsertDueLaterWakesOtherNodes: on PostgreSQL, a row another process
// upserts due a moment later (a commit-job after its coalescing delay) is
// announced with its due time, so a node polling hourly claims it when it
// falls due; a later upsert coalescing into it announces nothing more and
// the row runs once.
func TestUpsertDueLaterWakesOtherNodes(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendPostgres)
	ran := make(chan time.Time, 4)
	n := b.Start(scheduler.Config{PollInterval: time.Hour}, scheduler.Kind{Name: flow.KindCommitJob,
		Handler: func(_ context.Context, x *scheduler.Execution) error {
			ran <- time.Now()
			return nil
		}})
	// The announcement reaches only a node that already listens: on a
	// loaded machine the listener's connection can come up after the
	// upsert (failed once in a full run).
	select {
	case <-n.Engine.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not start listening")
	}
	other := b.Open(2) // another process: its upsert reaches the node only through NOTIFY
	due := time.Now().Add(1500 * time.Millisecond)
	key := flow.CommitJobKey(42)
	created, err := other.UpsertTask(b.Ctx, store.NewTask{TaskKey: key, ExecutionTime: due}, time.Time{})
	require.NoError(t, err)
	require.True(t, created)
	created, err = other.UpsertTask(b.Ctx, store.NewTask{TaskKey: key, ExecutionTime: due.Add(time.Second)}, time.Time{})
	require.NoError(t, err)
	require.False(t, created, "a burst coalesces")
	// The node polls hourly and its first poll came before the upsert:
	// a claim at all shows the announcement woke it, and one not before
	// the due time that it waited for the time the announcement carried.
	select {
	case at := <-ran:
		require.False(t, at.Before(due.Add(-50*time.Millisecond)), "not claimed before it was due")
	case <-time.After(30 * time.Second):
		t.Fatal("the row due later was not claimed: its announcement did not wake the node")
	}
	// Once the row is gone nothing can run it again: it ran once.
	testkit.Eventually(t, 30*time.Second, "the one-shot row to be deleted after its run", func() bool {
		total, _, err := other.CountTasks(b.Ctx)
		require.NoError(t, err)
		return total == 0
	})
	require.Len(t, ran, 0, "the coalesced row ran once")
	require.EqualValues(t, 1, n.Stats().Claimed)
}
