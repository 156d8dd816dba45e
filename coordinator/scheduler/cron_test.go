package scheduler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// TestFailureBacksOff checks that a failing handler records the failure and
// is retried after the backoff, on the injected clock, and that a success
// then clears the failure count.
func TestFailureBacksOff(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendSQLite)
	clock := scheduler.NewManualClock(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	calls := make(chan int, 4)
	var n atomic.Int32
	every, err := policy.ParseCron("@hourly", "")
	require.NoError(t, err)
	kind := scheduler.Kind{Name: "flaky", Schedule: every, Handler: func(ctx context.Context, x *scheduler.Execution) error {
		calls <- int(n.Add(1))
		if n.Load() == 1 {
			return errors.New("catalog unreachable")
		}
		return nil
	}}
	node := b.Start(scheduler.Config{NodeID: "n", Clock: clock, PollInterval: time.Second,
		Backoff: func(failures int) time.Duration { return time.Duration(failures) * time.Minute }}, kind)
	_, err = node.Schedule(b.Ctx, store.NewTask{TaskKey: store.TaskKey{Name: "flaky", Instance: "p1"}, ExecutionTime: clock.Now()})
	require.NoError(t, err)
	require.Equal(t, 1, <-calls)

	key := store.TaskKey{Name: "flaky", Instance: "p1"}
	testkit.Eventually(t, 10*time.Second, "the failure to be recorded", func() bool {
		task, err := b.Sch.GetTask(b.Ctx, key)
		require.NoError(t, err)
		return !task.Picked
	})
	task, err := b.Sch.GetTask(b.Ctx, key)
	require.NoError(t, err)
	require.Equal(t, 1, task.ConsecutiveFailures)
	require.Equal(t, clock.Now().Add(time.Minute), task.ExecutionTime, "retried after the backoff")

	for done := false; !done; {
		clock.Advance(10 * time.Second)
		select {
		case got := <-calls:
			require.Equal(t, 2, got)
			done = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	require.NoError(t, node.Stop())
	task, err = b.Sch.GetTask(b.Ctx, key)
	require.NoError(t, err)
	require.Zero(t, task.ConsecutiveFailures, "a success clears the failures")
	require.False(t, task.LastSuccess.IsZero())
	require.Equal(t, every.Next(task.LastSuccess), task.ExecutionTime, "the recurring task moved to its next instant")
}
