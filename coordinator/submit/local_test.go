package submit_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
)

// TestLocalSubmitRunsJob submits a full-chain job on both ledgers and checks
// what an operator sees afterwards: the submitter says succeeded with exit
// code 0, the ledger row is closed succeeded by the runner with before and
// after snapshots, the table was compacted, and the job's log file holds the
// runner's report framed by the submitter's start and exit lines. On
// PostgreSQL the ledger URL carries a password, which must reach the runner
// through TMS_DB rather than --db.
func TestLocalSubmitRunsJob(t *testing.T) {
	t.Parallel()
	for _, backend := range coordtest.LocalBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir, uuid, head := coordtest.LocalTable(t)
			l := coordtest.NewLocalLedger(t, backend)
			j := l.Job(t, coordtest.LocalTableName, uuid, 7, coordtest.LocalChain, coordtest.WarehouseSpec(dir))
			// The runner logs at info unless told otherwise.
			s := coordtest.NewLocal(t, submit.LocalConfig{Env: coordtest.EnvWithout(os.Environ(), "TMS_LOG_LEVEL")})
			req := coordtest.Request(l, j)
			secret := ""
			if backend == store.BackendPostgres {
				// Trust auth ignores the password, so the runner can connect.
				secret = coordtest.SecretValue()
				u, err := url.Parse(l.URL)
				require.NoError(t, err)
				u.User = url.UserPassword(u.User.Username(), secret)
				req.DBURL = u.String()
			}

			id, err := s.Submit(t.Context(), req)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(id, fmt.Sprintf("local-%d-", j.ID)), id)
			st := coordtest.WaitEnded(t, s, id)
			require.Equal(t, submit.JobSucceeded, st.State, st.Message)
			require.Equal(t, 0, st.ExitCode)
			require.False(t, st.Fenced)
			require.Empty(t, st.Message)
			require.Zero(t, st.PID, "no process once it ended")
			require.False(t, st.StartedAt.Before(st.SubmittedAt))
			require.True(t, st.FinishedAt.After(st.StartedAt))

			got := l.Get(t, j.ID)
			require.Equal(t, store.StatusSucceeded, got.Status, got.Error)
			require.False(t, got.InFlight())
			require.Equal(t, &head, got.BeforeSnapshotID)
			after := coordtest.LoadLocal(t, dir).Head
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
	dir, uuid, head := coordtest.LocalTable(t)
	l := coordtest.NewLocalLedger(t, store.BackendSQLite)
	props, err := catalogs.LocalProps(dir)
	require.NoError(t, err)
	uri := props["uri"]
	delete(props, "uri")
	spec := coordtest.WarehouseSpec(dir)
	spec["catalog"] = map[string]any{"name": catalogs.LocalName, "properties": props}
	j := l.Job(t, coordtest.LocalTableName, uuid, 7, coordtest.LocalChain, spec)

	rec := t.TempDir()
	wrapper := coordtest.WriteScript(t, fmt.Sprintf(`printf '%%s\n' "$@" > %[1]s/argv
env > %[1]s/env
exec %[2]s "$@"
`, rec, coordtest.BuiltRunner(t)))
	s := coordtest.NewLocal(t, submit.LocalConfig{
		RunnerPath: wrapper,
		Env:        append(os.Environ(), "TMS_CATALOG_PROP_uri=file:/nonexistent/inherited.db", "TMS_DB=sqlite:///nonexistent/inherited.db"),
	})
	token := coordtest.SecretValue()
	req := coordtest.Request(l, j)
	req.CatalogProps = map[string]string{"uri": uri, "token": token}
	req.JobOptions = map[string]string{"executor-memory": "1g"}
	require.NotContains(t, fmt.Sprint(req), token, "a printed request leaves the props out")
	require.NotContains(t, fmt.Sprintf("%#v", req), token)

	id, err := s.Submit(t.Context(), req)
	require.NoError(t, err)
	st := coordtest.WaitEnded(t, s, id)
	require.Equal(t, submit.JobSucceeded, st.State, st.Message)
	got := l.Get(t, j.ID)
	require.Equal(t, store.StatusSucceeded, got.Status, got.Error)
	require.Equal(t, &head, got.BeforeSnapshotID)

	argv, err := os.ReadFile(filepath.Join(rec, "argv"))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("run\n--db\n%s\n--job-id\n%d\n--fence\n%d\n", l.URL, j.ID, j.Fence), string(argv))
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

// TestLocalSubmitConcurrencyLimit submits three real jobs with a limit of
// one: Submit returns at once, the later jobs are queued, the runs never
// overlap (a wrapper around the real runner appends "start" and "end" lines
// to a trace file), and all three rows end succeeded.
func TestLocalSubmitConcurrencyLimit(t *testing.T) {
	t.Parallel()
	l := coordtest.NewLocalLedger(t, store.BackendSQLite)
	trace := filepath.Join(t.TempDir(), "trace")
	wrapper := coordtest.WriteScript(t, fmt.Sprintf(`echo start >> %[1]s
%[2]s "$@"
code=$?
echo end >> %[1]s
exit $code
`, trace, coordtest.BuiltRunner(t)))
	s := coordtest.NewLocal(t, submit.LocalConfig{RunnerPath: wrapper, MaxRunning: 1})

	var jobs []store.Job
	var ids []string
	type tableDir struct{ dir, uuid string }
	var tables []tableDir
	for range 3 { // a table each (one job in flight per table), built before any submit
		dir, uuid, _ := coordtest.LocalTable(t)
		tables = append(tables, tableDir{dir, uuid})
	}
	for policy := int64(1); policy <= 3; policy++ {
		dir, uuid := tables[policy-1].dir, tables[policy-1].uuid
		j := l.Job(t, coordtest.LocalTableName, uuid, policy, []string{"compaction"},
			map[string]any{"catalog": map[string]any{"warehouse-dir": dir}, "table": coordtest.LocalTableName, "steps": []any{map[string]any{"type": "compaction"}}})
		id, err := s.Submit(t.Context(), coordtest.Request(l, j))
		require.NoError(t, err)
		jobs, ids = append(jobs, j), append(ids, id)
	}
	require.Equal(t, submit.JobQueued, coordtest.Status(t, s, ids[2]).State, "with one slot, the third job waits")

	running := 0
	var ended []submit.JobStatus
	testkit.Eventually(t, 90*time.Second, "all three jobs to end", func() bool {
		ended = ended[:0]
		n := 0
		for _, id := range ids {
			st := coordtest.Status(t, s, id)
			if st.State == submit.JobRunning {
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
		require.Equal(t, submit.JobSucceeded, st.State, st.Message)
		if i > 0 {
			require.False(t, st.StartedAt.Before(ended[i-1].FinishedAt), "job %d started before job %d ended", i, i-1)
		}
	}
	for _, j := range jobs {
		got := l.Get(t, j.ID)
		require.Equal(t, store.StatusSucceeded, got.Status, got.Error)
	}
	lines, err := os.ReadFile(trace)
	require.NoError(t, err)
	require.Equal(t, "start\nend\nstart\nend\nstart\nend\n", string(lines), "runs never overlap")
}

// TestLocalSubmitExitCodes checks how the runner's exit code becomes a
// status an operator can act on: a runner fenced out (the reconciler bumped
// the fence) is failed with Fenced and exit 4, leaving the row as it was;
// a job that fails is failed with exit 1 and the runner's one-line reason.
func TestLocalSubmitExitCodes(t *testing.T) {
	t.Parallel()
	l := coordtest.NewLocalLedger(t, store.BackendSQLite)
	s := coordtest.NewLocal(t, submit.LocalConfig{})
	missing := filepath.Join(t.TempDir(), "no-warehouse")

	fenced := l.Job(t, coordtest.LocalTableName, "some-uuid", 1, []string{"compaction"}, coordtest.WarehouseSpec(missing))
	_, err := l.St.BumpFence(t.Context(), fenced.ID)
	require.NoError(t, err)
	before := l.Get(t, fenced.ID)
	fencedID, err := s.Submit(t.Context(), coordtest.Request(l, fenced)) // carries the old fence
	require.NoError(t, err)

	failing := l.Job(t, coordtest.LocalTableName, "some-other-uuid", 2, coordtest.LocalChain, coordtest.WarehouseSpec(missing)) // another incarnation: one job in flight per table
	failingID, err := s.Submit(t.Context(), coordtest.Request(l, failing))
	require.NoError(t, err)

	st := coordtest.WaitEnded(t, s, fencedID)
	require.Equal(t, submit.JobFailed, st.State)
	require.True(t, st.Fenced)
	require.Equal(t, cli.ExitFenced, st.ExitCode)
	require.Contains(t, st.Message, "fenced out")
	require.Contains(t, st.Message, "has fence 2, write carried 1", "the runner's own line")
	require.Equal(t, before, l.Get(t, fenced.ID), "a fenced-out runner writes nothing")

	st = coordtest.WaitEnded(t, s, failingID)
	require.Equal(t, submit.JobFailed, st.State)
	require.False(t, st.Fenced)
	require.Equal(t, cli.ExitFailure, st.ExitCode)
	require.Contains(t, st.Message, "runner failed (exit 1): tms-runner run:")
	require.Contains(t, st.Message, "no catalog.db")
	got := l.Get(t, failing.ID)
	require.Equal(t, store.StatusFailed, got.Status)
	require.Contains(t, got.Error, "no catalog.db")

	// Launching the finished job again: the runner refuses (fenced), and
	// the status quotes this launch, not the earlier one in the same log.
	againID, err := s.Submit(t.Context(), coordtest.Request(l, failing))
	require.NoError(t, err)
	require.NotEqual(t, failingID, againID)
	st = coordtest.WaitEnded(t, s, againID)
	require.True(t, st.Fenced)
	require.Contains(t, st.Message, "already finished")
	require.NotContains(t, st.Message, "no catalog.db")
	require.Equal(t, got, l.Get(t, failing.ID))
	logText, err := os.ReadFile(s.LogPath(failing.ID))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(logText), ": starting "), "one log per job, one start line per launch")
}

// TestLocalSubmitStatusUnknown: ids this submitter never issued — garbage,
// or issued by another submitter (another node, or this node before a
// restart) for the same ledger job — are unknown to Status and to Cancel.
func TestLocalSubmitStatusUnknown(t *testing.T) {
	t.Parallel()
	script := coordtest.WriteScript(t, "exit 0\n")
	before := coordtest.NewLocal(t, submit.LocalConfig{RunnerPath: script})
	req := submit.JobRequest{JobID: 1, Fence: 1, DBURL: "sqlite:///unused.db"}
	id, err := before.Submit(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, submit.JobSucceeded, coordtest.WaitEnded(t, before, id).State)
	require.NoError(t, before.Close(t.Context()))

	after := coordtest.NewLocal(t, submit.LocalConfig{RunnerPath: script})
	again, err := after.Submit(t.Context(), req)
	require.NoError(t, err)
	require.NotEqual(t, id, again, "a restarted submitter never reissues an id")
	for _, unknown := range []string{id, "local-1-1", "garbage", ""} {
		st := coordtest.Status(t, after, unknown)
		require.Equal(t, submit.JobUnknown, st.State, unknown)
		require.Equal(t, -1, st.ExitCode)
		require.Contains(t, st.Message, "not started by this coordinator process")
		require.ErrorIs(t, after.Cancel(t.Context(), unknown), submit.ErrUnknownJob)
	}
	require.Equal(t, submit.JobSucceeded, coordtest.WaitEnded(t, after, again).State)
}

// TestLocalSubmitClose shuts the submitter down with one runner inside its
// job and one job queued: the queued job is cancelled without starting, the
// runner gets SIGTERM once the shutdown context ends and closes its row
// cancelled, and no further job is accepted.
func TestLocalSubmitClose(t *testing.T) {
	t.Parallel()
	l := coordtest.NewLocalLedger(t, store.BackendSQLite)
	uri, accepted := coordtest.HangingCatalog(t)
	running := coordtest.HangingJob(t, l, uri, 1)
	waiting := coordtest.HangingJob(t, l, uri, 2)
	s := coordtest.NewLocal(t, submit.LocalConfig{MaxRunning: 1, KillGrace: 30 * time.Second})
	runningID, err := s.Submit(t.Context(), coordtest.Request(l, running))
	require.NoError(t, err)
	waitingID, err := s.Submit(t.Context(), coordtest.Request(l, waiting))
	require.NoError(t, err)
	coordtest.WaitRunnerInside(t, l, running.ID, accepted)

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = s.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "stopped 1 running job(s)")

	st := coordtest.Status(t, s, runningID)
	require.Equal(t, submit.JobCancelled, st.State)
	require.Contains(t, st.Message, "the coordinator shut down: the runner stopped on SIGTERM")
	require.Equal(t, store.StatusCancelled, l.Get(t, running.ID).Status)

	st = coordtest.Status(t, s, waitingID)
	require.Equal(t, submit.JobCancelled, st.State)
	require.Contains(t, st.Message, "shut down before the job started")
	require.Equal(t, store.StatusPending, l.Get(t, waiting.ID).Status, "its row is left for the reconciler")

	_, err = s.Submit(t.Context(), coordtest.Request(l, waiting))
	require.ErrorIs(t, err, submit.ErrSubmitterClosed)
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
		cfg  submit.LocalConfig
		want string
	}{
		{submit.LocalConfig{RunnerPath: filepath.Join(dir, "missing")}, "is not an executable file"},
		{submit.LocalConfig{RunnerPath: notExec}, "is not an executable file"},
		{submit.LocalConfig{RunnerPath: coordtest.BuiltRunner(t), MaxRunning: -1}, "must not be negative"},
		{submit.LocalConfig{RunnerPath: coordtest.BuiltRunner(t), LogDir: filepath.Join(notExec, "logs")}, "create log dir"},
	} {
		_, err := submit.NewLocalSubmitter(tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}

	s := coordtest.NewLocal(t, submit.LocalConfig{})
	for _, tc := range []struct {
		req  submit.JobRequest
		want string
	}{
		{submit.JobRequest{Fence: 1, DBURL: "sqlite:///x.db"}, "JobID"},
		{submit.JobRequest{JobID: 1, DBURL: "sqlite:///x.db"}, "Fence"},
		{submit.JobRequest{JobID: 1, Fence: 1}, "DBURL"},
		{submit.JobRequest{JobID: 1, Fence: 1, DBURL: "sqlite:///x.db", CatalogProps: map[string]string{"a=b": "v"}}, `key "a=b"`},
	} {
		_, err := s.Submit(t.Context(), tc.req)
		require.ErrorIs(t, err, submit.ErrInvalidJobRequest)
		require.ErrorContains(t, err, tc.want)
	}
	require.True(t, errors.Is(s.Cancel(t.Context(), "local-1-1-x"), submit.ErrUnknownJob))
}
