package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// attempt is one handler call seen by a test: when (engine clock) and the
// consecutive failures the claimed row carried.
type attempt struct {
	at       time.Time
	failures int
}

// stepUntil moves the clock a second at a time, letting the engine settle
// after each step, until an attempt arrives, and returns it. It fails after
// limit steps.
func stepUntil(m *coordtest.ManualNode, t *testing.T, b *coordtest.Bundle, attempts <-chan attempt, limit int) attempt {
	t.Helper()
	m.Quiesce(t, b)
	for range limit {
		m.Clock.Advance(time.Second)
		m.Quiesce(t, b)
		select {
		case a := <-attempts:
			return a
		default:
		}
	}
	t.Fatalf("no attempt within %d clock steps", limit)
	return attempt{}
}

// settled waits until the row is unpicked with the given consecutive
// failures, and returns it.
func settled(t *testing.T, b *coordtest.Bundle, key store.TaskKey, failures int) store.Task {
	t.Helper()
	var task store.Task
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%s to be released with %d consecutive failures", key, failures), func() bool {
		var err error
		task, err = b.Sch.GetTask(b.Ctx, key)
		require.NoError(t, err)
		return !task.Picked && task.ConsecutiveFailures == failures
	})
	return task
}

// TestFailureBackoffAndMaxFailures checks what a failing handler leads to,
// on both backends, with the clock driven by the test: each failure records
// last_failure and consecutive_failures + 1 and makes the row due after
// Config.Backoff(failures), not before; a one-shot kind's row is deleted at
// its MaxFailures-th consecutive failure and never runs again. A recurring
// kind's row survives any number of failures (MaxFailures does not apply)
// and a success resets its count and moves it to its next instant.
func TestFailureBackoffAndMaxFailures(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			b := coordtest.Setup(t, backend)
			start := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC)
			clock := scheduler.NewManualClock(start)
			flakyAttempts, tickAttempts := make(chan attempt, 10), make(chan attempt, 10)
			boom := errors.New("boom")
			flaky := scheduler.Kind{Name: "flaky", Pool: "p", MaxFailures: 3, Handler: func(ctx context.Context, x *scheduler.Execution) error {
				flakyAttempts <- attempt{x.Now(), x.Task.ConsecutiveFailures}
				return boom
			}}
			everyHour, err := policy.ParseCron("0 * * * *", "UTC")
			require.NoError(t, err)
			tick := scheduler.Kind{Name: "tick", Pool: "p", Schedule: everyHour, MaxFailures: 1, Handler: func(ctx context.Context, x *scheduler.Execution) error {
				tickAttempts <- attempt{x.Now(), x.Task.ConsecutiveFailures}
				if x.Task.ConsecutiveFailures < 2 {
					return boom
				}
				return nil
			}}
			n := &coordtest.ManualNode{Clock: clock, Node: b.Start(scheduler.Config{
				NodeID: "n", Clock: clock, PollInterval: time.Second,
				Backoff: func(failures int) time.Duration { return time.Duration(failures) * 10 * time.Second },
			}, flaky, tick)}

			// One-shot, due at +1s: attempts at +1s, +11s (backoff 1) and
			// +31s (backoff 2); the third consecutive failure deletes the row.
			// The row is inserted past the engine, which is woken by its poll
			// timer only: every claim happens at a clock step.
			key := store.TaskKey{Name: "flaky", Instance: "1"}
			first := start.Add(time.Second)
			_, err = b.Sch.ScheduleTask(b.Ctx, store.NewTask{TaskKey: key, ExecutionTime: first}, start)
			require.NoError(t, err)
			a := stepUntil(n, t, b, flakyAttempts, 5)
			require.Equal(t, attempt{first, 0}, a)
			row := settled(t, b, key, 1)
			require.Equal(t, first, row.LastFailure)
			require.Equal(t, first.Add(10*time.Second), row.ExecutionTime, "due again after Backoff(1)")
			require.True(t, row.LastSuccess.IsZero())

			a = stepUntil(n, t, b, flakyAttempts, 30)
			require.Equal(t, attempt{first.Add(10 * time.Second), 1}, a, "not retried before the backoff ran out")
			row = settled(t, b, key, 2)
			require.Equal(t, first.Add(10*time.Second), row.LastFailure)
			require.Equal(t, first.Add(30*time.Second), row.ExecutionTime, "due again after Backoff(2)")

			a = stepUntil(n, t, b, flakyAttempts, 30)
			require.Equal(t, attempt{first.Add(30 * time.Second), 2}, a)
			_, err = b.Sch.GetTask(b.Ctx, key)
			require.ErrorIs(t, err, store.ErrNotFound, "the row is deleted at MaxFailures")
			for range 60 {
				clock.Advance(time.Second)
				n.Quiesce(t, b)
			}
			require.Empty(t, flakyAttempts, "a task deleted at MaxFailures never runs again")

			// Recurring: failures back off like a one-shot's but never delete
			// the row; the success resets the count.
			created, err := n.ScheduleRecurring(b.Ctx, "tick", "clock", nil)
			require.NoError(t, err)
			require.True(t, created)
			tickKey := store.TaskKey{Name: "tick", Instance: "clock"}
			firstInstant := getTask(t, b, tickKey).ExecutionTime
			require.Equal(t, start.Add(time.Hour), firstInstant)
			n.Quiesce(t, b)
			clock.Advance(firstInstant.Sub(clock.Now()) - time.Second)
			a = stepUntil(n, t, b, tickAttempts, 5)
			require.Equal(t, attempt{firstInstant, 0}, a)
			row = settled(t, b, tickKey, 1)
			require.Equal(t, firstInstant.Add(10*time.Second), row.ExecutionTime, "a failed recurring run retries after the backoff, not at the next instant")
			a = stepUntil(n, t, b, tickAttempts, 30)
			require.Equal(t, attempt{firstInstant.Add(10 * time.Second), 1}, a)
			row = settled(t, b, tickKey, 2)
			require.Equal(t, firstInstant.Add(30*time.Second), row.ExecutionTime, "MaxFailures does not delete a recurring row")
			a = stepUntil(n, t, b, tickAttempts, 30)
			require.Equal(t, attempt{firstInstant.Add(30 * time.Second), 2}, a)
			row = settled(t, b, tickKey, 0)
			require.Equal(t, firstInstant.Add(30*time.Second), row.LastSuccess)
			require.Equal(t, firstInstant.Add(time.Hour), row.ExecutionTime, "after the success: the next instant")

			require.NoError(t, n.Stop())
			s := n.Stats()
			require.Zero(t, s.Stale+s.Failed, "every completion was written")
			require.Equal(t, int64(6), s.Claimed)
		})
	}
}

// TestFailedCompletionCountsAsFailure checks that a handler whose
// Complete failed (here: its own write broke a unique key, so nothing was
// written) is not taken as done: the engine records a failure, although the
// handler returned nil, and the retry completes.
func TestFailedCompletionCountsAsFailure(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			b := coordtest.Setup(t, backend)
			var calls atomic.Int32
			results := make(chan error, 4)
			kind := scheduler.Kind{Name: "writer", Handler: func(ctx context.Context, x *scheduler.Execution) error {
				key := "taken"
				if calls.Add(1) > 1 {
					key = "free"
				}
				results <- x.Complete(ctx, func(ctx context.Context, tx store.TxWriter) error {
					return testdb.RecordExecution(ctx, tx, key, x.Node())
				})
				return nil // ignores the error on purpose
			}}
			recordExecution(t, b, "taken")
			n := b.Start(scheduler.Config{NodeID: "n", PollInterval: 20 * time.Millisecond, Backoff: func(int) time.Duration { return 0 }}, kind)
			_, err := n.Schedule(b.Ctx, store.NewTask{TaskKey: store.TaskKey{Name: "writer", Instance: "1"}})
			require.NoError(t, err)
			first := receive(t, results, "the first Complete")
			require.Error(t, first, "the first completion broke the unique key")
			require.NotErrorIs(t, first, store.ErrStaleFence)
			require.NoError(t, receive(t, results, "the retry's Complete"), "the retry completed")
			testkit.Eventually(t, 10*time.Second, "the row to be gone", func() bool {
				total, _, err := b.Sch.CountTasks(b.Ctx)
				return err == nil && total == 0
			})
			require.NoError(t, n.Stop())
			require.Equal(t, map[string]string{"taken": "test", "free": "n"}, testdb.Executions(t, b.URL))
			s := n.Stats()
			require.Equal(t, int64(2), s.Claimed)
			require.Equal(t, int64(1), s.Failed, "the failed Complete")
			require.Equal(t, int64(2), s.Completed, "the recorded failure and the final success")
		})
	}
}

// TestLostClaimIsFenced checks what the engine promises a callback whose
// claim another node took over: its context is cancelled at the next
// heartbeat, and a completion it still tries is rejected with
// store.ErrStaleFence and writes nothing, both through Execution.Complete
// (with the handler's own rows) and through the engine's batched delete of
// a handler that ignored its context and returned nil. The row stays with
// its new holder.
func TestLostClaimIsFenced(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			b := coordtest.Setup(t, backend)
			type outcome struct {
				cancelled   bool
				completeErr error
			}
			started := make(chan string, 3)
			outcomes := make(chan outcome, 1)
			release := make(chan struct{})
			kind := scheduler.Kind{Name: "held", Handler: func(ctx context.Context, x *scheduler.Execution) error {
				started <- x.Task.Instance
				if x.Task.Instance == "ignores-context" {
					<-release
					return nil // the engine completes it, under the fence
				}
				select {
				case <-ctx.Done():
				case <-time.After(30 * time.Second):
				}
				err := x.Complete(context.Background(), func(ctx context.Context, tx store.TxWriter) error {
					return testdb.RecordExecution(ctx, tx, x.Task.Instance, x.Node())
				})
				outcomes <- outcome{cancelled: ctx.Err() != nil, completeErr: err}
				return err
			}}
			// The node's own rescuer would revive its claims only after a
			// minute; here the test plays the other node.
			n := b.Start(scheduler.Config{
				NodeID: "loser", Pools: map[string]int{"held": 2}, PollInterval: 20 * time.Millisecond,
				HeartbeatInterval: 100 * time.Millisecond, MissedHeartbeatsLimit: 600,
			}, kind)
			for _, inst := range []string{"revived", "ignores-context"} {
				_, err := n.Schedule(b.Ctx, store.NewTask{TaskKey: store.TaskKey{Name: "held", Instance: inst}})
				require.NoError(t, err)
				require.Equal(t, inst, receive(t, started, "the callback to start"))
			}

			// Another node revives the claims (as its rescuer would) and
			// claims them again: version + 1 for the revival, + 1 for the
			// claim. One statement here, so that this node's free thread
			// cannot claim a revived row in between.
			execSQL(t, b, `UPDATE scheduled_tasks SET version = version + 2, picked_by = 'winner' WHERE task_name = 'held'`)
			var winners []store.Task
			for _, inst := range []string{"revived", "ignores-context"} {
				winners = append(winners, getTask(t, b, store.TaskKey{Name: "held", Instance: inst}))
			}

			got := receive(t, outcomes, "the callback whose claim was lost to be cancelled")
			require.True(t, got.cancelled, "the lost claim's context was cancelled")
			require.ErrorIs(t, got.completeErr, store.ErrStaleFence)

			close(release)
			testkit.Eventually(t, 10*time.Second, "the ignoring callback's completion to be rejected", func() bool {
				return n.Stats().Stale == 2
			})
			require.NoError(t, n.Stop())
			require.Empty(t, testdb.Executions(t, b.URL), "the lost claim wrote nothing")
			for _, w := range winners {
				row := getTask(t, b, w.TaskKey)
				require.True(t, row.Picked)
				require.Equal(t, "winner", row.PickedBy)
				require.Equal(t, w.Version, row.Version, "the late completions left the new claim alone")
			}
			require.Zero(t, n.Stats().Completed)

			// A cancelled row: the running callback is cancelled too and its
			// completion is stale.
			n2 := b.Start(scheduler.Config{
				NodeID: "cancelled", PollInterval: 20 * time.Millisecond,
				HeartbeatInterval: 100 * time.Millisecond, MissedHeartbeatsLimit: 600,
			}, kind)
			key := store.TaskKey{Name: "held", Instance: "cancelled"}
			_, err := n2.Schedule(b.Ctx, store.NewTask{TaskKey: key})
			require.NoError(t, err)
			require.Equal(t, "cancelled", receive(t, started, "the callback to start"))
			require.NoError(t, n2.Cancel(b.Ctx, key))
			got = receive(t, outcomes, "the callback of the cancelled row to be cancelled")
			require.True(t, got.cancelled)
			require.ErrorIs(t, got.completeErr, store.ErrStaleFence)
			require.NoError(t, n2.Stop())
			_, err = b.Sch.GetTask(b.Ctx, key)
			require.ErrorIs(t, err, store.ErrNotFound, "the stale completion did not bring the row back")
			require.Empty(t, testdb.Executions(t, b.URL))
		})
	}
}

// receive waits up to 20s for a value on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// getTask reads one row.
func getTask(t *testing.T, b *coordtest.Bundle, key store.TaskKey) store.Task {
	t.Helper()
	task, err := b.Sch.GetTask(b.Ctx, key)
	require.NoError(t, err)
	return task
}

// recordExecution inserts an executions row outside any completion, as if
// node "test" had run key.
func recordExecution(t *testing.T, b *coordtest.Bundle, key string) {
	t.Helper()
	execSQL(t, b, `INSERT INTO test_executions (exec_key, node) VALUES ('`+key+`', 'test')`)
}

// exec runs sql on the test's database, outside the store.
func execSQL(t *testing.T, b *coordtest.Bundle, sql string) {
	t.Helper()
	if strings.HasPrefix(b.URL, "sqlite://") {
		testdb.SQLiteExec(t, b.URL, sql)
		return
	}
	testdb.PostgresExec(t, b.URL, sql)
}
