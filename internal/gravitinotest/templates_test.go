package gravitinotest_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/gravitinotest"
)

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
