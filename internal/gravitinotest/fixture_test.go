package gravitinotest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
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
	"github.com/tms-dev/tms/internal/testkit"
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
	testkit.WriteExecutable(t, exe, []byte(script))
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
	var j gravitinotest.Job
	testkit.Eventually(f.t, 30*time.Second, fmt.Sprintf("job %s to be %s", id, want), func() bool {
		j = f.get(id)
		return j.Status == want
	})
	return j
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
	testkit.Eventually(t, 30*time.Second, path+" to be written", func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
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

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
