package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/store"
)

// TestGracefulShutdown checks that Run, when its context ends, lets a
// running callback finish, and that a callback still running at the
// shutdown deadline is cancelled and its row released for another node.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendPostgres)
	started := make(chan string, 2)
	release := make(chan struct{})
	finished := make(chan struct{})
	kind := scheduler.Kind{Name: "slow", Handler: func(ctx context.Context, x *scheduler.Execution) error {
		started <- x.Task.Instance
		if x.Task.Instance == "finishes" {
			<-release
			close(finished)
			return nil
		}
		<-ctx.Done() // "stuck" only stops when cancelled
		return ctx.Err()
	}}
	clock := scheduler.NewManualClock(time.Now())
	n := b.Start(scheduler.Config{NodeID: "n", Clock: clock, ShutdownTimeout: time.Minute}, kind)
	for _, inst := range []string{"finishes", "stuck"} {
		_, err := n.Schedule(b.Ctx, store.NewTask{TaskKey: store.TaskKey{Name: "slow", Instance: inst}, ExecutionTime: clock.Now()})
		require.NoError(t, err)
	}
	<-started
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop() }()
	// Run cannot return before the clock reaches the shutdown deadline:
	// "stuck" only ends when cancelled. "finishes" gets to complete first.
	close(release)
	<-finished
	for done := false; !done; {
		select {
		case err := <-stopped:
			require.NoError(t, err)
			done = true
		case <-time.After(10 * time.Millisecond):
			clock.Advance(10 * time.Second) // towards the shutdown deadline
		}
	}
	_, err := b.Sch.GetTask(b.Ctx, store.TaskKey{Name: "slow", Instance: "finishes"})
	require.ErrorIs(t, err, store.ErrNotFound, "the finished callback completed its row")
	stuck, err := b.Sch.GetTask(b.Ctx, store.TaskKey{Name: "slow", Instance: "stuck"})
	require.NoError(t, err)
	require.False(t, stuck.Picked, "the cancelled callback's row was released")
	require.Zero(t, stuck.ConsecutiveFailures, "a release is not a failure")
	nodes, err := b.Sch.ListNodes(b.Ctx)
	require.NoError(t, err)
	require.Empty(t, nodes, "the node row is removed on shutdown")
}

// TestOnDrainedRunsWhileTheNodeIsAlive: a graceful shutdown calls
// Config.OnDrained after every callback returned and before the node row
// goes, so work the node started outside the engine can end while other
// nodes still see the node alive.
func TestOnDrainedRunsWhileTheNodeIsAlive(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendSQLite)
	var (
		handlerDone = make(chan struct{})
		sawNode     bool
		sawHandler  bool
	)
	kind := scheduler.Kind{Name: "k", Handler: func(ctx context.Context, x *scheduler.Execution) error {
		defer close(handlerDone)
		return nil
	}}
	n := b.Start(scheduler.Config{NodeID: "drained", OnDrained: func() {
		select {
		case <-handlerDone:
			sawHandler = true
		default:
		}
		nodes, err := b.Sch.ListNodes(context.Background())
		require.NoError(t, err)
		sawNode = len(nodes) == 1 && nodes[0].ID == "drained"
	}}, kind)
	_, err := n.Schedule(b.Ctx, store.NewTask{TaskKey: store.TaskKey{Name: "k", Instance: "1"}, ExecutionTime: time.Now()})
	require.NoError(t, err)
	<-handlerDone
	require.NoError(t, n.Stop())
	require.True(t, sawHandler, "the callbacks had returned")
	require.True(t, sawNode, "the node row was still there")
	nodes, err := b.Sch.ListNodes(b.Ctx)
	require.NoError(t, err)
	require.Empty(t, nodes, "removed after OnDrained")
}
