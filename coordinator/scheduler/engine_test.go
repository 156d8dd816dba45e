package scheduler_test

import (
	"context"
	"fmt"
	"sync"
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

// TestDrainExactlyOnce drains one-shot tasks with several nodes, each on its
// own connection pool, and checks through the executions table (written in
// the completion's transaction, unique per task) that every task ran exactly
// once and no row is left.
func TestDrainExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		backend               string
		tasks, nodes, threads int
	}{
		{store.BackendPostgres, 20000, 4, 8},
		{store.BackendSQLite, 300, 2, 4},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			t.Parallel()
			b := coordtest.Setup(t, tc.backend)
			b.ScheduleN("drain", tc.tasks)
			// Every execution waits until each node has claimed one, so
			// that a node started first cannot drain everything before the
			// last one polls (on a loaded machine it did, on SQLite).
			kind := coordtest.RecordKind("drain", "")
			record := kind.Handler
			var mu sync.Mutex
			joined, all := map[string]bool{}, make(chan struct{})
			kind.Handler = func(ctx context.Context, x *scheduler.Execution) error {
				mu.Lock()
				if !joined[x.Node()] {
					if joined[x.Node()] = true; len(joined) == tc.nodes {
						close(all)
					}
				}
				mu.Unlock()
				select {
				case <-all:
				case <-ctx.Done():
					return ctx.Err()
				}
				return record(ctx, x)
			}
			nodes := make([]*coordtest.Node, tc.nodes)
			for i := range nodes {
				nodes[i] = b.Start(scheduler.Config{
					NodeID: fmt.Sprint("node-", i), Pools: map[string]int{"drain": tc.threads},
					PollInterval: 50 * time.Millisecond,
				}, kind)
			}
			testkit.Eventually(t, 3*time.Minute, "every task to complete", func() bool {
				var done int64
				for _, n := range nodes {
					done += n.Stats().Completed + n.Stats().Stale + n.Stats().Failed
				}
				return done >= int64(tc.tasks)
			})
			var claimed, completed, stale, failed int64
			for _, n := range nodes {
				require.NoError(t, n.Stop())
				s := n.Stats()
				claimed, completed, stale, failed = claimed+s.Claimed, completed+s.Completed, stale+s.Stale, failed+s.Failed
			}
			execs := testdb.Executions(t, b.URL)
			require.Len(t, execs, tc.tasks, "every task executed")
			for i := range tc.tasks {
				if _, ok := execs[fmt.Sprint(i)]; !ok {
					t.Fatalf("task %d never executed", i)
				}
			}
			require.Equal(t, int64(tc.tasks), claimed, "no task claimed twice")
			require.Equal(t, int64(tc.tasks), completed)
			require.Zero(t, stale+failed, "no duplicate execution was attempted")
			total, _, err := b.Sch.CountTasks(b.Ctx)
			require.NoError(t, err)
			require.Zero(t, total, "no row left")
			nodesUsed := map[string]bool{}
			for _, n := range execs {
				nodesUsed[n] = true
			}
			require.Len(t, nodesUsed, tc.nodes, "every node took part")
		})
	}
}

// TestNotifyWakesOtherNodes shows that a row scheduled due now on one node
// is run by another at once, although that one polls only hourly: on
// PostgreSQL through LISTEN/NOTIFY.
func TestNotifyWakesOtherNodes(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendPostgres)
	runner := b.Start(scheduler.Config{NodeID: "runner", PollInterval: time.Hour}, coordtest.RecordKind("commit-job", ""))
	_ = runner
	for i := range 3 {
		_, err := b.Sch.UpsertTask(b.Ctx, store.NewTask{TaskKey: store.TaskKey{Name: "commit-job", Instance: fmt.Sprint(i)}}, time.Time{})
		require.NoError(t, err)
		testkit.Eventually(t, 10*time.Second, "the notified node to run the task", func() bool {
			return testdb.Executions(t, b.URL)[fmt.Sprint(i)] == "runner"
		})
	}
}

// TestRecurringFiresOncePerInstant runs an every-second task on three nodes
// and checks that each instant ran once: the executions table's key is the
// instant, so a second run of one would fail its completion.
func TestRecurringFiresOncePerInstant(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendPostgres)
	every, err := policy.ParseCron("* * * * * *", "Europe/Berlin")
	require.NoError(t, err)
	kind := scheduler.Kind{Name: "tick", Schedule: every, Handler: func(ctx context.Context, x *scheduler.Execution) error {
		return x.Complete(ctx, func(ctx context.Context, tx store.TxWriter) error {
			return testdb.RecordExecution(ctx, tx, x.Task.ExecutionTime.Format(time.RFC3339Nano), x.Node())
		})
	}}
	var nodes []*coordtest.Node
	for i := range 3 {
		nodes = append(nodes, b.Start(scheduler.Config{NodeID: fmt.Sprint("node-", i), PollInterval: 20 * time.Millisecond}, kind))
	}
	created, err := nodes[0].ScheduleRecurring(b.Ctx, "tick", "clock", nil)
	require.NoError(t, err)
	require.True(t, created)
	created, err = nodes[1].ScheduleRecurring(b.Ctx, "tick", "clock", nil)
	require.NoError(t, err)
	require.False(t, created, "the recurring row exists once")

	testkit.Eventually(t, 30*time.Second, "three instants to fire", func() bool { return len(testdb.Executions(t, b.URL)) >= 3 })
	var failed, stale int64
	for _, n := range nodes {
		require.NoError(t, n.Stop())
		failed, stale = failed+n.Stats().Failed, stale+n.Stats().Stale
	}
	require.Zero(t, failed+stale, "no instant ran twice")
	for instant := range testdb.Executions(t, b.URL) {
		at, err := time.Parse(time.RFC3339Nano, instant)
		require.NoError(t, err)
		require.Equal(t, at.Truncate(time.Second), at, "runs happen on whole seconds")
	}
	task, err := b.Sch.GetTask(b.Ctx, store.TaskKey{Name: "tick", Instance: "clock"})
	require.NoError(t, err)
	require.False(t, task.Picked)
	require.Zero(t, task.ConsecutiveFailures)
}

// TestManualClockDrivesDueTimes checks that due times follow the injected
// clock: a task due in an hour runs when the test moves the clock, not
// before, and nothing sleeps.
func TestManualClockDrivesDueTimes(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendSQLite)
	clock := scheduler.NewManualClock(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	ran := make(chan string, 1)
	kind := scheduler.Kind{Name: "later", Handler: func(ctx context.Context, x *scheduler.Execution) error {
		ran <- x.Task.Instance
		return nil
	}}
	n := b.Start(scheduler.Config{NodeID: "n", Clock: clock, PollInterval: time.Minute}, kind)
	// The node parks two timers when idle: its pool's poll and its heartbeat.
	const parked = 2
	_, err := n.Schedule(b.Ctx, store.NewTask{TaskKey: store.TaskKey{Name: "later", Instance: "x"}, ExecutionTime: clock.Now().Add(time.Hour)})
	require.NoError(t, err)
	clock.WaitForTimers(parked)
	clock.Advance(59 * time.Minute)
	clock.WaitForTimers(parked)
	select {
	case got := <-ran:
		t.Fatalf("task %s ran before it was due", got)
	default:
	}
	for i := 0; ; i++ {
		require.Less(t, i, 100, "the task never ran")
		clock.Advance(time.Minute)
		clock.WaitForTimers(parked)
		select {
		case got := <-ran:
			require.Equal(t, "x", got)
			require.NoError(t, n.Stop())
			total, _, err := b.Sch.CountTasks(b.Ctx)
			require.NoError(t, err)
			require.Zero(t, total)
			return
		default:
		}
	}
}
