package main

import (
	"crypto/rand"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
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
	eventually(t, 2*time.Minute, "the command-submitted job to finish", func() bool {
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
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755))
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
