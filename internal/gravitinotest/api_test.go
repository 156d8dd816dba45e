package gravitinotest_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/gravitinotest"
)

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
