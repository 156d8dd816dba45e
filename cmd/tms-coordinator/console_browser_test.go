package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/browsertest"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// TestConsoleInABrowser drives the console of a real serve in headless
// Chromium (Debian's, through ChromeDriver). Jobs go through the command
// submitter: tms.small_files' job runs the real tms-runner detached, so the
// ledger gets its metrics samples; tms.partitioned's job is held queued by
// the platform (its submit script starts nothing). In the browser: the
// login form, the tables page, the compacted table's page whose timeline
// has one point per metrics row in the ledger, the finished job's page, and
// a cancel of the queued job, which runs the cancel command and closes its
// row cancelled; then the jobs, queue and plan pages. Screenshots of each
// page go to tmp/artifacts/console.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	db := testdb.PostgresURL(t)
	dir := setupFlow(t, db, []string{"tms.small_files", "tms.partitioned"}, "compaction",
		`{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 3600000}`, "local.tms")
	_, runner := binaries(t)
	jobs := t.TempDir()
	submitCmd := writeScript(t, `if [ "$3" = tms.partitioned ]; then echo "held-$1-$2"; exit 0; fi
id="cmd-$1-$2"
( "`+runner+`" run --job-id "$1" --fence "$2"; echo $? > "`+jobs+`/$id.exit" ) > "`+jobs+`/$id.log" 2>&1 < /dev/null &
echo "$id"
`)
	statusCmd := writeScript(t, `f="`+jobs+`/$1"
case "$1" in
  held-*) if [ -f "$f.cancelled" ]; then echo cancelled; else echo queued; fi ;;
  *) [ -f "$f.log" ] || exit 1
     if [ -f "$f.exit" ]; then [ "$(cat "$f.exit")" = 0 ] && echo succeeded || echo failed; else echo running; fi ;;
esac
`)
	cancelCmd := writeScript(t, `touch "`+jobs+`/$1.cancelled"`)
	argv := func(a ...string) string { b, _ := json.Marshal(a); return string(b) }
	tokens := t.TempDir()
	const admin = "console-admin-token"
	require.NoError(t, os.WriteFile(filepath.Join(tokens, "admin"), []byte(admin), 0o600))
	n := serve(t, db, dir, "--admin-token", "file:"+filepath.Join(tokens, "admin"), "--job-submitter", "command",
		"--submit-command", argv(submitCmd, "{{job_id}}", "{{fence}}", "{{table_identifier}}"),
		"--status-command", argv(statusCmd, "{{external_id}}"), "--cancel-command", argv(cancelCmd, "{{external_id}}"))
	base := n.httpAddr(t)
	st := ledger(t, db)
	small, part := registered(t, st, "tms.small_files"), registered(t, st, "tms.partitioned")
	lastJob := func(tbl store.Table, done func(store.Job) bool) store.Job {
		var j store.Job
		testkit.Eventually(t, 2*time.Minute, "a job of "+tbl.Name, func() bool {
			js, err := st.ListJobs(t.Context(), tbl.ID, 10)
			require.NoError(t, err)
			if len(js) == 0 || !done(js[0]) {
				return false
			}
			j = js[0]
			return true
		})
		return j
	}
	compacted := lastJob(small, func(j store.Job) bool { return !j.InFlight() })
	require.Equal(t, store.StatusSucceeded, compacted.Status, compacted.Error)
	held := lastJob(part, func(j store.Job) bool { return j.JobID != "" })
	require.True(t, held.InFlight())
	samples, err := st.ListSnapshotMetrics(t.Context(), small.ID)
	require.NoError(t, err)
	require.NotEmpty(t, samples)

	shots, err := filepath.Abs(filepath.Join("..", "..", "tmp", "artifacts", "console"))
	require.NoError(t, err)
	b := browsertest.Start(t, shots)

	b.Open(base + "/ui")
	require.True(t, strings.HasSuffix(b.URL(), "/ui/login"), "no session: the login form (%s)", b.URL())
	b.Screenshot("login")
	b.Find(`input[name="token"]`).Type(admin)
	b.Find(`form[action="/ui/login"] button`).Click()
	testkit.Eventually(t, 30*time.Second, "the tables page after logging in", func() bool { return strings.HasSuffix(b.URL(), "/ui") })
	body := b.Find("body").Text()
	require.Contains(t, body, "local.tms.small_files")
	require.Contains(t, body, "local.tms.partitioned")
	b.Screenshot("tables")

	b.Open(base + "/ui/tables/local.tms.small_files")
	require.Len(t, b.FindAll("circle.sample"), len(samples), "one point per metrics row in the ledger")
	b.Screenshot("table")

	b.Open(fmt.Sprintf("%s/ui/jobs/%d", base, compacted.ID))
	require.Contains(t, b.Find("body").Text(), "succeeded")
	require.Empty(t, b.FindAll(`form[action$="/cancel"]`), "a finished job has no cancel button")
	b.Screenshot("job")

	b.Open(fmt.Sprintf("%s/ui/jobs/%d", base, held.ID))
	b.Screenshot("queued-job")
	b.Find(`form[action$="/cancel"] button`).Click()
	b.Screenshot("cancelled")
	testkit.Eventually(t, time.Minute, "the queued job's row to be closed", func() bool {
		j, err := st.GetJob(t.Context(), held.ID)
		require.NoError(t, err)
		held = j
		return !j.InFlight()
	})
	require.Equal(t, store.StatusCancelled, held.Status, held.Error)
	_, err = os.Stat(filepath.Join(jobs, held.JobID+".cancelled"))
	require.NoError(t, err, "the cancel reached the platform")

	b.Open(base + "/ui/jobs")
	require.Contains(t, b.Find("table.recent").Text(), "cancelled")
	b.Screenshot("jobs")
	// The page shows the watchdog's state at the moment it is drawn: a
	// heartbeat that is slow on a loaded machine shows as failing until
	// the next one lands, so the page is read again until it says healthy.
	testkit.Eventually(t, 30*time.Second, "the queue page to show serve's own watchdog healthy", func() bool {
		b.Open(base + "/ui/queue")
		nodes := b.Find("table.nodes").Text()
		return strings.Contains(nodes, "healthy (this node)") && !strings.Contains(nodes, "unhealthy")
	})
	require.Contains(t, b.Find("body").Text(), "policy-expand")
	b.Screenshot("queue")
	// Both tables' last jobs finished inside the policy's one-hour
	// cooldown: the plan says each waits, and why.
	b.Open(base + "/ui/plan")
	require.Len(t, b.FindAll("td.verdict-wait"), 2, b.Find("body").Text())
	require.Contains(t, b.Find("table.plan").Text(), "cooldown until")
	b.Screenshot("plan")
	n.stop(t)
	t.Logf("screenshots in %s", shots)
}
