package coordinator_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/coordinator"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// TestMain fails the package at once when PostgreSQL does not answer (these
// tests never skip), runs the helper node when the test binary was re-executed
// as one (see process_test.go), and checks for leaked goroutines.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelperNode())
	}
	if err := testdb.RequirePostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// bundle is one test's database: its URL, migrated, with the executions
// table, and a store the test itself reads through.
type bundle struct {
	t   *testing.T
	url string
	sch store.Scheduler
	ctx context.Context
}

func setup(t *testing.T, backend string) *bundle {
	t.Helper()
	var dbURL string
	switch backend {
	case store.BackendPostgres:
		dbURL = testdb.PostgresURL(t)
	default:
		dbURL = testdb.SQLiteURL(t)
	}
	_, err := store.Migrate(context.Background(), dbURL, zaptest.NewLogger(t))
	require.NoError(t, err)
	testdb.CreateExecutions(t, dbURL)
	b := &bundle{t: t, url: dbURL, ctx: t.Context()}
	b.sch = b.open(8)
	return b
}

// open opens a store of its own, as another process would; on PostgreSQL
// with a pool big enough for threads.
func (b *bundle) open(threads int) store.Scheduler {
	b.t.Helper()
	dbURL := b.url
	if u, err := url.Parse(dbURL); err == nil && u.Scheme == "postgres" {
		q := u.Query()
		q.Set("pool_max_conns", fmt.Sprint(threads+4))
		u.RawQuery = q.Encode()
		dbURL = u.String()
	}
	s, err := store.Open(context.Background(), dbURL, zaptest.NewLogger(b.t))
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = s.Close() })
	sch, err := store.TasksOf(s)
	require.NoError(b.t, err)
	return sch
}

// node is an engine running in the test process.
type node struct {
	*coordinator.Engine
	stop func() error // cancels Run and returns its error
	wait func() error // waits for Run to return by itself
}

// start runs an engine on a store of its own until the test ends.
func (b *bundle) start(cfg coordinator.Config, kinds ...coordinator.Kind) *node {
	b.t.Helper()
	threads := 4
	for _, n := range cfg.Pools {
		threads = max(threads, n)
	}
	return b.startOn(b.open(threads), cfg, kinds...)
}

func (b *bundle) startOn(sch store.Scheduler, cfg coordinator.Config, kinds ...coordinator.Kind) *node {
	b.t.Helper()
	if cfg.Log == nil {
		cfg.Log = zaptest.NewLogger(b.t)
	}
	e, err := coordinator.New(sch, cfg, kinds...)
	require.NoError(b.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()
	var once sync.Once
	var runErr error
	wait := func() error {
		once.Do(func() { runErr = <-errc })
		return runErr
	}
	stop := func() error {
		cancel()
		return wait()
	}
	b.t.Cleanup(func() { _ = stop() })
	select {
	case <-e.Ready():
	case err := <-errc:
		b.t.Fatalf("engine stopped before it was ready: %v", err)
	}
	return &node{Engine: e, stop: stop, wait: wait}
}

// recordKind is a one-shot kind whose handler records its execution in the
// executions table in the same transaction as its guarded completion.
func recordKind(name, pool string) coordinator.Kind {
	return coordinator.Kind{Name: name, Pool: pool, Handler: func(ctx context.Context, x *coordinator.Execution) error {
		return x.Complete(ctx, func(ctx context.Context, tx store.TxWriter) error {
			return testdb.RecordExecution(ctx, tx, x.Task.Instance, x.Node())
		})
	}}
}

// scheduleN inserts n one-shot rows of kind, due now, instances "0".."n-1".
func (b *bundle) scheduleN(kind string, n int) {
	b.t.Helper()
	ts := make([]store.NewTask, n)
	for i := range ts {
		ts[i] = store.NewTask{TaskKey: store.TaskKey{Name: kind, Instance: fmt.Sprint(i)}}
	}
	created, err := b.sch.ScheduleTasks(b.ctx, ts, time.Now().Add(-time.Second))
	require.NoError(b.t, err)
	require.Equal(b.t, n, created)
}

// eventually waits for cond, checking every few milliseconds, up to limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
