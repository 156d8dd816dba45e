// Package coordtest holds what the coordinator packages' tests share: a
// migrated test database per test on either backend (Bundle), engines
// started on it (Node), a one-shot kind that records its executions
// exactly once (RecordKind), and Eventually. It is for tests only.
package coordtest

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

	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// Main is a test package's TestMain: it fails the package at once when
// PostgreSQL does not answer (these tests never skip) and checks for leaked
// goroutines.
func Main(m *testing.M) {
	if err := testdb.RequirePostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// Bundle is one test's database: its URL, migrated, with the executions
// table, and a store the test itself reads through.
type Bundle struct {
	T   *testing.T
	URL string
	Sch store.Scheduler
	Ctx context.Context
}

// Setup migrates a fresh database of backend (store.BackendPostgres or
// store.BackendSQLite) for t.
func Setup(t *testing.T, backend string) *Bundle {
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
	b := &Bundle{T: t, URL: dbURL, Ctx: t.Context()}
	b.Sch = b.Open(8)
	return b
}

// Open opens a store of its own, as another process would; on PostgreSQL
// with a pool big enough for threads.
func (b *Bundle) Open(threads int) store.Scheduler {
	b.T.Helper()
	dbURL := b.URL
	if u, err := url.Parse(dbURL); err == nil && u.Scheme == "postgres" {
		q := u.Query()
		q.Set("pool_max_conns", fmt.Sprint(threads+4))
		u.RawQuery = q.Encode()
		dbURL = u.String()
	}
	s, err := store.Open(context.Background(), dbURL, zaptest.NewLogger(b.T))
	require.NoError(b.T, err)
	b.T.Cleanup(func() { _ = s.Close() })
	return s
}

// Node is an engine running in the test process.
type Node struct {
	*scheduler.Engine
	Stop func() error // cancels Run and returns its error
	Wait func() error // waits for Run to return by itself
}

// Start runs an engine on a store of its own until the test ends.
func (b *Bundle) Start(cfg scheduler.Config, kinds ...scheduler.Kind) *Node {
	b.T.Helper()
	threads := 4
	for _, n := range cfg.Pools {
		threads = max(threads, n)
	}
	return b.StartOn(b.Open(threads), cfg, kinds...)
}

// StartOn runs an engine on sch until the test ends, once it is ready.
func (b *Bundle) StartOn(sch store.Scheduler, cfg scheduler.Config, kinds ...scheduler.Kind) *Node {
	b.T.Helper()
	if cfg.Log == nil {
		cfg.Log = zaptest.NewLogger(b.T)
	}
	e, err := scheduler.New(sch, cfg, kinds...)
	require.NoError(b.T, err)
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
	b.T.Cleanup(func() { _ = stop() })
	select {
	case <-e.Ready():
	case err := <-errc:
		b.T.Fatalf("engine stopped before it was ready: %v", err)
	}
	return &Node{Engine: e, Stop: stop, Wait: wait}
}

// RecordKind is a one-shot kind whose handler records its execution in the
// executions table in the same transaction as its guarded completion.
func RecordKind(name, pool string) scheduler.Kind {
	return scheduler.Kind{Name: name, Pool: pool, Handler: func(ctx context.Context, x *scheduler.Execution) error {
		return x.Complete(ctx, func(ctx context.Context, tx store.TxWriter) error {
			return testdb.RecordExecution(ctx, tx, x.Task.Instance, x.Node())
		})
	}}
}

// ScheduleN inserts n one-shot rows of kind, due now, instances "0".."n-1".
func (b *Bundle) ScheduleN(kind string, n int) {
	b.T.Helper()
	ts := make([]store.NewTask, n)
	for i := range ts {
		ts[i] = store.NewTask{TaskKey: store.TaskKey{Name: kind, Instance: fmt.Sprint(i)}}
	}
	created, err := b.Sch.ScheduleTasks(b.Ctx, ts, time.Now().Add(-time.Second))
	require.NoError(b.T, err)
	require.Equal(b.T, n, created)
}

// ManualNode is an engine on a ManualClock that only the test moves.
type ManualNode struct {
	*Node
	Clock *scheduler.ManualClock
}

// idleTimers is how many timers an idle engine of one pool parks: the
// pool's poll and the heartbeat (the listener waits on the database, not on
// the clock).
const idleTimers = 2

// Quiesce waits until the engine is idle: its timers parked (so the pool
// is not inside a statement) and no row picked (so no callback or
// completion is under way).
func (m *ManualNode) Quiesce(t *testing.T, b *Bundle) {
	t.Helper()
	m.Clock.WaitForTimers(idleTimers)
	testkit.Eventually(t, 10*time.Second, "no row to be picked", func() bool {
		_, picked, err := b.Sch.CountTasks(b.Ctx)
		require.NoError(t, err)
		return picked == 0
	})
	m.Clock.WaitForTimers(idleTimers)
}
