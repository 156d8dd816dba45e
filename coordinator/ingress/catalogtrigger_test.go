package ingress_test

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver for iceberg-go's SQL catalog
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// pgCatalogName is the catalog_name the PostgreSQL-backed SQL catalog
// writes into iceberg_tables, and the name TMS knows it by.
const pgCatalogName = "prod"

// pgCatalogProps are the properties of an iceberg-go SQL catalog stored in
// the PostgreSQL database dbURL (its search_path schema), with its
// warehouse in dir.
func pgCatalogProps(dbURL, dir string) iceberg.Properties {
	return iceberg.Properties{
		"type": "sql", sqlcat.DriverKey: "pgx", sqlcat.DialectKey: string(sqlcat.Postgres),
		"uri": dbURL, "warehouse": "file://" + dir, "init_catalog_tables": "true",
	}
}

// pgCatalog opens the SQL catalog of pgCatalogProps, closed when t ends.
func pgCatalog(t testing.TB, dbURL, dir string) catalog.Catalog {
	t.Helper()
	cat, err := catalogs.Open(context.Background(), pgCatalogName, pgCatalogProps(dbURL, dir))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.(catalog.Closer).Close() })
	return cat
}

// recordingSubmitter accepts every job and remembers the requests: the
// test is about what reaches the submitter and when.
type recordingSubmitter struct {
	mu   sync.Mutex
	reqs []submit.JobRequest
}

func (s *recordingSubmitter) Submit(_ context.Context, req submit.JobRequest) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	return "ext-" + req.Table, nil
}

func (s *recordingSubmitter) Status(context.Context, string) (submit.JobStatus, error) {
	return submit.JobStatus{State: submit.JobRunning}, nil
}

func (s *recordingSubmitter) Cancel(context.Context, string) error { return nil }

func (s *recordingSubmitter) submitted() []submit.JobRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]submit.JobRequest(nil), s.reqs...)
}

// listen runs ListenCatalogCommits until the test ends; ready receives once
// per (re)connection.
func listen(t *testing.T, st store.Store, cfg ingress.CatalogNotifyConfig) (ready <-chan struct{}) {
	t.Helper()
	r := make(chan struct{}, 8)
	cfg.Ready = func() { r <- struct{}{} }
	if cfg.Log == nil {
		cfg.Log = zaptest.NewLogger(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ingress.ListenCatalogCommits(ctx, st, cfg) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case <-r:
	case err := <-done:
		t.Fatalf("catalog listener stopped before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("catalog listener not ready after 10s")
	}
	return r
}

// withAppName returns dbURL with application_name set, so the test can
// find its own listener's backend.
func withAppName(t *testing.T, dbURL, name string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestCatalogTriggerCommitIsClaimedWithoutPolling: an iceberg-go append
// through a SQL catalog in the coordinator's PostgreSQL fires the trigger;
// the listener enqueues the commit-job and the engine, whose pools poll
// only hourly, claims it once its commit delay has passed: the commit-job
// handler opens a commit ledger row and submits its job. The listener
// survives its connection being killed.
func TestCatalogTriggerCommitIsClaimedWithoutPolling(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendPostgres)
	ctx := t.Context()
	st, err := store.Open(ctx, b.URL, zaptest.NewLogger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	dir := t.TempDir()
	cat := pgCatalog(t, b.URL, dir)
	tbl, row := icebergTable(t, cat, st, pgCatalogName, "sales", "orders")
	_, err = store.InstallCatalogTrigger(ctx, b.URL, "")
	require.NoError(t, err)
	onCommitPolicy(t, st, "on-commit", `{"schedule": {"onCommit": true}, "minIntervalMs": 0}`, tableObj(pgCatalogName, "sales", "orders"))
	// A table of the catalog that TMS does not maintain.
	other, err := cat.CreateTable(ctx, table.Identifier{"sales", "unmaintained"}, commitSchema)
	require.NoError(t, err)

	sub := &recordingSubmitter{}
	fl, err := flow.NewFlow(st, sub, flow.FlowConfig{DBURL: b.URL, Log: zaptest.NewLogger(t),
		CommitDelay: 100 * time.Millisecond,
		Catalogs:    []flow.CatalogConfig{{Name: pgCatalogName, Properties: pgCatalogProps(b.URL, dir)}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fl.Close() })
	eng := b.Start(scheduler.Config{PollInterval: time.Hour}, fl.Kinds(nil, 0)...)

	var known, unknown atomic.Int64
	app := "tms_listener_" + strings.ToLower(rand.Text()[:10])
	ready := listen(t, st, ingress.CatalogNotifyConfig{
		DBURL: withAppName(t, b.URL, app), MinBackoff: 10 * time.Millisecond,
		Enqueue: func(ctx context.Context, id int64) (bool, error) { return fl.UpsertCommit(ctx, eng.Engine, id) },
		OnCommit: func(k, _ bool) {
			if k {
				known.Add(1)
			} else {
				unknown.Add(1)
			}
		},
	})

	committed := time.Now()
	tbl = appendRow(t, tbl)
	_ = appendRow(t, other)
	var jobs []store.Job
	testkit.Eventually(t, 10*time.Second, "the commit's ledger row", func() bool {
		jobs, err = st.ListJobs(ctx, row.ID, 10)
		require.NoError(t, err)
		return len(jobs) == 1
	})
	claimed := time.Since(committed)
	require.Equal(t, store.TriggerCommit, jobs[0].Trigger)
	require.Equal(t, []string{"compaction"}, jobs[0].Types)
	testkit.Eventually(t, 10*time.Second, "the job's submit", func() bool { return len(sub.submitted()) == 1 })
	require.Equal(t, pgCatalogName+".sales.orders", sub.submitted()[0].Table)
	require.Less(t, claimed, 10*time.Second, "claimed long before the hourly poll")
	testkit.Eventually(t, 10*time.Second, "the commit to be counted", func() bool { return known.Load() == 1 })
	testkit.Eventually(t, 10*time.Second, "the unmaintained table's commit to be ignored", func() bool { return unknown.Load() == 1 })
	require.Zero(t, commitJobs(t, st), "the commit-job row was claimed and is gone")

	// Kill the listener's connection: it reconnects and hears the next commit.
	testdb.PostgresExec(t, b.URL, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '`+app+`'`)
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not reconnect within 10s")
	}
	_ = appendRow(t, tbl)
	testkit.Eventually(t, 10*time.Second, "the second commit to be heard", func() bool { return known.Load() == 2 })
}

func TestCatalogListenerConfigErrors(t *testing.T) {
	t.Parallel()
	l := coordtest.NewLocalLedger(t, store.BackendSQLite)
	enqueue := func(context.Context, int64) (bool, error) { return true, nil }
	ctx := t.Context()
	err := ingress.ListenCatalogCommits(ctx, l.St, ingress.CatalogNotifyConfig{Enqueue: enqueue})
	require.ErrorIs(t, err, invalid.ErrArgument)
	require.ErrorContains(t, err, "catalog database URL is required")
	err = ingress.ListenCatalogCommits(ctx, l.St, ingress.CatalogNotifyConfig{DBURL: l.URL})
	require.ErrorContains(t, err, "enqueue function is required")
	// A SQLite catalog database cannot notify: said at once, not retried.
	err = ingress.ListenCatalogCommits(ctx, l.St, ingress.CatalogNotifyConfig{DBURL: l.URL, Enqueue: enqueue})
	require.ErrorIs(t, err, store.ErrNotSupported)
}
