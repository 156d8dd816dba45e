package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store/testdb"
	"github.com/tms-dev/tms/testdata"
)

// httpAddr waits for the node's HTTP address in its log.
func (n *node) httpAddr(t *testing.T) string {
	t.Helper()
	re := regexp.MustCompile(`HTTP on (127\.0\.0\.1:\d+)`)
	var addr string
	testkit.Eventually(t, time.Minute, "the HTTP address in the serve log", func() bool {
		m := re.FindStringSubmatch(n.logText(t))
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	return "http://" + addr
}

// call sends a JSON request with a bearer token and decodes the answer
// into out (if not nil); it returns the status code.
func call(t *testing.T, method, url, token string, body any, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, r)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && len(b) > 0 {
		require.NoError(t, json.Unmarshal(b, out), "%s %s: %s", method, url, b)
	}
	return resp.StatusCode
}

// TestServeHTTPAPI drives a running coordinator only through its HTTP API:
// create an onCommit compaction policy, attach it to a table, post a commit
// event (and its repeat), and read the job and its before/after metrics
// back; /readyz, /metrics and the token checks answer as documented.
func TestServeHTTPAPI(t *testing.T) {
	t.Parallel()
	const name = "tms.small_files"
	dir := testdata.BuildAdjustedT(t, func(r *testdata.Recipe) { r.Appends = min(r.Appends, 8) }, name)
	db := testdb.PostgresURL(t)
	before := tableChecksums(t, dir, name)
	code, _, stderr := run(t, "migrate", "--db", db)
	require.Equal(t, cli.ExitOK, code, stderr)

	admin, commit := "admin-"+fmt.Sprint(time.Now().UnixNano()), "commit-token-e2e"
	tokens := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tokens, "admin"), []byte(admin+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(tokens, "commit"), []byte(commit), 0o600))
	n := serve(t, db, dir, "--admin-token", "file:"+filepath.Join(tokens, "admin"),
		"--commit-token", "file:"+filepath.Join(tokens, "commit"), "--commit-delay", "100ms")
	base := n.httpAddr(t)

	testkit.Eventually(t, time.Minute, "/readyz ready", func() bool { return call(t, "GET", base+"/readyz", "", nil, nil) == http.StatusOK })
	require.Equal(t, http.StatusUnauthorized, call(t, "GET", base+"/v1/policies", "wrong", nil, nil))

	policy := map[string]any{"name": "compact-on-commit", "policyType": "system_iceberg_compaction", "enabled": true,
		"content": map[string]any{"schedule": map[string]any{"onCommit": true}, "minIntervalMs": 0}}
	require.Equal(t, http.StatusUnauthorized, call(t, "POST", base+"/v1/policies", "", policy, nil), "no token, no policy")
	var errBody struct{ Error string }
	bad := map[string]any{"name": "bad", "policyType": "system_iceberg_orphan_file_removal", "enabled": true,
		"content": map[string]any{"schedule": map[string]any{"onCommit": true}}}
	require.Equal(t, http.StatusBadRequest, call(t, "POST", base+"/v1/policies", admin, bad, &errBody))
	require.Contains(t, errBody.Error, "schedule.onCommit")
	require.Equal(t, http.StatusCreated, call(t, "POST", base+"/v1/policies", admin, policy, nil))
	code = call(t, "POST", base+"/v1/policies/compact-on-commit/attachments", admin, map[string]any{"object": "local." + name}, nil)
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, code)

	// The attachment wakes serve's sync, which registers the table.
	testkit.Eventually(t, time.Minute, "the table registered", func() bool {
		return call(t, "GET", base+"/v1/tables/local."+name, admin, nil, nil) == http.StatusOK
	})
	event := map[string]any{"catalog": "local", "namespace": "tms", "table": "small_files", "eventId": "e2e-1"}
	var results struct {
		Results []struct{ EventID, Status string }
	}
	require.Equal(t, http.StatusUnauthorized, call(t, "POST", base+"/v1/commit-events", "nope", event, nil))
	require.Equal(t, http.StatusAccepted, call(t, "POST", base+"/v1/commit-events", commit, event, &results))
	require.Equal(t, "enqueued", results.Results[0].Status)
	require.Equal(t, http.StatusAccepted, call(t, "POST", base+"/v1/commit-events", commit, event, &results))
	require.Equal(t, "duplicate", results.Results[0].Status)

	type job struct {
		ID               int64
		Trigger, Status  string
		InFlight         bool
		BeforeSnapshotID *int64
		AfterSnapshotID  *int64
		MetricsBefore    map[string]any
		MetricsAfter     map[string]any
	}
	var jobs struct{ Jobs []job }
	testkit.Eventually(t, 3*time.Minute, "the commit job finished", func() bool {
		require.Equal(t, http.StatusOK, call(t, "GET", base+"/v1/jobs?table=local."+name, admin, nil, &jobs))
		return len(jobs.Jobs) == 1 && !jobs.Jobs[0].InFlight
	})
	var j job
	require.Equal(t, http.StatusOK, call(t, "GET", fmt.Sprintf("%s/v1/jobs/%d", base, jobs.Jobs[0].ID), admin, nil, &j))
	require.Equal(t, "commit", j.Trigger)
	require.Equal(t, "succeeded", j.Status)
	require.NotNil(t, j.BeforeSnapshotID)
	require.NotNil(t, j.AfterSnapshotID)
	require.NotEqual(t, *j.BeforeSnapshotID, *j.AfterSnapshotID, "the table was compacted")
	require.NotEmpty(t, j.MetricsBefore)
	require.NotEmpty(t, j.MetricsAfter)

	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, family := range []string{"tms_commit_events_total", "tms_task_claims_total", "tms_task_executions_total", "tms_queue_tasks", "tms_job_outcomes", "tms_watchdog_healthy 1"} {
		require.True(t, strings.Contains(string(metrics), family), "/metrics has %s", family)
	}

	// The console is served: without a token it redirects to its login
	// form; with the admin token the tables page lists the table, and the
	// table's page plots one sample per metrics row.
	page := func(path, tok string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
		require.NoError(t, err)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := page("/ui", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `name="token"`, "the login form")
	code, body = page("/ui", admin)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "local."+name)
	code, body = page("/ui/tables/local."+name, admin)
	require.Equal(t, http.StatusOK, code)
	require.NotZero(t, strings.Count(body, `<circle class="sample"`))
	n.stop(t)
	require.Equal(t, before, tableChecksums(t, dir, name), "no row lost or duplicated")
}
