package gravitinotest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/gravitinotest"
	"github.com/tms-dev/tms/internal/testkit"
)

// A registered shell template runs for real: the placeholders of its
// arguments and environments are replaced (a value with spaces stays one
// argument), it starts in its staging folder next to its scripts, with the
// base environment, and exit 0 is succeeded.
func TestShellJobSucceeds(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	f.register("echo")

	code, body := f.call(http.MethodGet, "/jobs/templates/echo", nil)
	require.Equal(t, http.StatusOK, code)
	var got struct {
		Code        int                       `json:"code"`
		JobTemplate gravitinotest.JobTemplate `json:"jobTemplate"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	assert.Equal(t, "shell", got.JobTemplate.JobType)
	assert.Equal(t, []string{"--name={{name}}", "{{phrase}}", "plain"}, got.JobTemplate.Arguments)
	assert.Equal(t, "{{out}}", got.JobTemplate.Environments["OUT"])
	assert.Equal(t, []string{filepath.Join(f.dir, "helper.sh")}, got.JobTemplate.Scripts)
	require.NotNil(t, got.JobTemplate.Audit)
	assert.Equal(t, "anonymous", got.JobTemplate.Audit.Creator)

	job := f.run("echo", f.conf("out.txt", "0", "0"))
	assert.Equal(t, gravitinotest.StatusQueued, job.Status, "a run answers queued")
	assert.Equal(t, "echo", job.JobTemplateName)
	assert.Equal(t, "anonymous", job.Audit.Creator)
	done := f.poll(job.JobID, gravitinotest.StatusSucceeded)
	assert.Equal(t, "anonymous", done.Audit.LastModifier)
	assert.Regexp(t, timePattern, done.Audit.LastModifiedTime)

	run, ok := f.s.Run(job.JobID)
	require.True(t, ok)
	assert.Equal(t, []string{"--name=ann", "two words", "plain"}, run.Argv[1:])
	assert.Equal(t, filepath.Join(run.Dir, "job.sh"), run.Argv[0], "the executable is linked into the job folder")
	assert.Equal(t, filepath.Join(f.s.StagingDir(), "test", "echo", job.JobID), run.Dir)
	assert.Equal(t, "hello ann", run.EnvAdded["GREETING"])
	assert.Equal(t, map[string]string{"owner": "ann"}, run.CustomFields)
	assert.Equal(t, f.conf("out.txt", "0", "0"), run.JobConf)
	assert.True(t, run.Exited)
	assert.Zero(t, run.ExitCode)
	assert.Positive(t, run.PID)

	lines := readLines(t, filepath.Join(f.dir, "out.txt"))
	assert.Equal(t, []string{
		"argc=3", "arg=--name=ann", "arg=two words", "arg=plain", "greeting=hello ann",
		"pwd=" + run.Dir, "base=from-base", "helper=# helper script",
	}, lines)
	assert.Equal(t, []string{"to stdout"}, readLines(t, run.StdoutPath))
	assert.Equal(t, []string{"to stderr"}, readLines(t, run.StderrPath))

	code, body = f.call(http.MethodGet, "/jobs/runs?jobTemplateName=echo", nil)
	require.Equal(t, http.StatusOK, code)
	var list struct {
		Jobs []gravitinotest.Job `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Jobs, 1)
	assert.Equal(t, job.JobID, list.Jobs[0].JobID)
	assert.NotContains(t, string(body), "jobConf", "Gravitino never returns a job's jobConf")
}

// A nonzero exit is failed; cancelling a finished job changes nothing.
func TestShellJobFails(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	f.register("echo")
	job := f.run("echo", f.conf("out.txt", "0", "3"))
	f.poll(job.JobID, gravitinotest.StatusFailed)
	run, _ := f.s.Run(job.JobID)
	assert.Equal(t, 3, run.ExitCode)
	assert.Equal(t, gravitinotest.StatusFailed, f.cancel(job.JobID).Status, "a failed job ignores a cancel")
}

// Cancelling a started job answers cancelling, terminates its process group
// and ends cancelled; a second cancel is ignored.
func TestCancelRunningJob(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	f.register("echo")
	job := f.run("echo", f.conf("out.txt", "30", "0"))
	f.poll(job.JobID, gravitinotest.StatusStarted)
	waitFile(t, filepath.Join(f.dir, "out.txt"))

	c := f.cancel(job.JobID)
	assert.Equal(t, gravitinotest.StatusCancelling, c.Status)
	assert.Equal(t, "anonymous", c.Audit.LastModifier)
	f.poll(job.JobID, gravitinotest.StatusCancelled)
	run, _ := f.s.Run(job.JobID)
	assert.True(t, run.CancelRequested)
	assert.Equal(t, "terminated", run.Signal)
	assert.Equal(t, 128+15, run.ExitCode)
	assert.True(t, processGone(run.PID), "process %d is gone", run.PID)
	assert.Equal(t, gravitinotest.StatusCancelled, f.cancel(job.JobID).Status)
}

// A job that ignores SIGTERM is killed after the grace.
func TestCancelEscalatesToKill(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{CancelGrace: 300 * time.Millisecond})
	f.register("echo")
	job := f.run("echo", f.conf("out.txt", "30", "0", "trap", "1"))
	f.poll(job.JobID, gravitinotest.StatusStarted)
	waitFile(t, filepath.Join(f.dir, "out.txt")) // the trap is set

	start := time.Now()
	assert.Equal(t, gravitinotest.StatusCancelling, f.cancel(job.JobID).Status)
	f.poll(job.JobID, gravitinotest.StatusCancelled)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "cancelled no sooner than the grace")
	run, _ := f.s.Run(job.JobID)
	assert.Equal(t, "killed", run.Signal, "SIGTERM was ignored, so the job was killed")
	assert.True(t, processGone(run.PID))
}

// With MaxRunning 1 a second job stays queued; cancelling it answers
// cancelling, it is cancelled at once and never starts; the queue moves on
// when the first job ends.
func TestCancelQueuedJob(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{MaxRunning: 1})
	f.register("echo")
	first := f.run("echo", f.conf("first.txt", "30", "0"))
	f.poll(first.JobID, gravitinotest.StatusStarted)
	second := f.run("echo", f.conf("second.txt", "0", "0"))
	third := f.run("echo", f.conf("third.txt", "0", "0"))
	assert.Equal(t, gravitinotest.StatusQueued, f.get(second.JobID).Status)

	assert.Equal(t, gravitinotest.StatusCancelling, f.cancel(second.JobID).Status)
	assert.Equal(t, gravitinotest.StatusCancelled, f.get(second.JobID).Status)
	f.cancel(first.JobID)
	f.poll(third.JobID, gravitinotest.StatusSucceeded)
	run, _ := f.s.Run(second.JobID)
	assert.Zero(t, run.PID, "the cancelled queued job never started")
	assert.NoFileExists(t, filepath.Join(f.dir, "second.txt"))
}

// With a status pull interval the API lags the executor until a pull, as
// in Gravitino.
func TestStatusPullInterval(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{StatusPullInterval: time.Hour})
	f.register("echo")
	job := f.run("echo", f.conf("out.txt", "0", "0"))
	testkit.Eventually(t, 30*time.Second, "the executor to finish the job", func() bool {
		run, _ := f.s.Run(job.JobID)
		return run.ExecutorStatus == gravitinotest.StatusSucceeded
	})
	assert.Equal(t, gravitinotest.StatusQueued, f.get(job.JobID).Status)
	f.s.PullStatuses()
	assert.Equal(t, gravitinotest.StatusSucceeded, f.get(job.JobID).Status)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := f.s.WaitForStatus(ctx, job.JobID, gravitinotest.StatusSucceeded)
	assert.NoError(t, err)
}

// Close terminates running jobs and waits for their processes.
func TestCloseStopsJobs(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	f.register("echo")
	job := f.run("echo", f.conf("out.txt", "30", "0"))
	f.poll(job.JobID, gravitinotest.StatusStarted)
	waitFile(t, filepath.Join(f.dir, "out.txt"))
	start := time.Now()
	f.s.Close()
	assert.Less(t, time.Since(start), 4*time.Second)
	run, _ := f.s.Run(job.JobID)
	assert.True(t, run.Exited)
	assert.True(t, processGone(run.PID))
	assert.Equal(t, gravitinotest.StatusCancelled, run.Status)
}

// The executable may be a script without "#!" (run by /bin/sh, as Java's
// launcher does) or an http(s) URL (downloaded into the job folder); a path
// java.net.URI refuses is a 500.
func TestExecutableKinds(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	plain := filepath.Join(f.dir, "plain.sh")
	testkit.WriteExecutable(t, plain, []byte("echo \"$1\" > \"$OUT\"\n"))
	require.NoError(t, f.s.RegisterTemplate("test", gravitinotest.JobTemplate{
		Name: "plain", Executable: plain, Arguments: []string{"{{v}}"}, Environments: map[string]string{"OUT": "{{out}}"},
	}))
	job := f.run("plain", map[string]string{"v": "no shebang", "out": filepath.Join(f.dir, "plain.txt")})
	f.poll(job.JobID, gravitinotest.StatusSucceeded)
	run, _ := f.s.Run(job.JobID)
	assert.Equal(t, "/bin/sh", run.Argv[0])
	assert.Equal(t, []string{"no shebang"}, readLines(t, filepath.Join(f.dir, "plain.txt")))

	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, script)
	}))
	defer web.Close()
	tpl := f.template("web")
	tpl["jobTemplate"].(map[string]any)["executable"] = web.URL + "/dl/job.sh"
	tpl["jobTemplate"].(map[string]any)["scripts"] = nil
	status, body := f.call(http.MethodPost, "/jobs/templates", tpl)
	require.Equal(t, http.StatusOK, status, "%s", body)
	job = f.run("web", f.conf("web.txt", "0", "0"))
	f.poll(job.JobID, gravitinotest.StatusSucceeded)
	run, _ = f.s.Run(job.JobID)
	assert.Equal(t, filepath.Join(run.Dir, "job.sh"), run.Argv[0])
	assert.Contains(t, readLines(t, filepath.Join(f.dir, "web.txt")), "arg=two words")

	require.NoError(t, f.s.RegisterTemplate("test", gravitinotest.JobTemplate{Name: "spaced", Executable: "/tmp/a b/job.sh"}))
	status, body = f.call(http.MethodPost, "/jobs/runs", map[string]any{"jobTemplateName": "spaced"})
	assert.Equal(t, http.StatusInternalServerError, status)
	e := decodeError(t, body)
	assert.Equal(t, 1002, e.Code)
	assert.Contains(t, e.Message, "Failed to fetch file from URI /tmp/a b/job.sh")
}
