package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// TestMain fails the package at once when PostgreSQL does not answer (these
// tests never skip) and checks for leaked goroutines.
func TestMain(m *testing.M) {
	if err := testdb.RequirePostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// The tokens setup configures.
const (
	adminToken  = "admin-secret"
	readToken   = "read-secret"
	commitToken = "commit-secret"
	commitDelay = 5 * time.Second
)

// now is the server's fixed clock in tests.
var now = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// bundle is one test's server over its own database.
type bundle struct {
	t      *testing.T
	url    string
	st     store.Store
	sch    store.Scheduler
	srv    *httpapi.Server
	http   *httptest.Server
	tables map[string]store.Table // by "namespace.name", in catalog "cat"
}

// onBackends runs fn once per backend, in parallel.
func onBackends(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			fn(t, backend)
		})
	}
}

// openBackend migrates a fresh database of backend and opens a store on it
// (closed when the test ends).
func openBackend(t *testing.T, backend string) (string, store.Store, *zap.Logger) {
	t.Helper()
	log := zaptest.NewLogger(t)
	dbURL, st := testdb.OpenMigrated(t, backend, log)
	return dbURL, st, log
}

// setup migrates a fresh database of backend, registers tables db.orders
// and db.sales.items in catalog "cat", and serves the API over httptest.
// mutate (may be nil) adjusts the config first.
func setup(t *testing.T, backend string, mutate func(*httpapi.Config)) *bundle {
	t.Helper()
	dbURL, st, log := openBackend(t, backend)
	b := &bundle{t: t, url: dbURL, st: st, sch: st, tables: map[string]store.Table{}}
	for _, ref := range []store.TableRef{
		{Catalog: "cat", Namespace: "db", Name: "orders", UUID: "u-orders"},
		{Catalog: "cat", Namespace: "db.sales", Name: "items", UUID: "u-items"},
	} {
		tbl, err := st.RegisterTable(context.Background(), ref)
		require.NoError(t, err)
		b.tables[ref.Namespace+"."+ref.Name] = tbl
	}
	cfg := httpapi.Config{
		Store: st, AdminToken: adminToken, ReadToken: readToken, CommitToken: commitToken,
		CommitJobs: flow.NewCommitJobs(commitDelay), Now: func() time.Time { return now }, Log: log,
		Resources: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = fmt.Fprintf(w, "resource %s %s", r.Method, r.URL.Path)
		}),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	var err error
	b.srv, err = httpapi.New(cfg)
	require.NoError(t, err)
	b.http = httptest.NewServer(b.srv.Handler())
	t.Cleanup(b.http.Close)
	return b
}

// do sends a request with token (empty: none) and returns the status and
// body.
func (b *bundle) do(method, path, token, body string) (int, string) {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.http.URL+path, strings.NewReader(body))
	require.NoError(b.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := b.http.Client().Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, string(out)
}

// post sends body to the webhook with token.
func (b *bundle) post(token, body string) (int, string) {
	b.t.Helper()
	return b.do(http.MethodPost, "/v1/commit-events", token, body)
}

// ingest posts body with the commit token, expects 202 and returns the
// results.
func (b *bundle) ingest(body string) []ingress.EventResult {
	b.t.Helper()
	code, out := b.post(commitToken, body)
	require.Equal(b.t, http.StatusAccepted, code, out)
	var resp struct{ Results []ingress.EventResult }
	require.NoError(b.t, json.Unmarshal([]byte(out), &resp))
	return resp.Results
}

// event is a one-event body for table db.orders.
func event(id string) string {
	return fmt.Sprintf(`{"catalog":"cat","namespace":"db","table":"orders","snapshotId":7,"eventId":%q}`, id)
}

// commitJobs returns the commit-job rows.
func (b *bundle) commitJobs() []store.Task {
	b.t.Helper()
	ts, err := b.sch.ListTasks(context.Background(), flow.KindCommitJob, 1000)
	require.NoError(b.t, err)
	return ts
}

// requireNothingRecorded checks that no commit-job exists and that the
// given event ids were not recorded: posting them now enqueues (a recorded
// id would answer duplicate).
func (b *bundle) requireNothingRecorded(ids ...string) {
	b.t.Helper()
	require.Empty(b.t, b.commitJobs(), "nothing may be enqueued")
	for _, id := range ids {
		res := b.ingest(event(id))
		require.NotEqual(b.t, ingress.StatusDuplicate, res[0].Status, "event %q must not have been recorded", id)
	}
}

// errorOf returns the message of an {"error": …} body.
func errorOf(t *testing.T, body string) string {
	t.Helper()
	var e struct{ Error string }
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.NotEmpty(t, e.Error, body)
	return e.Error
}
