package submit_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
)

// TestLocalSubmitCancelRunning cancels a real runner in the middle of its
// job. While it runs, /proc shows the token and the ledger password only in
// its environment, never in its command line. Cancel returns once the
// process is gone; the submitter says cancelled and the runner closed its
// row cancelled on the way out.
func TestLocalSubmitCancelRunning(t *testing.T) {
	t.Parallel()
	l := coordtest.NewLocalLedger(t, store.BackendPostgres)
	uri, accepted := coordtest.HangingCatalog(t)
	j := coordtest.HangingJob(t, l, uri, 7)
	s := coordtest.NewLocal(t, submit.LocalConfig{KillGrace: 30 * time.Second})

	token, password := coordtest.SecretValue(), coordtest.SecretValue()
	u, err := url.Parse(l.URL)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), password)
	req := coordtest.Request(l, j)
	req.DBURL = u.String()
	req.CatalogProps = map[string]string{"token": token}
	id, err := s.Submit(t.Context(), req)
	require.NoError(t, err)
	coordtest.WaitRunnerInside(t, l, j.ID, accepted)

	st := coordtest.Status(t, s, id)
	require.Equal(t, submit.JobRunning, st.State)
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
	done := coordtest.Status(t, s, id)
	require.Equal(t, submit.JobCancelled, done.State)
	require.Equal(t, 1, done.ExitCode, "the runner exits 1 after closing its row cancelled")
	require.Contains(t, done.Message, "cancelled: the runner stopped on SIGTERM")
	require.ErrorIs(t, syscall.Kill(st.PID, 0), syscall.ESRCH, "the process is gone")
	require.ErrorIs(t, syscall.Kill(-st.PID, 0), syscall.ESRCH, "and so is its group")

	got := l.Get(t, j.ID)
	require.Equal(t, store.StatusCancelled, got.Status)
	require.Contains(t, got.Error, "interrupted")
	require.NoError(t, s.Cancel(t.Context(), id), "cancelling an ended job is a no-op")
	require.Equal(t, submit.JobCancelled, coordtest.Status(t, s, id).State)
}

// TestLocalSubmitCancelEscalates covers what the real runner never does:
// ignoring SIGTERM. A script that ignores it, with a child of its own, is
// killed with its whole process group after KillGrace. A job queued behind
// it is cancelled without ever starting, and submitting the same job and
// fence twice gives one id.
func TestLocalSubmitCancelEscalates(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	script := coordtest.WriteScript(t, fmt.Sprintf(`trap '' TERM
sleep 300 &
echo $! > %s
wait
`, pidFile))
	s := coordtest.NewLocal(t, submit.LocalConfig{RunnerPath: script, MaxRunning: 1, KillGrace: 200 * time.Millisecond})
	req := submit.JobRequest{JobID: 1, Fence: 1, DBURL: "sqlite:///unused.db"}
	first, err := s.Submit(t.Context(), req)
	require.NoError(t, err)
	again, err := s.Submit(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, first, again, "a repeated submit of a queued or running job is the same job")
	queued, err := s.Submit(t.Context(), submit.JobRequest{JobID: 2, Fence: 1, DBURL: "sqlite:///unused.db"})
	require.NoError(t, err)
	require.Equal(t, submit.JobQueued, coordtest.Status(t, s, queued).State)

	require.NoError(t, s.Cancel(t.Context(), queued))
	st := coordtest.Status(t, s, queued)
	require.Equal(t, submit.JobCancelled, st.State)
	require.Equal(t, "cancelled before it started", st.Message)
	require.True(t, st.StartedAt.IsZero(), "never started")
	_, err = os.Stat(s.LogPath(2))
	require.ErrorIs(t, err, os.ErrNotExist, "a job that never started has no log")

	var child int
	testkit.Eventually(t, 30*time.Second, "the script to start its child", func() bool {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			_, err = fmt.Sscan(string(b), &child)
		}
		return err == nil && child > 0
	})
	pid := coordtest.Status(t, s, first).PID
	require.NotZero(t, pid)
	require.NoError(t, s.Cancel(t.Context(), first))
	st = coordtest.Status(t, s, first)
	require.Equal(t, submit.JobCancelled, st.State)
	require.Equal(t, -1, st.ExitCode, "killed by a signal")
	require.Contains(t, st.Message, "did not stop within 200ms of SIGTERM and was killed")
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	testkit.Eventually(t, 10*time.Second, "the script's child to be killed with the group", func() bool {
		return coordtest.ProcessGone(child)
	})
}
