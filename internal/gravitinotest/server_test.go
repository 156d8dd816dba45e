package gravitinotest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/gravitinotest"
)

// script ignores SIGTERM if $TRAP is 1, writes its arguments and some
// environment to $OUT, prints to stdout and stderr, sleeps $SLEEP seconds
// and exits with $CODE.
const script = `#!/bin/sh
if [ "$TRAP" = 1 ]; then trap '' TERM; fi
{
  echo "argc=$#"
  for a in "$@"; do echo "arg=$a"; done
  echo "greeting=$GREETING"
  echo "pwd=$(pwd)"
  echo "base=$GRAVITINOTEST_BASE"
  echo "helper=$(cat ./helper.sh 2>/dev/null | head -n 1)"
} > "$OUT"
echo "to stdout"
echo "to stderr" >&2
if [ "$SLEEP" != 0 ]; then sleep "$SLEEP"; fi
exit "$CODE"
`

var (
	jobIDPattern = regexp.MustCompile(`^job-[0-9]+$`)
	timePattern  = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
)

// fixture is a started server with the "echo" shell template registered.
type fixture struct {
	t   *testing.T
	s   *gravitinotest.Server
	dir string
	// auth is the Authorization header of API calls, if any.
	auth string
}

func newFixture(t *testing.T, cfg gravitinotest.Config) *fixture {
	t.Helper()
	dir := t.TempDir()
	exe := filepath.Join(dir, "job.sh")
	require.NoError(t, os.WriteFile(exe, []byte(script), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "helper.sh"), []byte("# helper script\n"), 0o644))
	if cfg.BaseEnv == nil {
		cfg.BaseEnv = append(os.Environ(), "GRAVITINOTEST_BASE=from-base")
	}
	return &fixture{t: t, s: gravitinotest.Start(t, cfg), dir: dir}
}

// template is the registration body of the echo template.
func (f *fixture) template(name string) map[string]any {
	return map[string]any{"jobTemplate": map[string]any{
		"name":       name,
		"jobType":    "shell",
		"comment":    "writes its arguments",
		"executable": filepath.Join(f.dir, "job.sh"),
		"arguments":  []string{"--name={{name}}", "{{phrase}}", "plain"},
		"environments": map[string]string{
			"OUT": "{{out}}", "GREETING": "hello {{name}}", "SLEEP": "{{sleep}}", "CODE": "{{code}}", "TRAP": "{{trap}}",
		},
		"customFields": map[string]string{"owner": "{{name}}"},
		"scripts":      []string{filepath.Join(f.dir, "helper.sh")},
	}}
}

func (f *fixture) register(name string) {
	f.t.Helper()
	code, body := f.call(http.MethodPost, "/jobs/templates", f.template(name))
	require.Equal(f.t, http.StatusOK, code, "%s", body)
	require.JSONEq(f.t, `{"code":0}`, string(body))
}

// conf is a jobConf for the echo template.
func (f *fixture) conf(out string, sleep, code string, extra ...string) map[string]string {
	c := map[string]string{
		"name": "ann", "phrase": "two words", "out": filepath.Join(f.dir, out), "sleep": sleep, "code": code, "trap": "0",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i]] = extra[i+1]
	}
	return c
}

// call sends a request to /api/metalakes/test<path> with the Gravitino
// headers.
func (f *fixture) call(method, path string, body any) (int, []byte) {
	f.t.Helper()
	code, _, b := f.raw(method, "/api/metalakes/test"+path, body, nil)
	return code, b
}

func (f *fixture) raw(method, path string, body any, hdr map[string]string) (int, http.Header, []byte) {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(f.t, err)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, f.s.URL()+path, rd)
	require.NoError(f.t, err)
	req.Header.Set("Accept", gravitinotest.MediaType)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if f.auth != "" {
		req.Header.Set("Authorization", f.auth)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := f.s.Client().Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	return resp.StatusCode, resp.Header, out
}

// run starts a job and returns it as answered.
func (f *fixture) run(tpl string, conf map[string]string) gravitinotest.Job {
	f.t.Helper()
	code, body := f.call(http.MethodPost, "/jobs/runs", map[string]any{"jobTemplateName": tpl, "jobConf": conf})
	require.Equal(f.t, http.StatusOK, code, "%s", body)
	return decodeJob(f.t, body)
}

func decodeJob(t *testing.T, body []byte) gravitinotest.Job {
	t.Helper()
	var resp struct {
		Code int             `json:"code"`
		Job  json.RawMessage `json:"job"`
	}
	require.NoError(t, json.Unmarshal(body, &resp), "%s", body)
	require.Zero(t, resp.Code)
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(resp.Job, &keys))
	assert.ElementsMatch(t, []string{"jobId", "jobTemplateName", "status", "audit"}, slices.Collect(maps.Keys(keys)),
		"a JobDTO has exactly these fields")
	var j gravitinotest.Job
	require.NoError(t, json.Unmarshal(resp.Job, &j))
	assert.Regexp(t, jobIDPattern, j.JobID)
	assert.Regexp(t, timePattern, j.Audit.CreateTime)
	return j
}

// get reads a job through the API.
func (f *fixture) get(id string) gravitinotest.Job {
	f.t.Helper()
	code, body := f.call(http.MethodGet, "/jobs/runs/"+id, nil)
	require.Equal(f.t, http.StatusOK, code, "%s", body)
	return decodeJob(f.t, body)
}

// poll reads the job through the API until its status is want.
func (f *fixture) poll(id string, want gravitinotest.Status) gravitinotest.Job {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j := f.get(id)
		if j.Status == want {
			return j
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("job %s is %s after 10s, want %s", id, j.Status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) cancel(id string) gravitinotest.Job {
	f.t.Helper()
	code, body := f.call(http.MethodPost, "/jobs/runs/"+id, nil)
	require.Equal(f.t, http.StatusOK, code, "%s", body)
	return decodeJob(f.t, body)
}

// waitFile waits until path exists (the job's script has written it).
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written after 10s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func decodeError(t *testing.T, body []byte) gravitinotest.ErrorResponse {
	t.Helper()
	var e gravitinotest.ErrorResponse
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	assert.NotNil(t, e.Stack, "stack is [] in %s", body)
	return e
}

func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

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
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, gravitinotest.StatusCancelling, f.get(job.JobID).Status, "SIGTERM is ignored")
	f.poll(job.JobID, gravitinotest.StatusCancelled)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	run, _ := f.s.Run(job.JobID)
	assert.Equal(t, "killed", run.Signal)
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
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, gravitinotest.StatusQueued, f.get(second.JobID).Status)

	assert.Equal(t, gravitinotest.StatusCancelling, f.cancel(second.JobID).Status)
	assert.Equal(t, gravitinotest.StatusCancelled, f.get(second.JobID).Status)
	f.cancel(first.JobID)
	f.poll(third.JobID, gravitinotest.StatusSucceeded)
	run, _ := f.s.Run(second.JobID)
	assert.Zero(t, run.PID, "the cancelled queued job never started")
	assert.NoFileExists(t, filepath.Join(f.dir, "second.txt"))
}

// Unknown jobs, templates and metalakes are 404s, a duplicate template a
// 409, with Gravitino's error codes, types and messages.
func TestNotFoundAndConflict(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	f.register("echo")
	cases := []struct {
		method, path string
		body         any
		status, code int
		typ, message string
	}{
		{http.MethodGet, "/api/metalakes/test/jobs/runs/job-1", nil, 404, 1003, "NoSuchJobException",
			"Failed to operate job(s) [job-1] operation [GET] under object [test], reason [Job with ID job-1 under metalake test does not exist]"},
		{http.MethodPost, "/api/metalakes/test/jobs/runs/job-1", nil, 404, 1003, "NoSuchJobException", "Job with ID job-1 under metalake test does not exist"},
		{http.MethodGet, "/api/metalakes/test/jobs/templates/nope", nil, 404, 1003, "NoSuchJobTemplateException",
			"Job template with name nope under metalake test does not exist"},
		{http.MethodPost, "/api/metalakes/test/jobs/runs", map[string]any{"jobTemplateName": "nope"}, 404, 1003,
			"NoSuchJobTemplateException", "Job template with name nope under metalake test does not exist"},
		{http.MethodGet, "/api/metalakes/test/jobs/runs?jobTemplateName=nope", nil, 404, 1003, "NoSuchJobTemplateException", "nope"},
		{http.MethodGet, "/api/metalakes/other/jobs/runs", nil, 404, 1003, "NoSuchMetalakeException", "Metalake other does not exist"},
		{http.MethodPost, "/api/metalakes/other/jobs/runs", map[string]any{"jobTemplateName": "echo"}, 404, 1003,
			"NoSuchMetalakeException", "Metalake other does not exist"},
		{http.MethodPost, "/api/metalakes/test/jobs/templates", f.template("echo"), 409, 1004, "JobTemplateAlreadyExistsException",
			"Job template with name echo under metalake test already exists"},
	}
	for _, c := range cases {
		status, _, body := f.raw(c.method, c.path, c.body, nil)
		assert.Equal(t, c.status, status, "%s %s: %s", c.method, c.path, body)
		e := decodeError(t, body)
		assert.Equal(t, c.code, e.Code, "%s %s", c.method, c.path)
		assert.Equal(t, c.typ, e.Type, "%s %s", c.method, c.path)
		assert.Contains(t, e.Message, c.message, "%s %s", c.method, c.path)
	}
	status, _, _ := f.raw(http.MethodGet, "/api/metalakes/test/jobs/other", nil, nil)
	assert.Equal(t, http.StatusNotFound, status)
	status, _, _ = f.raw(http.MethodDelete, "/api/metalakes/test/jobs/runs", nil, nil)
	assert.Equal(t, http.StatusMethodNotAllowed, status)
}

// Malformed bodies are 400 IllegalArgumentException, as Gravitino's JSON
// mappers and request validation answer them; JSON numbers are accepted as
// strings.
func TestBadRequests(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	f.register("echo")
	cases := []struct {
		path    string
		body    any
		message string
	}{
		{"/jobs/runs", "not json", "Malformed json request"},
		{"/jobs/runs", "", "Malformed json request"},
		{"/jobs/runs", map[string]any{"jobTemplateName": "echo", "extra": 1}, "Malformed json request"},
		{"/jobs/runs", map[string]any{"jobTemplateName": "echo", "jobConf": map[string]any{"a": []int{1}}}, "Malformed json request"},
		{"/jobs/runs", map[string]any{"jobConf": map[string]string{}},
			`Failed to operate job(s) operation [RUN] under object [test], reason ["jobTemplateName" is required and cannot be empty]`},
		{"/jobs/templates", map[string]any{"jobTemplate": map[string]any{"name": "x", "jobType": "shell"}},
			`Failed to operate job template(s) [x] operation [REGISTER] under object [test], reason ["executable" is required and cannot be empty]`},
		{"/jobs/templates", map[string]any{"jobTemplate": map[string]any{"name": "x", "jobType": "python", "executable": "/bin/true"}},
			"Malformed json request"},
		{"/jobs/templates", map[string]any{"jobTemplate": map[string]any{"name": "x", "jobType": "shell", "executable": "/bin/true", "className": "C"}},
			"Malformed json request"},
		{"/jobs/templates", map[string]any{}, `"jobTemplate" must not be null`},
	}
	for _, c := range cases {
		status, body := f.call(http.MethodPost, c.path, c.body)
		assert.Equal(t, http.StatusBadRequest, status, "%v: %s", c.body, body)
		e := decodeError(t, body)
		assert.Equal(t, 1001, e.Code)
		assert.Equal(t, "IllegalArgumentException", e.Type)
		assert.Contains(t, e.Message, c.message)
	}

	conf := f.conf("out.txt", "0", "0")
	body := `{"jobTemplateName":"echo","jobConf":{"name":5,"phrase":"p","out":` + strings.TrimSuffix(mustJSON(t, conf["out"]), "\n") +
		`,"sleep":0,"code":"0"}} trailing data is ignored`
	status, resp := f.call(http.MethodPost, "/jobs/runs", body)
	require.Equal(t, http.StatusOK, status, "%s", resp)
	job := decodeJob(t, resp)
	f.poll(job.JobID, gravitinotest.StatusSucceeded)
	run, _ := f.s.Run(job.JobID)
	assert.Equal(t, "--name=5", run.Argv[1])
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// A placeholder without a value stays as it is (Gravitino's behaviour), or
// is a 400 naming it with StrictPlaceholders; values are inserted with
// Java's appendReplacement rules.
func TestPlaceholders(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	f.register("echo")
	conf := f.conf("out.txt", "0", "0")
	delete(conf, "phrase")
	job := f.run("echo", conf)
	f.poll(job.JobID, gravitinotest.StatusSucceeded)
	run, _ := f.s.Run(job.JobID)
	assert.Equal(t, "{{phrase}}", run.Argv[2], "a missing placeholder is kept")

	for value, want := range map[string]string{`a\b`: "ab", `x$1y`: "xphrasey", `$0`: "{{phrase}}", `$10`: "phrase0"} {
		job := f.run("echo", f.conf("out.txt", "0", "0", "phrase", value))
		f.poll(job.JobID, gravitinotest.StatusSucceeded)
		run, _ := f.s.Run(job.JobID)
		assert.Equal(t, want, run.Argv[2], "value %q", value)
	}
	for value, want := range map[string]struct {
		status int
		reason string
	}{
		`a$b`: {400, "reason [Illegal group reference]"},
		`a\`:  {400, "reason [character to be escaped is missing]"},
		`$2`:  {500, "reason [No group 2]"},
	} {
		status, body := f.call(http.MethodPost, "/jobs/runs",
			map[string]any{"jobTemplateName": "echo", "jobConf": f.conf("out.txt", "0", "0", "phrase", value)})
		assert.Equal(t, want.status, status, "value %q: %s", value, body)
		assert.Contains(t, decodeError(t, body).Message, want.reason)
	}

	strict := newFixture(t, gravitinotest.Config{StrictPlaceholders: true})
	strict.register("echo")
	before := len(strict.s.Runs())
	status, body := strict.call(http.MethodPost, "/jobs/runs", map[string]any{"jobTemplateName": "echo", "jobConf": conf})
	assert.Equal(t, http.StatusBadRequest, status)
	e := decodeError(t, body)
	assert.Equal(t, "IllegalArgumentException", e.Type)
	assert.Contains(t, e.Message, "{{phrase}}")
	assert.Len(t, strict.s.Runs(), before)
}

// Templates list by name or in detail; deleting one with an active job is
// a 409 InUseException, and once its jobs are done deletes them too.
func TestTemplatesListAndDelete(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	f.register("echo")
	f.register("other")
	require.NoError(t, f.s.RegisterTemplate("test", gravitinotest.JobTemplate{
		JobType: "spark", Name: "spark", Executable: "/x.jar", ClassName: "com.example.Main",
	}))
	_, body := f.call(http.MethodGet, "/jobs/templates", nil)
	assert.JSONEq(t, `{"code":0,"names":["echo","other","spark"]}`, string(body))
	_, body = f.call(http.MethodGet, "/jobs/templates?details=true", nil)
	var details struct {
		JobTemplates []map[string]any `json:"jobTemplates"`
	}
	require.NoError(t, json.Unmarshal(body, &details))
	require.Len(t, details.JobTemplates, 3)
	assert.Contains(t, details.JobTemplates[0], "scripts")
	assert.NotContains(t, details.JobTemplates[0], "className")
	assert.Equal(t, "com.example.Main", details.JobTemplates[2]["className"])
	assert.Equal(t, []any{}, details.JobTemplates[2]["jars"])

	spark := f.run("spark", nil)
	f.poll(spark.JobID, gravitinotest.StatusFailed)

	job := f.run("echo", f.conf("out.txt", "30", "0"))
	f.poll(job.JobID, gravitinotest.StatusStarted)
	status, body := f.call(http.MethodDelete, "/jobs/templates/echo", nil)
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, "InUseException", decodeError(t, body).Type)
	f.cancel(job.JobID)
	f.poll(job.JobID, gravitinotest.StatusCancelled)
	_, body = f.call(http.MethodDelete, "/jobs/templates/echo", nil)
	assert.JSONEq(t, `{"code":0,"dropped":true}`, string(body))
	_, body = f.call(http.MethodDelete, "/jobs/templates/echo", nil)
	assert.JSONEq(t, `{"code":0,"dropped":false}`, string(body))
	status, _ = f.call(http.MethodGet, "/jobs/runs/"+job.JobID, nil)
	assert.Equal(t, http.StatusNotFound, status)
	run, _ := f.s.Run(job.JobID)
	assert.True(t, run.Deleted)
}

// With a status pull interval the API lags the executor until a pull, as
// in Gravitino.
func TestStatusPullInterval(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{StatusPullInterval: time.Hour})
	f.register("echo")
	job := f.run("echo", f.conf("out.txt", "0", "0"))
	deadline := time.Now().Add(10 * time.Second)
	for run, _ := f.s.Run(job.JobID); run.ExecutorStatus != gravitinotest.StatusSucceeded; run, _ = f.s.Run(job.JobID) {
		require.True(t, time.Now().Before(deadline), "the executor never finished the job")
		time.Sleep(10 * time.Millisecond)
	}
	assert.Equal(t, gravitinotest.StatusQueued, f.get(job.JobID).Status)
	f.s.PullStatuses()
	assert.Equal(t, gravitinotest.StatusSucceeded, f.get(job.JobID).Status)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := f.s.WaitForStatus(ctx, job.JobID, gravitinotest.StatusSucceeded)
	assert.NoError(t, err)
}

// Each fault kind does what it says, only for matching requests and only
// Count times.
func TestFaults(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	f.register("echo")
	runBody := map[string]any{"jobTemplateName": "echo", "jobConf": f.conf("out.txt", "0", "0")}
	runs := func() int { return len(f.s.Runs()) }

	t.Run("Status503", func(t *testing.T) {
		f.s.Inject(gravitinotest.Fault{Method: "POST", Path: "/jobs/runs", Kind: gravitinotest.Status503, Count: 2})
		f.s.Inject(gravitinotest.Fault{Method: "GET", Path: "/nothing", Kind: gravitinotest.Status503})
		before := runs()
		for range 2 {
			status, body := f.call(http.MethodPost, "/jobs/runs", runBody)
			assert.Equal(t, http.StatusServiceUnavailable, status)
			assert.Equal(t, 1002, decodeError(t, body).Code)
		}
		assert.Equal(t, before, runs(), "a 503 applies nothing")
		status, _ := f.call(http.MethodPost, "/jobs/runs", runBody)
		assert.Equal(t, http.StatusOK, status, "the fault is spent")
		assert.Equal(t, 1, f.s.PendingFaults(), "the GET fault is still pending")
		f.s.ClearFaults()
		assert.Zero(t, f.s.PendingFaults())
	})
	t.Run("ResetAfterApply", func(t *testing.T) {
		f.s.Inject(gravitinotest.Fault{Method: "POST", Path: "/jobs/runs", Kind: gravitinotest.ResetAfterApply})
		before := runs()
		req, err := http.NewRequest(http.MethodPost, f.s.URL()+"/api/metalakes/test/jobs/runs", strings.NewReader(mustJSON(t, runBody)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		require.Error(t, err, "the client sees the connection reset")
		assert.Equal(t, before+1, runs(), "the run was created")
		reqs := f.s.Requests()
		last := reqs[len(reqs)-1]
		assert.Equal(t, gravitinotest.ResetAfterApply, last.Fault)
		assert.Zero(t, last.Status)
	})
	t.Run("Slow", func(t *testing.T) {
		f.s.Inject(gravitinotest.Fault{Path: "/jobs/runs", Kind: gravitinotest.Slow, Delay: 2 * time.Second})
		before := runs()
		req, err := http.NewRequest(http.MethodPost, f.s.URL()+"/api/metalakes/test/jobs/runs", strings.NewReader(mustJSON(t, runBody)))
		require.NoError(t, err)
		client := &http.Client{Timeout: 200 * time.Millisecond}
		start := time.Now()
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		require.Error(t, err, "the client times out")
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.Equal(t, before+1, runs(), "the run was created")
	})
	t.Run("Status401", func(t *testing.T) {
		f.s.Inject(gravitinotest.Fault{Path: "/jobs/runs", Kind: gravitinotest.Status401})
		before := runs()
		status, body := f.call(http.MethodPost, "/jobs/runs", runBody)
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Equal(t, 1011, decodeError(t, body).Code)
		assert.Equal(t, before, runs())
	})
	t.Run("NotJSON", func(t *testing.T) {
		f.s.Inject(gravitinotest.Fault{Path: "/jobs/runs", Kind: gravitinotest.NotJSON})
		before := runs()
		status, body := f.call(http.MethodPost, "/jobs/runs", runBody)
		assert.Equal(t, http.StatusOK, status)
		assert.False(t, json.Valid(body), "%s", body)
		assert.Equal(t, before, runs())
	})
	t.Run("Latency", func(t *testing.T) {
		f.s.SetLatency(150 * time.Millisecond)
		defer f.s.SetLatency(0)
		start := time.Now()
		status, _ := f.call(http.MethodGet, "/jobs/runs", nil)
		assert.Equal(t, http.StatusOK, status)
		assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	})
}

// The request log holds every request with its headers and body, so a test
// can look for secrets in it.
func TestRequestLog(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{Auth: gravitinotest.AuthSimple})
	f.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte("carol:dummy"))
	f.register("echo")
	f.s.ClearRequests()
	job := f.run("echo", f.conf("out.txt", "0", "0", "token", "hunter2"))
	f.poll(job.JobID, gravitinotest.StatusSucceeded)
	_, _, _ = f.raw(http.MethodGet, "/api/metalakes/test/jobs/runs", nil, map[string]string{"Accept": "", "Authorization": ""})

	reqs := f.s.Requests()
	require.GreaterOrEqual(t, len(reqs), 3)
	first := reqs[0]
	assert.Equal(t, http.MethodPost, first.Method)
	assert.Equal(t, "/api/metalakes/test/jobs/runs", first.Path)
	assert.Equal(t, gravitinotest.MediaType, first.Accept)
	assert.Equal(t, "application/json", first.ContentType)
	assert.True(t, first.HasAuthorization)
	assert.Equal(t, "Basic", first.AuthScheme)
	assert.Equal(t, http.StatusOK, first.Status)
	assert.Contains(t, first.Text(), "hunter2")
	last := reqs[len(reqs)-1]
	assert.Empty(t, last.Accept, "a request without Accept is recorded and answered")
	assert.False(t, last.HasAuthorization)
	assert.Equal(t, http.StatusOK, last.Status)
	assert.Equal(t, "carol", job.Audit.Creator)
}

// Each authentication mode admits the right callers and answers 401
// otherwise.
func TestAuth(t *testing.T) {
	basicHeader := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	list := func(f *fixture, auth string) (int, http.Header, []byte) {
		return f.raw(http.MethodGet, "/api/metalakes/test/jobs/runs", nil, map[string]string{"Authorization": auth})
	}

	t.Run("simple", func(t *testing.T) {
		f := newFixture(t, gravitinotest.Config{Auth: gravitinotest.AuthSimple})
		f.auth = basicHeader("dave", "dummy")
		f.register("echo")
		assert.Equal(t, "dave", f.run("echo", f.conf("o.txt", "0", "0")).Audit.Creator)
		f.auth = ""
		assert.Equal(t, "anonymous", f.run("echo", f.conf("o.txt", "0", "0")).Audit.Creator)
		status, _, body := list(f, "Bearer x")
		assert.Equal(t, http.StatusUnauthorized, status)
		e := decodeError(t, body)
		assert.Equal(t, 1011, e.Code)
		assert.Equal(t, "UnauthorizedException", e.Type)
	})
	t.Run("basic", func(t *testing.T) {
		f := newFixture(t, gravitinotest.Config{Auth: gravitinotest.AuthBasic, Username: "erin", Password: "pw"})
		status, _, _ := list(f, basicHeader("erin", "pw"))
		assert.Equal(t, http.StatusOK, status)
		for _, auth := range []string{"", basicHeader("erin", "wrong"), "Bearer x"} {
			status, hdr, body := list(f, auth)
			assert.Equal(t, http.StatusUnauthorized, status, "%q", auth)
			assert.NotEmpty(t, hdr.Get("WWW-Authenticate"))
			assert.Equal(t, 1011, decodeError(t, body).Code)
		}
	})
	t.Run("oauth2", func(t *testing.T) {
		f := newFixture(t, gravitinotest.Config{
			Auth: gravitinotest.AuthOAuth2, OAuth2ClientID: "tms", OAuth2ClientSecret: "s3cret", OAuth2Scope: "gravitino",
		})
		token := func(form url.Values, basic string) (int, map[string]any) {
			hdr := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": basic}
			status, _, body := f.raw(http.MethodPost, "/oauth2/token", form.Encode(), hdr)
			var out map[string]any
			require.NoError(t, json.Unmarshal(body, &out), "%s", body)
			return status, out
		}
		status, tok := token(url.Values{"grant_type": {"client_credentials"}, "client_id": {"tms"},
			"client_secret": {"s3cret"}, "scope": {"gravitino"}}, "")
		require.Equal(t, http.StatusOK, status, "%v", tok)
		assert.Equal(t, "bearer", tok["token_type"])
		assert.InDelta(t, 3600, tok["expires_in"], 0)
		access := tok["access_token"].(string)

		status, viaBasic := token(url.Values{"grant_type": {"client_credentials"}, "scope": {"gravitino"}}, basicHeader("tms", "s3cret"))
		assert.Equal(t, http.StatusOK, status, "%v", viaBasic)

		status, out := token(url.Values{"grant_type": {"client_credentials"}, "client_id": {"tms"}, "client_secret": {"bad"}, "scope": {"gravitino"}}, "")
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Equal(t, "invalid_client", out["error"])
		status, out = token(url.Values{"grant_type": {"client_credentials"}, "client_id": {"tms"}, "client_secret": {"s3cret"}, "scope": {"other"}}, "")
		assert.Equal(t, http.StatusBadRequest, status)
		assert.Equal(t, "invalid_scope", out["error"])
		status, out = token(url.Values{"grant_type": {"password"}}, "")
		assert.Equal(t, http.StatusBadRequest, status)
		assert.Equal(t, "unsupported_grant_type", out["error"])

		f.auth = "Bearer " + access
		f.register("echo")
		assert.Equal(t, "tms", f.run("echo", f.conf("o.txt", "0", "0")).Audit.Creator)
		for auth, msg := range map[string]string{
			"":                       "The provided credentials did not support",
			basicHeader("tms", "x"):  "The provided credentials did not support",
			"Bearer not.a.jwt":       "JWT parse error",
			"Bearer " + access + "x": "JWT parse error",
		} {
			status, _, body := list(f, auth)
			assert.Equal(t, http.StatusUnauthorized, status, "%q", auth)
			assert.Equal(t, msg, decodeError(t, body).Message, "%q", auth)
		}
		f.s.ExpireTokens()
		status, _, _ = list(f, "Bearer "+access)
		assert.Equal(t, http.StatusUnauthorized, status, "an expired token is refused")
		reqs := f.s.Requests()
		for _, r := range reqs {
			if r.Path == "/oauth2/token" {
				assert.NotContains(t, r.Path+r.Query, "s3cret", "the secret travels in the body or header only")
			}
		}
	})
	t.Run("jetty style", func(t *testing.T) {
		f := newFixture(t, gravitinotest.Config{Auth: gravitinotest.AuthBasic, Username: "u", Password: "p",
			UnauthorizedStyle: gravitinotest.UnauthorizedJetty})
		status, _, body := list(f, "")
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Empty(t, body, "Jetty writes no body for Accept: %s", gravitinotest.MediaType)
		status, hdr, body := f.raw(http.MethodGet, "/api/metalakes/test/jobs/runs", nil, map[string]string{"Accept": ""})
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Contains(t, hdr.Get("Content-Type"), "text/html")
		assert.Contains(t, string(body), "HTTP ERROR 401")
	})
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

// New validates its configuration and names the field at fault.
func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []gravitinotest.Config{
		{Auth: "kerberos"},
		{Auth: gravitinotest.AuthBasic},
		{Auth: gravitinotest.AuthOAuth2, OAuth2ClientID: "x"},
		{MaxRunning: -1},
		{Metalakes: []string{"a/b"}},
	} {
		_, err := gravitinotest.New(cfg)
		assert.ErrorContains(t, err, "gravitinotest:", "%+v", cfg)
	}
	s, err := gravitinotest.New(gravitinotest.Config{})
	require.NoError(t, err)
	dir := s.StagingDir()
	assert.DirExists(t, dir)
	s.Close()
	assert.NoDirExists(t, dir, "Close removes the staging folder it made")
}

// With EnforceMediaTypes, an Accept without Gravitino's media type is a 406
// and a non-JSON body a 415, as Jersey answers; without it both are served.
func TestEnforceMediaTypes(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{EnforceMediaTypes: true})
	status, _, _ := f.raw(http.MethodGet, "/api/metalakes/test/jobs/runs", nil, map[string]string{"Accept": "application/json"})
	assert.Equal(t, http.StatusNotAcceptable, status)
	for _, accept := range []string{"", "*/*", "application/json, application/vnd.gravitino.v1+json"} {
		status, _, _ = f.raw(http.MethodGet, "/api/metalakes/test/jobs/runs", nil, map[string]string{"Accept": accept})
		assert.Equal(t, http.StatusOK, status, "Accept %q", accept)
	}
	status, _, _ = f.raw(http.MethodPost, "/api/metalakes/test/jobs/runs", `{"jobTemplateName":"x"}`, map[string]string{"Content-Type": "text/plain"})
	assert.Equal(t, http.StatusUnsupportedMediaType, status)

	lax := newFixture(t, gravitinotest.Config{})
	status, _, _ = lax.raw(http.MethodGet, "/api/metalakes/test/jobs/runs", nil, map[string]string{"Accept": "application/json"})
	assert.Equal(t, http.StatusOK, status)
}

// The executable may be a script without "#!" (run by /bin/sh, as Java's
// launcher does) or an http(s) URL (downloaded into the job folder); a path
// java.net.URI refuses is a 500.
func TestExecutableKinds(t *testing.T) {
	f := newFixture(t, gravitinotest.Config{})
	plain := filepath.Join(f.dir, "plain.sh")
	require.NoError(t, os.WriteFile(plain, []byte("echo \"$1\" > \"$OUT\"\n"), 0o755))
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
