package reconcile_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/reconcile"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/gravitinotest"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// TestReconcileKilledRunner kills a real runner with SIGKILL in the middle
// of its job: its row stays running until the reconciler sees the job is
// over, bumps the fence and closes the row failed, with no after snapshot.
// A second sweep changes nothing.
func TestReconcileKilledRunner(t *testing.T) {
	t.Parallel()
	l := coordtest.NewLocalLedger(t, store.BackendPostgres)
	uri, accepted := coordtest.HangingCatalog(t)
	j := coordtest.HangingJob(t, l, uri, 7)
	s := coordtest.NewLocal(t, submit.LocalConfig{})
	id, err := s.Submit(t.Context(), coordtest.Request(l, j))
	require.NoError(t, err)
	require.NoError(t, l.St.SetJobID(t.Context(), j.ID, j.Fence, id, submit.Kind(s)))
	coordtest.WaitRunnerInside(t, l, j.ID, accepted)

	rec := reconcile.NewReconciler(l.St, s, reconcile.ReconcilerConfig{Log: zaptest.NewLogger(t)})
	rep, err := rec.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, rep.Checked)
	require.Empty(t, rep.Closed, "a running job is left alone")

	pid := coordtest.Status(t, s, id).PID
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	st := coordtest.WaitEnded(t, s, id)
	require.Equal(t, submit.JobFailed, st.State)
	require.Equal(t, store.StatusRunning, l.Get(t, j.ID).Status, "a killed runner cannot close its row")

	rep, err = rec.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[store.JobStatus]int{store.StatusFailed: 1}, rep.Closed)
	got := l.Get(t, j.ID)
	require.Equal(t, store.StatusFailed, got.Status)
	require.False(t, got.InFlight())
	require.Nil(t, got.AfterSnapshotID, "metrics are never invented")
	require.Greater(t, got.Fence, j.Fence, "the fence was bumped before closing")
	require.Contains(t, got.Error, "without closing its row")
	require.ErrorIs(t, l.St.FinishJob(t.Context(), j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded}), store.ErrStaleFence,
		"a zombie runner with the old fence cannot overwrite the decision")

	rep, err = rec.Sweep(t.Context())
	require.NoError(t, err)
	require.Zero(t, rep.Checked)
	require.Empty(t, rep.Closed)
}

// TestReconcileDeadlines drives the clock: a row never submitted is closed
// failed after the submit deadline, a row whose job this submitter does not
// know is closed lost after the unknown deadline, and neither before. A
// finished row is never touched, and history is purged by count.
func TestReconcileDeadlines(t *testing.T) {
	t.Parallel()
	for _, backend := range coordtest.LocalBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			l := coordtest.NewLocalLedger(t, backend)
			ctx := t.Context()
			clock := scheduler.NewManualClock(time.Now())
			s := coordtest.NewLocal(t, submit.LocalConfig{}) // knows no job: every id is unknown to it
			rec := reconcile.NewReconciler(l.St, s, reconcile.ReconcilerConfig{
				SubmitDeadline: time.Minute, UnknownDeadline: time.Hour, HistoryPerTable: 2,
				CommitEventAge: time.Hour, Clock: clock, Log: zaptest.NewLogger(t),
			})
			// A commit event id received now is remembered for an hour.
			require.NoError(t, l.St.WithTx(ctx, func(ctx context.Context, tx store.TxWriter) error {
				_, err := tx.RecordCommitEvent(ctx, store.CommitEvent{EventID: "ev-1", TableID: 1, ReceivedAt: clock.Now()})
				return err
			}))

			spec := map[string]any{"catalog": map[string]any{"warehouse-dir": "/nowhere"}, "table": "tms.t", "steps": []any{map[string]any{"type": "compaction"}}}
			unsubmitted := l.Job(t, "tms.t", "u1", 1, []string{"compaction"}, spec)
			vanished := l.Job(t, "tms.t", "u2", 2, []string{"compaction"}, spec) // one in flight per table: another incarnation
			require.NoError(t, l.St.SetJobID(ctx, vanished.ID, vanished.Fence, "local-elsewhere-1", "local"))
			require.NoError(t, l.St.StartJob(ctx, vanished.ID, vanished.Fence, time.Time{}))
			// Three finished rows of policy 3 on the table.
			var finished []store.Job
			for range 3 {
				f := l.Job(t, "tms.t", "u3", 3, []string{"compaction"}, spec)
				require.NoError(t, l.St.FinishJob(ctx, f.ID, f.Fence, store.Finish{Status: store.StatusSucceeded}))
				finished = append(finished, f)
			}

			clock.Advance(30 * time.Second)
			rep, err := rec.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, rep.Checked)
			require.Empty(t, rep.Closed)
			require.EqualValues(t, 1, rep.Purged, "4 finished rows would exceed 2 per table; the newest of the policy stays")
			require.Zero(t, rep.PurgedEvents, "the event id is young")

			clock.Advance(time.Minute)
			rep, err = rec.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, map[store.JobStatus]int{store.StatusFailed: 1}, rep.Closed)
			got := l.Get(t, unsubmitted.ID)
			require.Equal(t, store.StatusFailed, got.Status)
			require.Contains(t, got.Error, "never submitted")
			require.True(t, l.Get(t, vanished.ID).InFlight())

			clock.Advance(time.Hour)
			rep, err = rec.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, map[store.JobStatus]int{store.StatusLost: 1}, rep.Closed)
			require.EqualValues(t, 1, rep.PurgedEvents, "the event id is past its hour")
			got = l.Get(t, vanished.ID)
			require.Equal(t, store.StatusLost, got.Status)
			require.Contains(t, got.Error, "unknown to the submitter")
			require.Equal(t, store.StatusSucceeded, l.Get(t, finished[2].ID).Status)
		})
	}
}

// liveness is the reconciler's view of the node rows, with the dead-node
// limit an engine would have.
type liveness struct {
	sch  store.Scheduler
	dead time.Duration
}

func (l liveness) ListNodes(ctx context.Context) ([]store.Node, error) { return l.sch.ListNodes(ctx) }
func (l liveness) DeadNodeAfter() time.Duration                        { return l.dead }

// TestReconcileDeadNodes: the in-flight rows of a node that died (no
// heartbeat for the limit, or its node row gone) or restarted after
// creating them are closed lost at the first sweep, fence bumped, when the
// submitter cannot vouch for their job; rows of live nodes, of no node, and
// jobs the submitter knows are running are left alone.
func TestReconcileDeadNodes(t *testing.T) {
	t.Parallel()
	for _, backend := range coordtest.LocalBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			l := coordtest.NewLocalLedger(t, backend)
			ctx := t.Context()
			now := time.Now()
			require.NoError(t, l.St.RegisterNode(ctx, "alive", now.Add(-time.Hour)))
			require.NoError(t, l.St.HeartbeatNode(ctx, "alive", now.Add(-10*time.Second)))
			require.NoError(t, l.St.RegisterNode(ctx, "dead", now.Add(-time.Hour)))
			require.NoError(t, l.St.HeartbeatNode(ctx, "dead", now.Add(-2*time.Minute)))

			uri, accepted := coordtest.HangingCatalog(t)
			s := coordtest.NewLocal(t, submit.LocalConfig{})
			spec := map[string]any{"catalog": map[string]any{"warehouse-dir": "/nowhere"}, "table": "tms.t", "steps": []any{map[string]any{"type": "compaction"}}}
			row := func(uuid, node, ext string) store.Job {
				t.Helper()
				j := l.Job(t, "tms.t", uuid, 1, []string{"compaction"}, spec)
				if node != "" {
					// The fixture's row has no node; give it one as the flow would.
					require.NoError(t, l.St.FinishJob(ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded}))
					var err error
					j, err = l.St.CreateJob(ctx, store.NewJob{TableID: j.TableID, PolicyID: 1, Types: []string{"compaction"},
						Trigger: store.TriggerCron, Node: node})
					require.NoError(t, err)
					require.Equal(t, node, j.Node)
				}
				if ext != "" {
					require.NoError(t, l.St.SetJobID(ctx, j.ID, j.Fence, ext, "local"))
				}
				return j
			}
			// The node "restarted" registers again after its row was made.
			restarted := row("u-restarted", "restarted", "local-old-1")
			require.NoError(t, l.St.RegisterNode(ctx, "restarted", time.Now()))
			clock := scheduler.NewManualClock(time.Now())
			var (
				ofAlive     = row("u-alive", "alive", "local-elsewhere-1")
				ofNoNode    = row("u-none", "", "local-elsewhere-2")
				ofDead      = row("u-dead", "dead", "local-elsewhere-3")
				unsubmitted = row("u-dead-unsubmitted", "dead", "")
				ofVanished  = row("u-vanished", "vanished", "local-elsewhere-4")
			)
			// A dead node's row whose job this submitter runs: it vouches.
			vouched := coordtest.HangingJob(t, l, uri, 9)
			require.NoError(t, l.St.FinishJob(ctx, vouched.ID, vouched.Fence, store.Finish{Status: store.StatusSucceeded}))
			vouched, err := l.St.CreateJob(ctx, store.NewJob{TableID: vouched.TableID, PolicyID: 9, Types: []string{"compaction"},
				Trigger: store.TriggerCron, Spec: vouched.Spec, Node: "dead"})
			require.NoError(t, err)
			ext, err := s.Submit(ctx, coordtest.Request(l, vouched))
			require.NoError(t, err)
			require.NoError(t, l.St.SetJobID(ctx, vouched.ID, vouched.Fence, ext, submit.Kind(s)))
			coordtest.WaitRunnerInside(t, l, vouched.ID, accepted)

			rec := reconcile.NewReconciler(l.St, s, reconcile.ReconcilerConfig{Clock: clock, Log: zaptest.NewLogger(t)})
			rec.WatchNodes(liveness{sch: l.St, dead: time.Minute})
			rep, err := rec.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, map[store.JobStatus]int{store.StatusLost: 4}, rep.Closed)
			for _, c := range []struct {
				j    store.Job
				want string
			}{
				{ofDead, "coordinator node dead is dead (last heartbeat 2m"},
				{unsubmitted, "never submitted and its coordinator node dead is dead"},
				{ofVanished, "coordinator node vanished is gone"},
				{restarted, "coordinator node restarted restarted at"},
			} {
				got := l.Get(t, c.j.ID)
				require.Equal(t, store.StatusLost, got.Status, c.want)
				require.Contains(t, got.Error, c.want)
				require.Greater(t, got.Fence, c.j.Fence, "fence bumped first")
				require.Nil(t, got.AfterSnapshotID, "no metrics invented")
			}
			for _, j := range []store.Job{ofAlive, ofNoNode, vouched} {
				require.True(t, l.Get(t, j.ID).InFlight(), "job %d (node %q) is left", j.ID, j.Node)
			}
		})
	}
}

// TestReconcileGravitinoRuns: with the gravitino submitter (against
// gravitinotest, which runs the template's program for real) any node's
// reconciler closes rows by their run's state: a run that failed without
// closing its row is closed failed at the next sweep, a running one is left
// alone, and a run Gravitino does not know is closed lost at once, not
// after the unknown deadline (Gravitino knows every node's runs).
func TestReconcileGravitinoRuns(t *testing.T) {
	t.Parallel()
	l := coordtest.NewLocalLedger(t, store.BackendSQLite)
	ctx := t.Context()
	grav := gravitinotest.Start(t, gravitinotest.Config{Metalakes: []string{"lake"}, CancelGrace: time.Second})
	prog := coordtest.WriteScript(t, `trap 'exit 143' TERM
i=0; while [ "$i" -lt "$1" ]; do sleep 0.1; i=$((i+1)); done
exit 3
`)
	require.NoError(t, grav.RegisterTemplate("lake", gravitinotest.JobTemplate{Name: "tms_runner", Executable: prog, Arguments: []string{"{{sleep}}"}}))
	sub, err := submit.NewGravitinoSubmitter(submit.GravitinoConfig{URI: grav.URL(), Metalake: "lake", JobTemplateName: "tms_runner"})
	require.NoError(t, err)
	defer sub.Close(ctx)
	rec := reconcile.NewReconciler(l.St, sub, reconcile.ReconcilerConfig{Log: zaptest.NewLogger(t)})

	spec := map[string]any{"catalog": map[string]any{"warehouse-dir": "/nowhere"}, "table": "tms.t", "steps": []any{map[string]any{"type": "compaction"}}}
	row := func(name string, sleepTenths int) (store.Job, string) {
		j := l.Job(t, "tms."+name, "u-"+name, 1, []string{"compaction"}, spec)
		id, err := sub.Submit(ctx, submit.JobRequest{JobID: j.ID, Fence: j.Fence, DBURL: l.URL, Table: "local.tms." + name,
			Types: []policy.Type{policy.Compaction}, JobOptions: map[string]string{"sleep": fmt.Sprint(sleepTenths)}})
		require.NoError(t, err)
		require.NoError(t, l.St.SetJobID(ctx, j.ID, j.Fence, id, submit.Kind(sub)))
		return j, id
	}
	failed, failedRun := row("failed", 0)
	running, runningRun := row("running", 600)
	vanished := l.Job(t, "tms.vanished", "u-vanished", 1, []string{"compaction"}, spec)
	require.NoError(t, l.St.SetJobID(ctx, vanished.ID, vanished.Fence, "job-404", "gravitino"))
	_, err = grav.WaitForStatus(ctx, failedRun, gravitinotest.StatusFailed)
	require.NoError(t, err)
	_, err = grav.WaitForStatus(ctx, runningRun, gravitinotest.StatusStarted)
	require.NoError(t, err)

	rep, err := rec.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, map[store.JobStatus]int{store.StatusFailed: 1, store.StatusLost: 1}, rep.Closed)
	require.Contains(t, l.Get(t, failed.ID).Error, "without closing its row")
	got := l.Get(t, vanished.ID)
	require.Equal(t, store.StatusLost, got.Status)
	require.Contains(t, got.Error, "knows every job of every node")
	require.True(t, l.Get(t, running.ID).InFlight(), "a started run is left alone")

	require.NoError(t, sub.Cancel(ctx, runningRun))
	_, err = grav.WaitForStatus(ctx, runningRun, gravitinotest.StatusCancelled)
	require.NoError(t, err)
	rep, err = rec.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, map[store.JobStatus]int{store.StatusCancelled: 1}, rep.Closed, "the cancelled run's row, which its program never closed")
}
