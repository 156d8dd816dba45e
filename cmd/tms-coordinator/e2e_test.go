package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
	"github.com/tms-dev/tms/testdata"
)

// The end-to-end tests run the real binaries: tms-coordinator serve as a
// child process, which starts real tms-runner processes on real tables.

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// builtBinaries is what an end-to-end test needs: under -short (make
// check) it skips through testkit.NeedsService, because building the
// binaries is most of this package's time there; make test runs it.
const builtBinaries = "the built tms-coordinator and tms-runner binaries"

// binaries builds both commands once per test binary (without the race
// detector: they are the system under test, run as processes).
func binaries(t *testing.T) (coordinator, runner string) {
	t.Helper()
	testkit.NeedsService(t, builtBinaries)
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "tms-e2e-bin-")
		if binErr != nil {
			return
		}
		for _, cmd := range []string{"tms-coordinator", "tms-runner"} {
			b := exec.Command("go", "build", "-o", filepath.Join(binDir, cmd), "github.com/tms-dev/tms/cmd/"+cmd)
			b.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := b.CombinedOutput(); err != nil {
				binErr = fmt.Errorf("build %s: %v\n%s", cmd, err, out)
				return
			}
		}
	})
	require.NoError(t, binErr)
	return filepath.Join(binDir, "tms-coordinator"), filepath.Join(binDir, "tms-runner")
}

// node is a running `tms-coordinator serve`.
type node struct {
	cmd *exec.Cmd
	log string
}

// serve starts a coordinator node on db with the local catalog dir (none
// if dir is empty).
func serve(t *testing.T, db, dir string, extra ...string) *node {
	t.Helper()
	coord, runner := binaries(t)
	logFile := filepath.Join(t.TempDir(), "serve.log")
	f, err := os.Create(logFile)
	require.NoError(t, err)
	args := []string{"serve", "--db", db, "--runner", runner,
		"--log-dir", t.TempDir(), "--poll-interval", "200ms", "--heartbeat-interval", "2s",
		"--reconcile-interval", "1s", "--listen", "127.0.0.1:0"}
	if dir != "" {
		args = append(args, "--warehouse-dir", dir)
	}
	args = append(args, extra...)
	cmd := exec.Command(coord, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "TMS_LOG_LEVEL=info")
	require.NoError(t, cmd.Start())
	n := &node{cmd: cmd, log: logFile}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		_ = f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("serve log:\n%s", b)
		}
	})
	return n
}

// stop sends SIGTERM and waits for a clean exit.
func (n *node) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, n.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- n.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "serve exits 0 on SIGTERM")
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop within 60s of SIGTERM")
	}
}

func (n *node) logText(t *testing.T) string {
	b, err := os.ReadFile(n.log)
	require.NoError(t, err)
	return string(b)
}

// tableChecksums returns the row checksum of each named table's head.
func tableChecksums(t *testing.T, dir string, names ...string) map[string]checksum.Result {
	t.Helper()
	ctx := context.Background()
	cat, err := catalogs.OpenLocal(ctx, dir, false)
	require.NoError(t, err)
	defer cat.(catalog.Closer).Close()
	out := map[string]checksum.Result{}
	for _, name := range names {
		ident, err := catalogs.ParseIdent(name)
		require.NoError(t, err)
		tbl, err := catalogs.LoadTable(ctx, cat, ident)
		require.NoError(t, err)
		sum, err := checksum.Table(ctx, tbl, tbl.CurrentSnapshot().SnapshotID)
		require.NoError(t, err)
		out[name] = sum
	}
	return out
}

// TestServeCronPolicy attaches an every-second compaction policy with a
// one-hour cooldown to namespace local.tms and runs serve: every table
// under it gets exactly one job, run by a real runner, whose ledger row
// carries before and after snapshot ids; the following instants are
// skipped for the cooldown; the tables' rows are unchanged. On PostgreSQL
// and on the embedded SQLite default.
func TestServeCronPolicy(t *testing.T) {
	t.Parallel()
	tables := []string{"tms.small_files", "tms.many_snapshots"}
	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir := testdata.BuildAdjustedT(t, func(r *testdata.Recipe) { r.Appends = min(r.Appends, 8) }, tables...)
			db := testdb.URL(t, backend)
			before := tableChecksums(t, dir, tables...)

			code, _, stderr := run(t, "migrate", "--db", db)
			require.Equal(t, cli.ExitOK, code, stderr)
			content := filepath.Join(t.TempDir(), "compaction.json")
			require.NoError(t, os.WriteFile(content, []byte(`{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 3600000}`), 0o600))
			code, _, stderr = run(t, "policy", "create", "--db", db, "--name", "compact-often", "--type", "compaction", "--content-file", content)
			require.Equal(t, cli.ExitOK, code, stderr)
			code, _, stderr = run(t, "policy", "attach", "--db", db, "--name", "compact-often", "--object", "local.tms")
			require.Equal(t, cli.ExitOK, code, stderr)

			// The SQLite node takes part of its settings from a config file.
			var extra []string
			if backend == store.BackendSQLite {
				conf := filepath.Join(t.TempDir(), "tms.conf")
				require.NoError(t, os.WriteFile(conf, []byte("# test\ngravitino.maintenance.node.id = conf-node-1\n"+
					"gravitino.maintenance.scheduler.cron.threads = 2\n"), 0o600))
				extra = []string{"--config", conf}
			}
			n := serve(t, db, dir, extra...)
			if backend == store.BackendSQLite {
				testkit.Eventually(t, 30*time.Second, "the node id from the config file", func() bool {
					return strings.Contains(n.logText(t), "serving as node conf-node-1")
				})
			}
			st, err := store.Open(t.Context(), db, zaptest.NewLogger(t))
			require.NoError(t, err)
			defer st.Close()
			jobsOf := func(name string) []store.Job {
				ident, err := catalogs.ParseIdent(name)
				require.NoError(t, err)
				tbl, err := st.FindTable(t.Context(), "local", strings.Join(ident[:len(ident)-1], "."), ident[len(ident)-1])
				if err != nil {
					return nil
				}
				jobs, err := st.ListJobs(t.Context(), tbl.ID, 10)
				require.NoError(t, err)
				return jobs
			}
			testkit.Eventually(t, 3*time.Minute, "one finished job per table", func() bool {
				for _, name := range tables {
					jobs := jobsOf(name)
					if len(jobs) == 0 || jobs[0].InFlight() {
						return false
					}
				}
				return true
			})
			testkit.Eventually(t, 30*time.Second, "an instant skipped for the cooldown", func() bool {
				return strings.Contains(n.logText(t), `"reason": "cooldown"`)
			})
			n.stop(t)

			for _, name := range tables {
				jobs := jobsOf(name)
				require.Len(t, jobs, 1, "%s: one job; later instants fall in the cooldown", name)
				j := jobs[0]
				require.Equal(t, store.StatusSucceeded, j.Status, "%s: %s", name, j.Error)
				require.Equal(t, store.TriggerCron, j.Trigger)
				require.Equal(t, []string{"compaction"}, j.Types)
				require.NotNil(t, j.BeforeSnapshotID)
				require.NotNil(t, j.AfterSnapshotID)
				require.NotEqual(t, *j.BeforeSnapshotID, *j.AfterSnapshotID, "%s was compacted", name)
				require.NotEmpty(t, j.JobID, "the external job id was recorded")
				require.Equal(t, "local", j.Submitter, "and the submitter that started it")
			}
			require.Equal(t, before, tableChecksums(t, dir, tables...), "no row lost or duplicated")

			// status shows each table's last run with before/after metrics.
			code, out, stderr := run(t, "status", "--db", db, "--json")
			require.Equal(t, cli.ExitOK, code, stderr)
			var got statusOutput
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			require.Empty(t, got.InFlight)
			require.Len(t, got.Tables, len(tables))
			for _, j := range got.Tables {
				require.Equal(t, "succeeded", j.Status)
				require.Contains(t, []string{"local.tms.small_files", "local.tms.many_snapshots"}, j.Table)
				require.NotEmpty(t, j.MetricsBefore)
				require.NotEmpty(t, j.MetricsAfter)
			}
			require.NotEmpty(t, got.Queue, "the flow's rows (sync, reconcile, policy-expand) are counted")
			code, out, stderr = run(t, "status", "--db", db)
			require.Equal(t, cli.ExitOK, code, stderr)
			require.Contains(t, out, "local.tms.small_files")
			require.Contains(t, out, "→")
		})
	}
}

// setupFlow builds the tables, migrates db and creates and attaches a
// policy whose content is content, returning the warehouse dir.
func setupFlow(t *testing.T, db string, tables []string, typ, content, object string) string {
	t.Helper()
	dir := testdata.BuildAdjustedT(t, func(r *testdata.Recipe) { r.Appends = min(r.Appends, 8) }, tables...)
	code, _, stderr := run(t, "migrate", "--db", db)
	require.Equal(t, cli.ExitOK, code, stderr)
	file := filepath.Join(t.TempDir(), "policy.json")
	require.NoError(t, os.WriteFile(file, []byte(content), 0o600))
	code, _, stderr = run(t, "policy", "create", "--db", db, "--name", "p", "--type", typ, "--content-file", file)
	require.Equal(t, cli.ExitOK, code, stderr)
	code, _, stderr = run(t, "policy", "attach", "--db", db, "--name", "p", "--object", object)
	require.Equal(t, cli.ExitOK, code, stderr)
	return dir
}

// ledger opens db for the test to read.
func ledger(t *testing.T, db string) store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), db, zaptest.NewLogger(t))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// registered waits until serve registered table name and returns its row.
func registered(t *testing.T, st store.Store, name string) store.Table {
	t.Helper()
	ident, err := catalogs.ParseIdent(name)
	require.NoError(t, err)
	var tbl store.Table
	testkit.Eventually(t, time.Minute, name+" to be registered", func() bool {
		tbl, err = st.FindTable(t.Context(), "local", strings.Join(ident[:len(ident)-1], "."), ident[len(ident)-1])
		return err == nil
	})
	return tbl
}

// TestServeCommitBurst sends 500 commit enqueues for one table within a
// second (one through the enqueue-commit command, the rest straight into
// the task table as the HTTP ingress will): they coalesce into one
// commit-job and one chain run of the table's onCommit types.
func TestServeCommitBurst(t *testing.T) {
	t.Parallel()
	db := testdb.PostgresURL(t)
	const name = "tms.small_files"
	dir := setupFlow(t, db, []string{name}, "compaction", `{"schedule": {"onCommit": true}, "minIntervalMs": 0}`, "local.tms")
	before := tableChecksums(t, dir, name)
	n := serve(t, db, dir, "--commit-delay", "2s")
	st := ledger(t, db)
	tbl := registered(t, st, name)

	start := time.Now()
	code, out, stderr := run(t, "enqueue-commit", "--db", db, "--table", "local."+name, "--commit-delay", "2s")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, out, "enqueued")
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 499; i += 8 {
				now := time.Now()
				_, err := st.UpsertTask(t.Context(), store.NewTask{
					TaskKey: store.TaskKey{Name: "commit-job", Instance: fmt.Sprint(tbl.ID)}, ExecutionTime: now.Add(2 * time.Second),
				}, now)
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("500 enqueues took %s", time.Since(start))

	// Every upsert has returned, so nothing creates commit-job rows any
	// more: once no row is left and the newest job is finished, the jobs
	// the burst made are all there (a second one would need a row left).
	testkit.Eventually(t, 2*time.Minute, "the commit chain to finish and its row to go", func() bool {
		jobs, err := st.ListJobs(t.Context(), tbl.ID, 10)
		require.NoError(t, err)
		left, err := st.ListTasks(t.Context(), "commit-job", 10)
		require.NoError(t, err)
		return len(jobs) > 0 && !jobs[0].InFlight() && len(left) == 0
	})
	n.stop(t)
	jobs, err := st.ListJobs(t.Context(), tbl.ID, 10)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "one chain run for the burst")
	require.Equal(t, store.TriggerCommit, jobs[0].Trigger)
	require.Equal(t, store.StatusSucceeded, jobs[0].Status, jobs[0].Error)
	require.Equal(t, 1, strings.Count(n.logText(t), `"kind": "commit-job", "job"`), "one submission")
	left, err := st.ListTasks(t.Context(), "commit-job", 10)
	require.NoError(t, err)
	require.Empty(t, left)
	require.Equal(t, before, tableChecksums(t, dir, name))
}

// TestPolicyOnCommitOrphanCleanupRejected: orphan cleanup runs on a
// schedule only, and the error names the field.
func TestPolicyOnCommitOrphanCleanupRejected(t *testing.T) {
	t.Parallel()
	db := testdb.SQLiteURL(t)
	code, _, stderr := run(t, "migrate", "--db", db)
	require.Equal(t, cli.ExitOK, code, stderr)
	file := filepath.Join(t.TempDir(), "orphans.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"schedule": {"onCommit": true, "crontab": "@daily"}}`), 0o600))
	code, _, stderr = run(t, "policy", "create", "--db", db, "--name", "o", "--type", "orphan-cleanup", "--content-file", file)
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, stderr, "schedule.onCommit")
	code, out, stderr := run(t, "policy", "list", "--db", db, "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.NotContains(t, out, `"o"`, "nothing was written")
}

// runnerChildren returns the pids of the tms-runner processes parent
// started, from /proc.
func runnerChildren(t *testing.T, parent int) []int {
	t.Helper()
	_, runner := binaries(t)
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so cut at the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != fmt.Sprint(parent) {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.HasPrefix(string(cmdline), runner+"\x00run\x00") {
			out = append(out, pid)
		}
	}
	return out
}

// TestServeRunnerKilled kills a real runner with SIGKILL in the middle of
// its job: the reconciler closes its row failed (the fence bumped, no after
// snapshot), the table's rows are unchanged, and the next trigger runs the
// table again.
func TestServeRunnerKilled(t *testing.T) {
	t.Parallel()
	db := testdb.PostgresURL(t)
	const name = "tms.small_files"
	dir := setupFlow(t, db, []string{name}, "compaction", `{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 0}`, "local.tms.small_files")
	before := tableChecksums(t, dir, name)
	n := serve(t, db, dir)
	st := ledger(t, db)
	tbl := registered(t, st, name)

	var killed int
	testkit.Eventually(t, time.Minute, "a runner to kill", func() bool {
		for _, pid := range runnerChildren(t, n.cmd.Process.Pid) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = pid
				return true
			}
		}
		return false
	})
	t.Logf("killed runner pid %d", killed)
	var victim store.Job
	testkit.Eventually(t, time.Minute, "the reconciler to close the killed runner's row", func() bool {
		jobs, err := st.ListJobs(t.Context(), tbl.ID, 100)
		require.NoError(t, err)
		for _, j := range jobs {
			if strings.Contains(j.Error, "reconciler") {
				victim = j
				return true
			}
		}
		return false
	})
	require.Contains(t, []store.JobStatus{store.StatusFailed, store.StatusLost}, victim.Status)
	require.Nil(t, victim.AfterSnapshotID, "metrics are never invented")
	require.Greater(t, victim.Fence, int64(1), "the fence was bumped")
	testkit.Eventually(t, time.Minute, "a later job to succeed", func() bool {
		jobs, err := st.ListJobs(t.Context(), tbl.ID, 100)
		require.NoError(t, err)
		return jobs[0].ID > victim.ID && !jobs[0].InFlight() && jobs[0].Status == store.StatusSucceeded
	})
	n.stop(t)
	require.Equal(t, before, tableChecksums(t, dir, name), "no row lost or duplicated")
}

// TestServeThreeNodes runs the every-second flow on three coordinator
// processes sharing one PostgreSQL: no table ever has two jobs in flight,
// and every ledger row was submitted exactly once, by one node.
func TestServeThreeNodes(t *testing.T) {
	t.Parallel()
	db := testdb.PostgresURL(t)
	tables := []string{"tms.small_files", "tms.many_snapshots"}
	dir := setupFlow(t, db, tables, "compaction", `{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 0}`, "local.tms")
	before := tableChecksums(t, dir, tables...)
	nodes := []*node{serve(t, db, dir), serve(t, db, dir), serve(t, db, dir)}
	st := ledger(t, db)
	var rows []store.Table
	for _, name := range tables {
		rows = append(rows, registered(t, st, name))
	}
	testkit.Eventually(t, 2*time.Minute, "five finished jobs per table", func() bool {
		for _, tbl := range rows {
			jobs, err := st.ListJobs(t.Context(), tbl.ID, 100)
			require.NoError(t, err)
			done := 0
			for _, j := range jobs {
				if !j.InFlight() {
					done++
				}
			}
			if done < 5 {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		n.stop(t)
	}
	total := 0
	ids := map[string]bool{}
	for _, tbl := range rows {
		jobs, err := st.ListJobs(t.Context(), tbl.ID, 1000)
		require.NoError(t, err)
		total += len(jobs)
		// Oldest first: each job was created after the previous one finished.
		for i := len(jobs) - 1; i >= 0; i-- {
			j := jobs[i]
			require.False(t, j.InFlight(), "job %d still in flight after shutdown", j.ID)
			require.Contains(t, []store.JobStatus{store.StatusSucceeded, store.StatusSkipped, store.StatusCancelled}, j.Status, "job %d: %s", j.ID, j.Error)
			require.NotEmpty(t, j.JobID)
			require.False(t, ids[j.JobID], "external id %s used twice", j.JobID)
			ids[j.JobID] = true
			if i < len(jobs)-1 {
				prev := jobs[i+1]
				require.False(t, j.CreatedAt.Before(prev.FinishedAt), "table %d: job %d started before job %d finished", tbl.ID, j.ID, prev.ID)
			}
		}
	}
	submitted, busy := 0, 0
	for _, n := range nodes {
		c := strings.Count(n.logText(t), `"kind": "cron-job", "job"`)
		submitted += c
		if c > 0 {
			busy++
		}
	}
	require.Equal(t, total, submitted, "one submission per ledger row")
	t.Logf("%d jobs over %d tables, submitted by %d of 3 nodes", total, len(rows), busy)
	require.Equal(t, before, tableChecksums(t, dir, tables...), "no row lost or duplicated")
}

// TestPolicyCommandsKeepExpandRow: the policy commands create, move and
// remove the policy's policy-expand row at once, without a running serve.
func TestPolicyCommandsKeepExpandRow(t *testing.T) {
	t.Parallel()
	db := testdb.SQLiteURL(t)
	code, _, stderr := run(t, "migrate", "--db", db)
	require.Equal(t, cli.ExitOK, code, stderr)
	write := func(content string) string {
		f := filepath.Join(t.TempDir(), "p.json")
		require.NoError(t, os.WriteFile(f, []byte(content), 0o600))
		return f
	}
	st := ledger(t, db)
	expandRows := func() []store.Task {
		tasks, err := st.ListTasks(t.Context(), "policy-expand", 10)
		require.NoError(t, err)
		return tasks
	}

	code, _, stderr = run(t, "policy", "create", "--db", db, "--name", "e", "--type", "snapshot-expiry", "--content-file", write(`{"schedule": {"crontab": "0 3 * * *"}}`))
	require.Equal(t, cli.ExitOK, code, stderr)
	rows := expandRows()
	require.Len(t, rows, 1)
	require.Equal(t, 3, rows[0].ExecutionTime.Hour())
	require.Zero(t, rows[0].ExecutionTime.Minute())

	code, _, stderr = run(t, "policy", "alter", "--db", db, "--name", "e", "--content-file", write(`{"schedule": {"crontab": "30 4 * * *"}}`))
	require.Equal(t, cli.ExitOK, code, stderr)
	rows = expandRows()
	require.Len(t, rows, 1)
	require.Equal(t, 4, rows[0].ExecutionTime.Hour(), "moved to the new crontab's next instant")
	require.Equal(t, 30, rows[0].ExecutionTime.Minute())

	code, _, stderr = run(t, "policy", "disable", "--db", db, "--name", "e")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Empty(t, expandRows())
	code, _, stderr = run(t, "policy", "enable", "--db", db, "--name", "e")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Len(t, expandRows(), 1)

	code, _, stderr = run(t, "policy", "alter", "--db", db, "--name", "e", "--content-file", write(`{"schedule": {"onCommit": true}}`))
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Empty(t, expandRows(), "no crontab, no expand row")
	code, _, stderr = run(t, "policy", "alter", "--db", db, "--name", "e", "--content-file", write(`{"schedule": {"crontab": "@hourly"}}`))
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Len(t, expandRows(), 1)
	code, _, stderr = run(t, "policy", "delete", "--db", db, "--name", "e")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Empty(t, expandRows())
}

// TestFlowCommandsRefuseBadInput: bad flags of serve, enqueue-commit and
// status exit 2 naming the flag, before anything is opened or written.
func TestFlowCommandsRefuseBadInput(t *testing.T) {
	t.Parallel()
	db := testdb.SQLiteURL(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"props without a catalog name", []string{"serve", "--db", db, "--catalog-prop", "type=rest"}, "--catalog NAME is required"},
		{"catalog name without props", []string{"serve", "--db", db, "--catalog", "prod"}, `--catalog "prod" needs --catalog-prop`},
		{"secret given in clear", []string{"serve", "--db", db, "--catalog", "prod", "--catalog-prop", "type=rest", "--catalog-secret", "token=abc"}, "env:NAME or file:PATH"},
		{"secret from a missing file", []string{"serve", "--db", db, "--catalog", "prod", "--catalog-prop", "type=rest", "--catalog-secret", "token=file:/nonexistent/tok"}, "--catalog-secret token"},
		{"config file key unknown", []string{"serve", "--db", db, "--config", badConfig(t, "gravitino.maintenance.nope = 1")}, ":1: key gravitino.maintenance.nope: unknown key"},
		{"config file credential in clear", []string{"serve", "--db", db, "--config", badConfig(t, "gravitino.maintenance.ircAuth.token = abc")}, "key gravitino.maintenance.ircAuth.token: a credential must be a reference"},
		{"config file bad milliseconds", []string{"serve", "--db", db, "--config", badConfig(t, "# c\ngravitino.maintenance.scheduler.pollIntervalMs = 1s")}, `:2: key gravitino.maintenance.scheduler.pollIntervalMs: want a non-negative number of milliseconds, got "1s"`},
		{"config file without prefix", []string{"serve", "--db", db, "--config", badConfig(t, "db = sqlite://x.db")}, `every key starts with "gravitino.maintenance."`},
		{"config file missing", []string{"serve", "--db", db, "--config", "/nonexistent/tms.conf"}, "--config: open /nonexistent/tms.conf"},
		{"cooldown of an unknown type", []string{"serve", "--db", db, "--min-interval", "compactoin=1h"}, `--min-interval: unknown maintenance type "compactoin"`},
		{"catalog notify on sqlite", []string{"serve", "--db", db, "--catalog-notify"}, "--catalog-notify needs the catalog's PostgreSQL database"},
		{"admin token in clear", []string{"serve", "--db", db, "--admin-token", "hunter2"}, "--admin-token: "},
		{"enqueue a bad table name", []string{"enqueue-commit", "--db", db, "--table", "local.t"}, "want CATALOG.NAMESPACE.TABLE"},
		{"status with no tables", []string{"status", "--db", db, "--tables", "0"}, "--tables must be positive"},
	} {
		code, _, stderr := run(t, tc.args...)
		require.Equal(t, cli.ExitUsage, code, "%s: %s", tc.name, stderr)
		require.Contains(t, stderr, tc.want, tc.name)
	}
	_, err := os.Stat(strings.TrimPrefix(db, "sqlite://"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was created")

	// A table the ledger does not know is a failure that says what to do.
	code, _, stderr := run(t, "migrate", "--db", db)
	require.Equal(t, cli.ExitOK, code, stderr)
	code, _, stderr = run(t, "enqueue-commit", "--db", db, "--table", "local.tms.nope")
	require.Equal(t, cli.ExitFailure, code)
	require.Contains(t, stderr, "local.tms.nope is not registered")
}

// badConfig writes a config file with text and returns its path.
func badConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tms.conf")
	require.NoError(t, os.WriteFile(p, []byte(text+"\n"), 0o600))
	return p
}
