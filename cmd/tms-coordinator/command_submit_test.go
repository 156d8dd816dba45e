package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// TestServeCommandSubmitter runs serve with --job-submitter command: its
// submit command starts the real tms-runner detached (as a platform would,
// outside the coordinator's process tree) and prints an id; its status
// command answers from what the detached job left behind. The job row is
// closed by the runner, its external id is the printed one, the table is
// compacted with its rows unchanged, and the ledger password that the
// runner needed reached it only through the environment.
func TestServeCommandSubmitter(t *testing.T) {
	t.Parallel()
	// PostgreSQL here trusts local connections, so a password in the URL
	// is accepted and shows whether a secret ever reached an argument.
	u, err := url.Parse(testdb.PostgresURL(t))
	require.NoError(t, err)
	secret := "pw-" + strings.ToLower(rand.Text()[:10])
	u.User = url.UserPassword(u.User.Username(), secret)
	db := u.String()
	dir := setupFlow(t, db, []string{"tms.small_files"}, "compaction", `{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 3600000}`, "local.tms")
	before := tableChecksums(t, dir, "tms.small_files")
	_, runner := binaries(t)
	jobs := t.TempDir()
	argvLog := filepath.Join(jobs, "argv.log")
	submitCmd := writeScript(t, `echo "$@" >> `+argvLog+`
id="cmd-$1-$2"
( "`+runner+`" run --job-id "$1" --fence "$2"; echo $? > "`+jobs+`/$id.exit" ) > "`+jobs+`/$id.log" 2>&1 < /dev/null &
echo "$id"
`)
	statusCmd := writeScript(t, `f="`+jobs+`/$1"
[ -f "$f.log" ] || exit 1
if [ -f "$f.exit" ]; then
  [ "$(cat "$f.exit")" = 0 ] && echo succeeded || echo failed
else
  echo running
fi
`)
	cancelCmd := writeScript(t, `exit 0`)
	argv := func(a ...string) string { b, _ := json.Marshal(a); return string(b) }
	n := serve(t, db, dir, "--job-submitter", "command",
		"--submit-command", argv(submitCmd, "{{job_id}}", "{{fence}}", "{{ledger_url}}", "{{table_identifier}}", "{{types}}"),
		"--status-command", argv(statusCmd, "{{external_id}}"), "--cancel-command", argv(cancelCmd, "{{external_id}}"))

	st := ledger(t, db)
	tbl := registered(t, st, "tms.small_files")
	var j store.Job
	testkit.Eventually(t, 2*time.Minute, "the command-submitted job to finish", func() bool {
		js, err := st.ListJobs(t.Context(), tbl.ID, 10)
		require.NoError(t, err)
		if len(js) == 0 || js[0].InFlight() {
			return false
		}
		j = js[0]
		return true
	})
	n.stop(t)
	require.Equal(t, store.StatusSucceeded, j.Status, j.Error)
	require.Equal(t, "cmd-1-1", j.JobID, "the id the submit command printed")
	require.Equal(t, "command", j.Submitter)
	require.NotEqual(t, *j.BeforeSnapshotID, *j.AfterSnapshotID, "compacted")
	require.Equal(t, before, tableChecksums(t, dir, "tms.small_files"), "no row lost or duplicated")
	got, err := os.ReadFile(argvLog)
	require.NoError(t, err)
	f := strings.Fields(string(got))
	require.Len(t, f, 5, "one submit: %s", got)
	require.Equal(t, []string{"1", "1"}, f[:2], "job id and fence")
	require.True(t, strings.HasPrefix(f[2], "postgres://"+u.User.Username()+"@"), "ledger URL without its password: %s", f[2])
	require.Equal(t, []string{"tms.small_files", "compaction"}, f[3:])
	require.NotContains(t, string(got), secret, "the password is in no argument")
	require.NotContains(t, n.logText(t), secret, "nor in serve's log")
}

// writeScript writes an executable /bin/sh script and returns its path.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cmd.sh")
	testkit.WriteExecutable(t, path, []byte("#!/bin/sh\n"+body))
	return path
}

// TestServeCommandSubmitterBadConfig: a template with an unknown
// placeholder, a missing command or a JSON that is not an argv stops serve
// with a usage error naming it, before the database is touched.
func TestServeCommandSubmitterBadConfig(t *testing.T) {
	t.Parallel()
	db := testdb.SQLiteURL(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--job-submitter", "command", "--submit-command", `["x", "{{jobid}}"]`, "--status-command", `["x"]`, "--cancel-command", `["x"]`},
			"submit command: argument 1: unknown placeholder {{jobid}}"},
		{[]string{"--job-submitter", "command", "--submit-command", `["x"]`, "--status-command", `["x"]`}, "--cancel-command is required"},
		{[]string{"--job-submitter", "command", "--submit-command", `x y`, "--status-command", `["x"]`, "--cancel-command", `["x"]`}, "--submit-command: want a JSON array"},
		{[]string{"--job-submitter", "yarn"}, `unknown submitter "yarn"`},
		{[]string{"--job-submitter", "gravitino", "--gravitino-metalake", "m", "--gravitino-job-template", "t"}, "jobSubmitter.gravitino.uri is required"},
		{[]string{"--job-submitter", "gravitino", "--gravitino-uri", "ftp://x", "--gravitino-metalake", "m", "--gravitino-job-template", "t"}, `jobSubmitter.gravitino.uri "ftp://x": want http(s)://host:port`},
		{[]string{"--gravitino-uri", "http://g:8090"}, "--gravitino-uri is for --job-submitter gravitino, not local"},
		{[]string{"--submit-command", `["x"]`}, "--submit-command is for --job-submitter command"},
	} {
		code, _, stderr := run(t, append([]string{"serve", "--db", db}, tc.args...)...)
		require.Equal(t, cli.ExitUsage, code, stderr)
		require.Contains(t, stderr, tc.want)
	}
	_, err := os.Stat(strings.TrimPrefix(db, "sqlite://"))
	require.True(t, os.IsNotExist(err), "the ledger was not created")
}

// TestServeCommandSubmitterKillAndCancelOnAnyNode: node A submits two jobs
// through the command submitter; each starts detached, a wrapper around the
// real tms-runner that waits before exec'ing it (the job has not reached
// the runner yet), and node A stops. Node B, with the same commands, never
// submitted them: a SIGKILL of one detached job is seen by node B's
// reconciler (through the status command) and the row is closed failed;
// the other is cancelled over node B's HTTP API, whose cancel command stops
// it, and its row is closed cancelled. Nothing is left in flight.
func TestServeCommandSubmitterKillAndCancelOnAnyNode(t *testing.T) {
	t.Parallel()
	db := testdb.PostgresURL(t)
	dir := setupFlow(t, db, []string{"tms.small_files", "tms.partitioned"}, "compaction", `{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 3600000}`, "local.tms")
	_, runner := binaries(t)
	jobs := t.TempDir()
	submitCmd := writeScript(t, `id="cmd-$1-$2"
( sh -c 'sleep 600; exec "$0" run --job-id "$1" --fence "$2"' "`+runner+`" "$1" "$2" &
  echo $! > "`+jobs+`/$id.pid"; wait $!; echo $? > "`+jobs+`/$id.exit" ) > "`+jobs+`/$id.log" 2>&1 < /dev/null &
while [ ! -s "`+jobs+`/$id.pid" ]; do sleep 0.05; done
echo "$id"
`)
	statusCmd := writeScript(t, `f="`+jobs+`/$1"
[ -f "$f.pid" ] || exit 1
if [ -f "$f.exit" ]; then
  if [ -f "$f.cancelled" ]; then echo cancelled; elif [ "$(cat "$f.exit")" = 0 ]; then echo succeeded; else echo failed; fi
else
  echo running
fi
`)
	cancelCmd := writeScript(t, `f="`+jobs+`/$1"
[ -f "$f.pid" ] || exit 1
touch "$f.cancelled"
kill -TERM "$(cat "$f.pid")" 2>/dev/null || true
`)
	argv := func(a ...string) string { b, _ := json.Marshal(a); return string(b) }
	args := []string{"--job-submitter", "command",
		"--submit-command", argv(submitCmd, "{{job_id}}", "{{fence}}"),
		"--status-command", argv(statusCmd, "{{external_id}}"), "--cancel-command", argv(cancelCmd, "{{external_id}}")}
	a := serve(t, db, dir, args...)
	st := ledger(t, db)
	small, part := registered(t, st, "tms.small_files"), registered(t, st, "tms.partitioned")
	submitted := func(tbl store.Table) store.Job {
		var j store.Job
		testkit.Eventually(t, time.Minute, "a submitted job of "+tbl.Name, func() bool {
			js, err := st.ListJobs(t.Context(), tbl.ID, 10)
			require.NoError(t, err)
			if len(js) == 0 || js[0].JobID == "" {
				return false
			}
			j = js[0]
			return true
		})
		return j
	}
	killed, cancelled := submitted(small), submitted(part)
	a.stop(t)
	require.True(t, killed.InFlight())
	require.True(t, cancelled.InFlight())

	tokens := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tokens, "admin"), []byte("admin-token-b"), 0o600))
	b := serve(t, db, dir, append(args, "--admin-token", "file:"+filepath.Join(tokens, "admin"))...)
	pid, err := os.ReadFile(filepath.Join(jobs, killed.JobID+".pid"))
	require.NoError(t, err)
	require.NoError(t, exec.Command("kill", "-KILL", strings.TrimSpace(string(pid))).Run())
	testkit.Eventually(t, time.Minute, "node B's reconciler to close the killed job's row", func() bool {
		j, err := st.GetJob(t.Context(), killed.ID)
		require.NoError(t, err)
		killed = j
		return !j.InFlight()
	})
	require.Equal(t, store.StatusFailed, killed.Status)
	require.Contains(t, killed.Error, "without closing its row")

	var res struct{ Cancel string }
	code := call(t, "POST", fmt.Sprintf("%s/v1/jobs/%d/cancel", b.httpAddr(t), cancelled.ID), "admin-token-b", nil, &res)
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, code)
	testkit.Eventually(t, time.Minute, "the cancelled job's row to close", func() bool {
		j, err := st.GetJob(t.Context(), cancelled.ID)
		require.NoError(t, err)
		cancelled = j
		return !j.InFlight()
	})
	require.Equal(t, store.StatusCancelled, cancelled.Status, cancelled.Error)
	_, err = os.Stat(filepath.Join(jobs, cancelled.JobID+".cancelled"))
	require.NoError(t, err, "the cancel command ran")
	b.stop(t)
	for _, tbl := range []store.Table{small, part} {
		open, err := st.TableInFlightJobs(t.Context(), tbl.ID)
		require.NoError(t, err)
		require.Empty(t, open, "nothing in flight on %s", tbl.Name)
	}
}
