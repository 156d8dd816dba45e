package gravitinotest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/gravitinotest"
)

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
