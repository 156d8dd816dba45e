package coordinator_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
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
	"github.com/tms-dev/tms/coordinator"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
	"github.com/tms-dev/tms/testdata"
)

// The local submitter is tested with the real tms-runner binary, real
// ledgers (PostgreSQL and SQLite) and real testdata tables. Shell scripts
// stand in only where the runner cannot show what is tested: wrappers that
// exec or run the real runner record the argv and environment it got and
// when each run starts and ends (the concurrency limit); a script that
// ignores SIGTERM, which the runner never does, proves the SIGKILL
// escalation; and `exit 0` is enough to test ids across a restart.

var (
	runnerOnce sync.Once
	runnerBin  string
	runnerErr  error
)

// builtRunner builds cmd/tms-runner once per test binary (without the race
// detector: the runner is the system under test's child, not the test) into
// a fixed folder under the temp dir, replaced atomically on every run so
// that runs do not pile up binaries.
func builtRunner(t *testing.T) string {
	t.Helper()
	runnerOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "tms-coordinator-test")
		if runnerErr = os.MkdirAll(dir, 0o755); runnerErr != nil {
			return
		}
		var tmp string
		if tmp, runnerErr = os.MkdirTemp(dir, "build-"); runnerErr != nil {
			return
		}
		defer os.RemoveAll(tmp)
		out := filepath.Join(tmp, "tms-runner")
		build := exec.Command("go", "build", "-ldflags=-s -w", "-o", out, "github.com/tms-dev/tms/cmd/tms-runner")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			runnerErr = fmt.Errorf("build tms-runner: %v\n%s", err, b)
			return
		}
		runnerBin = filepath.Join(dir, "tms-runner")
		runnerErr = os.Rename(out, runnerBin)
	})
	require.NoError(t, runnerErr)
	return runnerBin
}

// localBackends are the ledgers the runner is started against.
var localBackends = []string{store.BackendPostgres, store.BackendSQLite}

// localLedger is a migrated ledger the test creates job rows in.
type localLedger struct {
	url string
	st  store.Store
}

func newLocalLedger(t *testing.T, backend string) localLedger {
	t.Helper()
	dbURL := testdb.SQLiteURL(t)
	if backend == store.BackendPostgres {
		dbURL = testdb.PostgresURL(t)
	}
	ctx := context.Background()
	_, err := store.Migrate(ctx, dbURL, zaptest.NewLogger(t))
	require.NoError(t, err)
	st, err := store.Open(ctx, dbURL, zaptest.NewLogger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return localLedger{url: dbURL, st: st}
}

// job registers table name with uuid and opens a cron job row for policy
// whose spec is spec.
func (l localLedger) job(t *testing.T, name, uuid string, policy int64, types []string, spec any) store.Job {
	t.Helper()
	ident, err := catalogs.ParseIdent(name)
	require.NoError(t, err)
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	row, err := l.st.RegisterTable(t.Context(), store.TableRef{
		Catalog: catalogs.LocalName, Namespace: strings.Join(ident[:len(ident)-1], "."), Name: ident[len(ident)-1], UUID: uuid,
	})
	require.NoError(t, err)
	j, err := l.st.CreateJob(t.Context(), store.NewJob{TableID: row.ID, PolicyID: policy, Types: types, Trigger: store.TriggerCron, Spec: raw})
	require.NoError(t, err)
	return j
}

func (l localLedger) get(t *testing.T, id int64) store.Job {
	t.Helper()
	j, err := l.st.GetJob(t.Context(), id)
	require.NoError(t, err)
	return j
}

// localTableName is the recipe the runs maintain, built with 6 appends (6
// small files): enough for compaction to have work, small enough for the
// race detector.
const localTableName = "tms.small_files"

// localTable builds the small table and returns its warehouse dir, uuid and
// head snapshot id.
func localTable(t *testing.T) (dir, uuid string, head int64) {
	t.Helper()
	dir = testdata.BuildAdjustedT(t, func(r *testdata.Recipe) { r.Appends = 6 }, localTableName)
	tbl := loadLocal(t, dir)
	return dir, tbl.uuid, tbl.head
}

type localState struct {
	uuid string
	head int64
}

func loadLocal(t *testing.T, dir string) localState {
	t.Helper()
	cat, err := catalogs.OpenLocal(t.Context(), dir, false)
	require.NoError(t, err)
	if c, ok := cat.(catalog.Closer); ok {
		defer c.Close() // its connection pool, which the leak check counts
	}
	ident, err := catalogs.ParseIdent(localTableName)
	require.NoError(t, err)
	tbl, err := catalogs.LoadTable(t.Context(), cat, ident)
	require.NoError(t, err)
	s := localState{uuid: tbl.Metadata().TableUUID().String()}
	if snap := tbl.CurrentSnapshot(); snap != nil {
		s.head = snap.SnapshotID
	}
	return s
}

var localChain = []string{"compaction", "manifest-rewrite", "snapshot-expiry"}

// warehouseSpec is the job spec of the full chain on the local table.
func warehouseSpec(dir string) map[string]any {
	return map[string]any{
		"catalog": map[string]any{"warehouse-dir": dir},
		"table":   localTableName,
		"steps":   []any{map[string]any{"type": "compaction"}, map[string]any{"type": "manifest-rewrite"}, map[string]any{"type": "snapshot-expiry"}},
	}
}

// newLocal returns a submitter with the built runner and a temp log dir
// unless cfg says otherwise, closed when the test ends.
func newLocal(t *testing.T, cfg coordinator.LocalConfig) *coordinator.LocalSubmitter {
	t.Helper()
	if cfg.RunnerPath == "" {
		cfg.RunnerPath = builtRunner(t)
	}
	if cfg.LogDir == "" {
		cfg.LogDir = t.TempDir()
	}
	if cfg.Log == nil {
		cfg.Log = zaptest.NewLogger(t)
	}
	s, err := coordinator.NewLocalSubmitter(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

func request(l localLedger, j store.Job) coordinator.JobRequest {
	return coordinator.JobRequest{JobID: j.ID, Fence: j.Fence, DBURL: l.url, Table: "local." + localTableName}
}

func status(t *testing.T, s coordinator.Submitter, id string) coordinator.JobStatus {
	t.Helper()
	st, err := s.Status(t.Context(), id)
	require.NoError(t, err)
	return st
}

// waitEnded waits until the job is terminal and returns its status.
func waitEnded(t *testing.T, s coordinator.Submitter, id string) coordinator.JobStatus {
	t.Helper()
	var st coordinator.JobStatus
	eventually(t, 60*time.Second, "job "+id+" to end", func() bool {
		st = status(t, s, id)
		return st.State.Terminal()
	})
	return st
}

// secretValue is a credential-like value no test writes anywhere but into a
// request's CatalogProps or a URL's password.
func secretValue() string { return "s3cr3t-" + strings.ToLower(rand.Text()[:12]) }

// TestLocalSubmitRunsJob submits a full-chain job on both ledgers and checks
// what an operator sees afterwards: the submitter says succeeded with exit
// code 0, the ledger row is closed succeeded by the runner with before and
// after snapshots, the table was compacted, and the job's log file holds the
// runner's report framed by the submitter's start and exit lines. On
// PostgreSQL the ledger URL carries a password, which must reach the runner
// through TMS_DB rather than --db.
func TestLocalSubmitRunsJob(t *testing.T) {
	t.Parallel()
	for _, backend := range localBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir, uuid, head := localTable(t)
			l := newLocalLedger(t, backend)
			j := l.job(t, localTableName, uuid, 7, localChain, warehouseSpec(dir))
			// The runner logs at info unless told otherwise.
			s := newLocal(t, coordinator.LocalConfig{Env: envWithout(os.Environ(), "TMS_LOG_LEVEL")})
			req := request(l, j)
			secret := ""
			if backend == store.BackendPostgres {
				// Trust auth ignores the password, so the runner can connect.
				secret = secretValue()
				u, err := url.Parse(l.url)
				require.NoError(t, err)
				u.User = url.UserPassword(u.User.Username(), secret)
				req.DBURL = u.String()
			}

			id, err := s.Submit(t.Context(), req)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(id, fmt.Sprintf("local-%d-", j.ID)), id)
			st := waitEnded(t, s, id)
			require.Equal(t, coordinator.JobSucceeded, st.State, st.Message)
			require.Equal(t, 0, st.ExitCode)
			require.False(t, st.Fenced)
			require.Empty(t, st.Message)
			require.Zero(t, st.PID, "no process once it ended")
			require.False(t, st.StartedAt.Before(st.SubmittedAt))
			require.True(t, st.FinishedAt.After(st.StartedAt))

			got := l.get(t, j.ID)
			require.Equal(t, store.StatusSucceeded, got.Status, got.Error)
			require.False(t, got.InFlight())
			require.Equal(t, &head, got.BeforeSnapshotID)
			after := loadLocal(t, dir).head
			require.NotEqual(t, head, after, "compaction committed")
			require.Equal(t, &after, got.AfterSnapshotID)

			logText, err := os.ReadFile(s.LogPath(j.ID))
			require.NoError(t, err)
			log := string(logText)
			require.Contains(t, log, id+": starting "+s.RunnerPath()+" run ")
			require.Contains(t, log, fmt.Sprintf("--job-id %d --fence %d", j.ID, j.Fence))
			require.Contains(t, log, "compaction", "the runner's report")
			require.Contains(t, log, "chain starting", "the runner's info log")
			require.Contains(t, log, id+": succeeded (exit status 0)")
			if secret != "" {
				require.NotContains(t, log, secret, "the password is not in argv, so not in the start line")
				require.NotContains(t, log, " --db ")
			}
		})
	}
}

// TestLocalSubmitCredentialsOnlyInEnvironment runs a job whose catalog can
// only be reached with properties that are not in the spec: the SQL
// catalog's uri and a token travel as CatalogProps. The job succeeding
// proves they reached the runner through TMS_CATALOG_PROP_*; a wrapper
// records the argv and environment the runner got, and neither argv, the
// ledger row nor the job log holds the token. Inherited TMS_CATALOG_PROP_*
// variables of the coordinator do not reach the runner.
func TestLocalSubmitCredentialsOnlyInEnvironment(t *testing.T) {
	t.Parallel()
	dir, uuid, head := localTable(t)
	l := newLocalLedger(t, store.BackendSQLite)
	props, err := catalogs.LocalProps(dir)
	require.NoError(t, err)
	uri := props["uri"]
	delete(props, "uri")
	spec := warehouseSpec(dir)
	spec["catalog"] = map[string]any{"name": catalogs.LocalName, "properties": props}
	j := l.job(t, localTableName, uuid, 7, localChain, spec)

	rec := t.TempDir()
	wrapper := writeScript(t, fmt.Sprintf(`printf '%%s\n' "$@" > %[1]s/argv
env > %[1]s/env
exec %[2]s "$@"
`, rec, builtRunner(t)))
	s := newLocal(t, coordinator.LocalConfig{
		RunnerPath: wrapper,
		Env:        append(os.Environ(), "TMS_CATALOG_PROP_uri=file:/nonexistent/inherited.db", "TMS_DB=sqlite:///nonexistent/inherited.db"),
	})
	token := secretValue()
	req := request(l, j)
	req.CatalogProps = map[string]string{"uri": uri, "token": token}
	req.JobOptions = map[string]string{"executor-memory": "1g"}
	require.NotContains(t, fmt.Sprint(req), token, "a printed request leaves the props out")
	require.NotContains(t, fmt.Sprintf("%#v", req), token)

	id, err := s.Submit(t.Context(), req)
	require.NoError(t, err)
	st := waitEnded(t, s, id)
	require.Equal(t, coordinator.JobSucceeded, st.State, st.Message)
	got := l.get(t, j.ID)
	require.Equal(t, store.StatusSucceeded, got.Status, got.Error)
	require.Equal(t, &head, got.BeforeSnapshotID)

	argv, err := os.ReadFile(filepath.Join(rec, "argv"))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("run\n--db\n%s\n--job-id\n%d\n--fence\n%d\n", l.url, j.ID, j.Fence), string(argv))
	env, err := os.ReadFile(filepath.Join(rec, "env"))
	require.NoError(t, err)
	envLines := strings.Split(string(env), "\n")
	require.Contains(t, envLines, "TMS_CATALOG_PROP_token="+token)
	require.Contains(t, envLines, "TMS_CATALOG_PROP_uri="+uri)
	require.NotContains(t, string(env), "inherited.db", "the coordinator's own TMS_CATALOG_PROP_* and TMS_DB are dropped")

	for what, text := range map[string]string{"spec": string(got.Spec), "outcomes": string(got.Outcomes), "error": got.Error} {
		require.NotContains(t, text, token, what)
	}
	logText, err := os.ReadFile(s.LogPath(j.ID))
	require.NoError(t, err)
	require.NotContains(t, string(logText), token)
}

// envWithout returns environ without the variable name.
func envWithout(environ []string, name string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// writeScript writes an executable /bin/sh script and returns its path.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runner.sh")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755))
	return path
}

// TestLocalSubmitConcurrencyLimit submits three real jobs with a limit of
// one: Submit returns at once, the later jobs are queued, the runs never
// overlap (a wrapper around the real runner appends "start" and "end" lines
// to a trace file), and all three rows end succeeded.
func TestLocalSubmitConcurrencyLimit(t *testing.T) {
	t.Parallel()
	dir, uuid, _ := localTable(t)
	l := newLocalLedger(t, store.BackendSQLite)
	trace := filepath.Join(t.TempDir(), "trace")
	wrapper := writeScript(t, fmt.Sprintf(`echo start >> %[1]s
%[2]s "$@"
code=$?
echo end >> %[1]s
exit $code
`, trace, builtRunner(t)))
	s := newLocal(t, coordinator.LocalConfig{RunnerPath: wrapper, MaxRunning: 1})

	var jobs []store.Job
	var ids []string
	for policy := int64(1); policy <= 3; policy++ {
		j := l.job(t, localTableName, uuid, policy, []string{"compaction"},
			map[string]any{"catalog": map[string]any{"warehouse-dir": dir}, "table": localTableName, "steps": []any{map[string]any{"type": "compaction"}}})
		id, err := s.Submit(t.Context(), request(l, j))
		require.NoError(t, err)
		jobs, ids = append(jobs, j), append(ids, id)
	}
	require.Equal(t, coordinator.JobQueued, status(t, s, ids[2]).State, "with one slot, the third job waits")

	running := 0
	var ended []coordinator.JobStatus
	eventually(t, 90*time.Second, "all three jobs to end", func() bool {
		ended = ended[:0]
		n := 0
		for _, id := range ids {
			st := status(t, s, id)
			if st.State == coordinator.JobRunning {
				n++
			}
			if st.State.Terminal() {
				ended = append(ended, st)
			}
		}
		running = max(running, n)
		return len(ended) == len(ids)
	})
	require.Equal(t, 1, running, "never more than one running")
	for i, st := range ended {
		require.Equal(t, coordinator.JobSucceeded, st.State, st.Message)
		if i > 0 {
			require.False(t, st.StartedAt.Before(ended[i-1].FinishedAt), "job %d started before job %d ended", i, i-1)
		}
	}
	for _, j := range jobs {
		got := l.get(t, j.ID)
		require.Equal(t, store.StatusSucceeded, got.Status, got.Error)
	}
	lines, err := os.ReadFile(trace)
	require.NoError(t, err)
	require.Equal(t, "start\nend\nstart\nend\nstart\nend\n", string(lines), "runs never overlap")
}

// hangingCatalog is a REST catalog endpoint that accepts connections and
// never answers, so a runner pointed at it stays inside its job (its row
// running) until it is stopped. accepted receives once per connection.
func hangingCatalog(t *testing.T) (uri string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	acc := make(chan struct{}, 16)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case acc <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String(), acc
}

// hangingJob opens a row whose runner will block on the hanging catalog.
func hangingJob(t *testing.T, l localLedger, uri string, policy int64) store.Job {
	t.Helper()
	return l.job(t, localTableName, "uuid-of-a-remote-table", policy, []string{"compaction"}, map[string]any{
		"catalog": map[string]any{"name": "prod", "properties": map[string]any{"type": "rest", "uri": uri}},
		"table":   localTableName,
		"steps":   []any{map[string]any{"type": "compaction"}},
	})
}

// waitRunnerInside waits until the runner holds its row (running) and has
// connected to the catalog.
func waitRunnerInside(t *testing.T, l localLedger, jobID int64, accepted <-chan struct{}) {
	t.Helper()
	select {
	case <-accepted:
	case <-time.After(60 * time.Second):
		t.Fatal("the runner never connected to the catalog")
	}
	require.Equal(t, store.StatusRunning, l.get(t, jobID).Status)
}

// TestLocalSubmitCancelRunning cancels a real runner in the middle of its
// job. While it runs, /proc shows the token and the ledger password only in
// its environment, never in its command line. Cancel returns once the
// process is gone; the submitter says cancelled and the runner closed its
// row cancelled on the way out.
func TestLocalSubmitCancelRunning(t *testing.T) {
	t.Parallel()
	l := newLocalLedger(t, store.BackendPostgres)
	uri, accepted := hangingCatalog(t)
	j := hangingJob(t, l, uri, 7)
	s := newLocal(t, coordinator.LocalConfig{KillGrace: 30 * time.Second})

	token, password := secretValue(), secretValue()
	u, err := url.Parse(l.url)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), password)
	req := request(l, j)
	req.DBURL = u.String()
	req.CatalogProps = map[string]string{"token": token}
	id, err := s.Submit(t.Context(), req)
	require.NoError(t, err)
	waitRunnerInside(t, l, j.ID, accepted)

	st := status(t, s, id)
	require.Equal(t, coordinator.JobRunning, st.State)
	require.Equal(t, -1, st.ExitCode)
	require.NotZero(t, st.PID)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.PID))
	require.NoError(t, err)
	require.Equal(t, []string{s.RunnerPath(), "run", "--job-id", fmt.Sprint(j.ID), "--fence", fmt.Sprint(j.Fence)},
		strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"))
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", st.PID))
	require.NoError(t, err)
	envVars := strings.Split(string(environ), "\x00")
	require.Contains(t, envVars, "TMS_CATALOG_PROP_token="+token)
	require.Contains(t, envVars, "TMS_DB="+req.DBURL)
	pgid, err := syscall.Getpgid(st.PID)
	require.NoError(t, err)
	require.Equal(t, st.PID, pgid, "the runner leads a process group of its own")

	require.NoError(t, s.Cancel(t.Context(), id))
	done := status(t, s, id)
	require.Equal(t, coordinator.JobCancelled, done.State)
	require.Equal(t, 1, done.ExitCode, "the runner exits 1 after closing its row cancelled")
	require.Contains(t, done.Message, "cancelled: the runner stopped on SIGTERM")
	require.ErrorIs(t, syscall.Kill(st.PID, 0), syscall.ESRCH, "the process is gone")
	require.ErrorIs(t, syscall.Kill(-st.PID, 0), syscall.ESRCH, "and so is its group")

	got := l.get(t, j.ID)
	require.Equal(t, store.StatusCancelled, got.Status)
	require.Contains(t, got.Error, "interrupted")
	require.NoError(t, s.Cancel(t.Context(), id), "cancelling an ended job is a no-op")
	require.Equal(t, coordinator.JobCancelled, status(t, s, id).State)
}

// TestLocalSubmitCancelEscalates covers what the real runner never does:
// ignoring SIGTERM. A script that ignores it, with a child of its own, is
// killed with its whole process group after KillGrace. A job queued behind
// it is cancelled without ever starting, and submitting the same job and
// fence twice gives one id.
func TestLocalSubmitCancelEscalates(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	script := writeScript(t, fmt.Sprintf(`trap '' TERM
sleep 300 &
echo $! > %s
wait
`, pidFile))
	s := newLocal(t, coordinator.LocalConfig{RunnerPath: script, MaxRunning: 1, KillGrace: 200 * time.Millisecond})
	req := coordinator.JobRequest{JobID: 1, Fence: 1, DBURL: "sqlite:///unused.db"}
	first, err := s.Submit(t.Context(), req)
	require.NoError(t, err)
	again, err := s.Submit(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, first, again, "a repeated submit of a queued or running job is the same job")
	queued, err := s.Submit(t.Context(), coordinator.JobRequest{JobID: 2, Fence: 1, DBURL: "sqlite:///unused.db"})
	require.NoError(t, err)
	require.Equal(t, coordinator.JobQueued, status(t, s, queued).State)

	require.NoError(t, s.Cancel(t.Context(), queued))
	st := status(t, s, queued)
	require.Equal(t, coordinator.JobCancelled, st.State)
	require.Equal(t, "cancelled before it started", st.Message)
	require.True(t, st.StartedAt.IsZero(), "never started")
	_, err = os.Stat(s.LogPath(2))
	require.ErrorIs(t, err, os.ErrNotExist, "a job that never started has no log")

	var child int
	eventually(t, 30*time.Second, "the script to start its child", func() bool {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			_, err = fmt.Sscan(string(b), &child)
		}
		return err == nil && child > 0
	})
	pid := status(t, s, first).PID
	require.NotZero(t, pid)
	require.NoError(t, s.Cancel(t.Context(), first))
	st = status(t, s, first)
	require.Equal(t, coordinator.JobCancelled, st.State)
	require.Equal(t, -1, st.ExitCode, "killed by a signal")
	require.Contains(t, st.Message, "did not stop within 200ms of SIGTERM and was killed")
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	eventually(t, 10*time.Second, "the script's child to be killed with the group", func() bool {
		return processGone(child)
	})
}

// processGone reports whether pid no longer runs: it does not exist, or is
// a zombie waiting for a reaper that is not the test (containers often run
// without an init that reaps).
func processGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, ok := bytes.Cut(stat, []byte(") "))
	return ok && len(rest) > 0 && rest[0] == 'Z'
}

// TestLocalSubmitExitCodes checks how the runner's exit code becomes a
// status an operator can act on: a runner fenced out (the reconciler bumped
// the fence) is failed with Fenced and exit 4, leaving the row as it was;
// a job that fails is failed with exit 1 and the runner's one-line reason.
func TestLocalSubmitExitCodes(t *testing.T) {
	t.Parallel()
	l := newLocalLedger(t, store.BackendSQLite)
	s := newLocal(t, coordinator.LocalConfig{})
	missing := filepath.Join(t.TempDir(), "no-warehouse")

	fenced := l.job(t, localTableName, "some-uuid", 1, []string{"compaction"}, warehouseSpec(missing))
	_, err := l.st.BumpFence(t.Context(), fenced.ID)
	require.NoError(t, err)
	before := l.get(t, fenced.ID)
	fencedID, err := s.Submit(t.Context(), request(l, fenced)) // carries the old fence
	require.NoError(t, err)

	failing := l.job(t, localTableName, "some-uuid", 2, localChain, warehouseSpec(missing))
	failingID, err := s.Submit(t.Context(), request(l, failing))
	require.NoError(t, err)

	st := waitEnded(t, s, fencedID)
	require.Equal(t, coordinator.JobFailed, st.State)
	require.True(t, st.Fenced)
	require.Equal(t, cli.ExitFenced, st.ExitCode)
	require.Contains(t, st.Message, "fenced out")
	require.Contains(t, st.Message, "has fence 2, write carried 1", "the runner's own line")
	require.Equal(t, before, l.get(t, fenced.ID), "a fenced-out runner writes nothing")

	st = waitEnded(t, s, failingID)
	require.Equal(t, coordinator.JobFailed, st.State)
	require.False(t, st.Fenced)
	require.Equal(t, cli.ExitFailure, st.ExitCode)
	require.Contains(t, st.Message, "runner failed (exit 1): tms-runner run:")
	require.Contains(t, st.Message, "no catalog.db")
	got := l.get(t, failing.ID)
	require.Equal(t, store.StatusFailed, got.Status)
	require.Contains(t, got.Error, "no catalog.db")

	// Launching the finished job again: the runner refuses (fenced), and
	// the status quotes this launch, not the earlier one in the same log.
	againID, err := s.Submit(t.Context(), request(l, failing))
	require.NoError(t, err)
	require.NotEqual(t, failingID, againID)
	st = waitEnded(t, s, againID)
	require.True(t, st.Fenced)
	require.Contains(t, st.Message, "already finished")
	require.NotContains(t, st.Message, "no catalog.db")
	require.Equal(t, got, l.get(t, failing.ID))
	logText, err := os.ReadFile(s.LogPath(failing.ID))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(logText), ": starting "), "one log per job, one start line per launch")
}

// TestLocalSubmitStatusUnknown: ids this submitter never issued — garbage,
// or issued by another submitter (another node, or this node before a
// restart) for the same ledger job — are unknown to Status and to Cancel.
func TestLocalSubmitStatusUnknown(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "exit 0\n")
	before := newLocal(t, coordinator.LocalConfig{RunnerPath: script})
	req := coordinator.JobRequest{JobID: 1, Fence: 1, DBURL: "sqlite:///unused.db"}
	id, err := before.Submit(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, coordinator.JobSucceeded, waitEnded(t, before, id).State)
	require.NoError(t, before.Close(t.Context()))

	after := newLocal(t, coordinator.LocalConfig{RunnerPath: script})
	again, err := after.Submit(t.Context(), req)
	require.NoError(t, err)
	require.NotEqual(t, id, again, "a restarted submitter never reissues an id")
	for _, unknown := range []string{id, "local-1-1", "garbage", ""} {
		st := status(t, after, unknown)
		require.Equal(t, coordinator.JobUnknown, st.State, unknown)
		require.Equal(t, -1, st.ExitCode)
		require.Contains(t, st.Message, "not started by this coordinator process")
		require.ErrorIs(t, after.Cancel(t.Context(), unknown), coordinator.ErrUnknownJob)
	}
	require.Equal(t, coordinator.JobSucceeded, waitEnded(t, after, again).State)
}

// TestLocalSubmitClose shuts the submitter down with one runner inside its
// job and one job queued: the queued job is cancelled without starting, the
// runner gets SIGTERM once the shutdown context ends and closes its row
// cancelled, and no further job is accepted.
func TestLocalSubmitClose(t *testing.T) {
	t.Parallel()
	l := newLocalLedger(t, store.BackendSQLite)
	uri, accepted := hangingCatalog(t)
	running := hangingJob(t, l, uri, 1)
	waiting := hangingJob(t, l, uri, 2)
	s := newLocal(t, coordinator.LocalConfig{MaxRunning: 1, KillGrace: 30 * time.Second})
	runningID, err := s.Submit(t.Context(), request(l, running))
	require.NoError(t, err)
	waitingID, err := s.Submit(t.Context(), request(l, waiting))
	require.NoError(t, err)
	waitRunnerInside(t, l, running.ID, accepted)

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = s.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "stopped 1 running job(s)")

	st := status(t, s, runningID)
	require.Equal(t, coordinator.JobCancelled, st.State)
	require.Contains(t, st.Message, "the coordinator shut down: the runner stopped on SIGTERM")
	require.Equal(t, store.StatusCancelled, l.get(t, running.ID).Status)

	st = status(t, s, waitingID)
	require.Equal(t, coordinator.JobCancelled, st.State)
	require.Contains(t, st.Message, "shut down before the job started")
	require.Equal(t, store.StatusPending, l.get(t, waiting.ID).Status, "its row is left for the reconciler")

	_, err = s.Submit(t.Context(), request(l, waiting))
	require.ErrorIs(t, err, coordinator.ErrSubmitterClosed)
	require.NoError(t, s.Close(t.Context()), "closing again is a no-op")
}

// TestLocalSubmitConfig checks the errors an operator gets for a bad
// install or request before anything runs.
func TestLocalSubmitConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "tms-runner")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	for _, tc := range []struct {
		cfg  coordinator.LocalConfig
		want string
	}{
		{coordinator.LocalConfig{RunnerPath: filepath.Join(dir, "missing")}, "is not an executable file"},
		{coordinator.LocalConfig{RunnerPath: notExec}, "is not an executable file"},
		{coordinator.LocalConfig{RunnerPath: builtRunner(t), MaxRunning: -1}, "must not be negative"},
		{coordinator.LocalConfig{RunnerPath: builtRunner(t), LogDir: filepath.Join(notExec, "logs")}, "create log dir"},
	} {
		_, err := coordinator.NewLocalSubmitter(tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}

	s := newLocal(t, coordinator.LocalConfig{})
	for _, tc := range []struct {
		req  coordinator.JobRequest
		want string
	}{
		{coordinator.JobRequest{Fence: 1, DBURL: "sqlite:///x.db"}, "JobID"},
		{coordinator.JobRequest{JobID: 1, DBURL: "sqlite:///x.db"}, "Fence"},
		{coordinator.JobRequest{JobID: 1, Fence: 1}, "DBURL"},
		{coordinator.JobRequest{JobID: 1, Fence: 1, DBURL: "sqlite:///x.db", CatalogProps: map[string]string{"a=b": "v"}}, `key "a=b"`},
	} {
		_, err := s.Submit(t.Context(), tc.req)
		require.ErrorIs(t, err, coordinator.ErrInvalidJobRequest)
		require.ErrorContains(t, err, tc.want)
	}
	require.True(t, errors.Is(s.Cancel(t.Context(), "local-1-1-x"), coordinator.ErrUnknownJob))
}
