package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/migrations"
	"github.com/tms-dev/tms/store/testdb"
)

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		var engineErr error
		b := setup(t, backend, func(c *httpapi.Config) {
			c.Ready = func(context.Context) error { return engineErr }
		})
		code, body := b.do(http.MethodGet, "/healthz", "", "")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "ok\n", body)
		code, body = b.do(http.MethodGet, "/readyz", "", "")
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"status":"ready"}`, body)

		engineErr = errors.New("coordinator watchdog: node heartbeat not written in time")
		code, body = b.do(http.MethodGet, "/readyz", "", "")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.JSONEq(t, `{"status":"unavailable","reason":"engine: coordinator watchdog: node heartbeat not written in time"}`, body)

		engineErr = nil
		require.NoError(t, b.st.Close())
		code, body = b.do(http.MethodGet, "/readyz", "", "")
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Contains(t, body, `"reason":"database: store: read schema version`)
		code, _ = b.do(http.MethodGet, "/healthz", "", "")
		require.Equal(t, http.StatusOK, code, "liveness does not depend on the database")
	})
}

func TestReadinessNeedsCurrentSchema(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", nil)
	testdb.MarkFutureVersion(t, b.url, migrations.Latest()+1)
	code, body := b.do(http.MethodGet, "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "database schema is ahead")
}

func TestResourcesAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", nil)
	for _, tc := range []struct {
		method, path, token string
		code                int
		want                string
	}{
		{http.MethodGet, "/v1/policies", readToken, 200, "resource GET /v1/policies"},
		{http.MethodGet, "/v1/tables/cat.db.orders", adminToken, 200, "resource GET /v1/tables/cat.db.orders"},
		{http.MethodHead, "/v1/jobs", readToken, 200, ""},
		{http.MethodPost, "/v1/policies", adminToken, 200, "resource POST /v1/policies"},
		{http.MethodDelete, "/v1/policies/p", adminToken, 200, "resource DELETE /v1/policies/p"},
		{http.MethodPost, "/v1/policies", readToken, 403, "the read-only token cannot POST"},
		{http.MethodGet, "/v1/jobs", "", 401, "missing bearer token"},
		{http.MethodGet, "/v1/jobs", commitToken, 401, "invalid bearer token"},
		{http.MethodPost, "/v1/jobs/1/cancel", commitToken, 401, "invalid bearer token"},
	} {
		code, body := b.do(tc.method, tc.path, tc.token, "")
		require.Equal(t, tc.code, code, "%s %s: %s", tc.method, tc.path, body)
		require.Contains(t, body, tc.want, "%s %s", tc.method, tc.path)
	}

	// Without a read-only token, reads need the admin token.
	b = setup(t, "sqlite", func(c *httpapi.Config) { c.ReadToken = "" })
	code, _ := b.do(http.MethodGet, "/v1/policies", readToken, "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = b.do(http.MethodGet, "/v1/policies", adminToken, "")
	require.Equal(t, http.StatusOK, code)
}

func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	b := setup(t, "sqlite", func(c *httpapi.Config) {
		c.ShutdownTimeout = 5 * time.Second
		c.Resources = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			close(entered)
			<-release
			_, _ = io.WriteString(w, "finished")
		})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.srv.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()

	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	type answer struct {
		body string
		err  error
	}
	slow := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/jobs", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			slow <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		slow <- answer{string(body), err}
	}()
	<-entered
	cancel()
	// The listener closes at once; the request in progress still finishes.
	testkit.Eventually(t, 5*time.Second, "the listener to close", func() bool {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-served:
		t.Fatalf("Serve returned before the request in progress finished: %v", err)
	default:
	}
	close(release)
	a := <-slow
	require.NoError(t, a.err)
	require.Equal(t, "finished", a.body)
	require.NoError(t, <-served)
	http.DefaultClient.CloseIdleConnections()
}

func TestListenAndServeReportsABusyAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	b := setup(t, "sqlite", func(c *httpapi.Config) { c.Listen = ln.Addr().String() })
	err = b.srv.ListenAndServe(t.Context())
	require.ErrorContains(t, err, "httpapi: listen on "+ln.Addr().String())
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := httpapi.New(httpapi.Config{})
	require.ErrorContains(t, err, "a store is required")
	b := setup(t, "sqlite", nil)
	_, err = httpapi.New(httpapi.Config{Store: b.st, ShutdownTimeout: -1, Log: zaptest.NewLogger(t)})
	require.ErrorContains(t, err, "must not be negative")
}

// TestUnknownRoutesAnswerJSON: a path with no route is a JSON 404, and a
// route asked with the wrong method a JSON 405 with its Allow header, as
// docs/http-api.md documents every error.
func TestUnknownRoutesAnswerJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", nil)
	srv := httptest.NewServer(b.srv.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		method, path string
		code         int
		want, allow  string
	}{
		{http.MethodGet, "/nope", 404, "no route for GET /nope", ""},
		{http.MethodGet, "/v2/policies", 404, "no route for GET /v2/policies", ""},
		{http.MethodGet, "/v1/commit-events", 405, "method GET is not allowed on /v1/commit-events (allowed: POST)", "POST"},
		{http.MethodDelete, "/metrics", 405, "method DELETE is not allowed on /metrics", "GET, HEAD"},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var doc map[string]string
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s %s", tc.method, tc.path)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
		resp.Body.Close()
		require.Equal(t, tc.code, resp.StatusCode, "%s %s", tc.method, tc.path)
		require.Contains(t, doc["error"], tc.want)
		require.Equal(t, tc.allow, resp.Header.Get("Allow"))
	}
}
