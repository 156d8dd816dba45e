package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
)

// commitSchema is the one-column schema of the tables commits go to.
var commitSchema = iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})

// icebergTable creates namespace ns (if needed) and an empty table ns.name
// in cat, and registers it in st under catalog catName.
func icebergTable(t testing.TB, cat catalog.Catalog, st store.Store, catName, ns, name string) (*table.Table, store.Table) {
	t.Helper()
	ctx := context.Background()
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		require.ErrorIs(t, err, catalog.ErrNamespaceAlreadyExists)
	}
	tbl, err := cat.CreateTable(ctx, table.Identifier{ns, name}, commitSchema,
		catalog.WithProperties(iceberg.Properties{"format-version": "2"}))
	require.NoError(t, err)
	row, err := st.RegisterTable(ctx, store.TableRef{Catalog: catName, Namespace: ns, Name: name, UUID: tbl.Metadata().TableUUID().String()})
	require.NoError(t, err)
	return tbl, row
}

// appendRow commits one row to tbl through iceberg-go and returns the table
// after the commit.
func appendRow(t testing.TB, tbl *table.Table) *table.Table {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(commitSchema, nil, true, false)
	require.NoError(t, err)
	at, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{`[{"id": 1}]`})
	require.NoError(t, err)
	defer at.Release()
	tbl, err = tbl.AppendTable(context.Background(), at, 1024, nil)
	require.NoError(t, err)
	return tbl
}

// onCommitPolicy creates an enabled compaction policy with content and
// attaches it to obj.
func onCommitPolicy(t testing.TB, st store.Store, name, content string, obj store.PolicyObject) {
	t.Helper()
	_, err := st.CreatePolicy(context.Background(), store.NewPolicy{Name: name, Type: "system_iceberg_compaction", Enabled: true,
		Content: json.RawMessage(content)})
	require.NoError(t, err)
	_, _, err = st.Attach(context.Background(), name, obj)
	require.NoError(t, err)
}

func tableObj(catName, ns, name string) store.PolicyObject {
	return store.PolicyObject{Level: store.LevelTable, Catalog: catName, Namespace: ns, Table: name}
}

// commitJobs returns the commit-job rows in the queue.
func commitJobs(t testing.TB, st store.Store) int {
	t.Helper()
	counts, err := st.TaskCounts(context.Background(), time.Time{})
	require.NoError(t, err)
	for _, k := range counts {
		if k.Name == flow.KindCommitJob {
			return k.Total
		}
	}
	return 0
}

// watchBundle is a local catalog with two tables, a watched one (an
// onCommit policy) and one under a crontab-only policy, a table in a
// catalog this coordinator is not configured with, and a watcher over them
// on an engine that is not running (rows stay in the queue).
type watchBundle struct {
	st                 store.Store
	sch                store.Scheduler
	cat                catalog.Catalog
	watched, cronOnly  *table.Table
	watchedID, cronID  int64
	watcher            *ingress.Watcher
	clock              *scheduler.ManualClock
	enqueued, coalesce atomic.Int64
}

func setupWatch(t *testing.T, backend string) *watchBundle {
	t.Helper()
	l := coordtest.NewLocalLedger(t, backend)
	dir := t.TempDir()
	cat, err := catalogs.OpenLocal(t.Context(), dir, true)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.(catalog.Closer).Close() })
	b := &watchBundle{st: l.St, cat: cat, clock: scheduler.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	var row store.Table
	b.watched, row = icebergTable(t, cat, l.St, catalogs.LocalName, "ns", "watched")
	b.watchedID = row.ID
	b.cronOnly, row = icebergTable(t, cat, l.St, catalogs.LocalName, "ns", "cron_only")
	b.cronID = row.ID
	_, err = l.St.RegisterTable(t.Context(), store.TableRef{Catalog: "nowhere", Namespace: "ns", Name: "t", UUID: "uuid-nowhere"})
	require.NoError(t, err)
	onCommitPolicy(t, l.St, "on-commit", `{"schedule": {"onCommit": true}}`, tableObj(catalogs.LocalName, "ns", "watched"))
	onCommitPolicy(t, l.St, "cron-only", `{"schedule": {"crontab": "@hourly"}}`, tableObj(catalogs.LocalName, "ns", "cron_only"))
	onCommitPolicy(t, l.St, "elsewhere", `{"schedule": {"onCommit": true}}`, tableObj("nowhere", "ns", "t"))

	fl, err := flow.NewFlow(l.St, nil, flow.FlowConfig{DBURL: l.URL, Log: zaptest.NewLogger(t),
		Catalogs: []flow.CatalogConfig{{Name: catalogs.LocalName, WarehouseDir: dir}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fl.Close() })
	b.sch = l.St
	eng, err := scheduler.New(b.sch, scheduler.Config{Clock: b.clock}, fl.Kinds(nil, 0)...)
	require.NoError(t, err)
	b.watcher, err = ingress.NewWatcher(fl, eng, ingress.WatcherConfig{Interval: time.Minute, OnEnqueue: func(created bool) {
		b.enqueued.Add(1)
		if !created {
			b.coalesce.Add(1)
		}
	}})
	require.NoError(t, err)
	return b
}

func (b *watchBundle) poll(t *testing.T) ingress.WatchReport {
	t.Helper()
	rep, err := b.watcher.Poll(t.Context())
	require.NoError(t, err)
	return rep
}

func TestWatcherTurnsACommitIntoOneCommitJob(t *testing.T) {
	t.Parallel()
	for _, backend := range coordtest.LocalBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			b := setupWatch(t, backend)

			// First sight primes: nothing is enqueued. The crontab-only table
			// is not watched; the unconfigured catalog's table fails alone.
			rep := b.poll(t)
			require.Equal(t, ingress.WatchReport{Tables: 2, Primed: 1, Failed: 1}, rep)
			require.Zero(t, commitJobs(t, b.st))

			// A poll with no commit in between enqueues nothing.
			require.Equal(t, ingress.WatchReport{Tables: 2, Failed: 1}, b.poll(t))
			require.Zero(t, commitJobs(t, b.st))

			// A commit to each table: only the watched one gets a commit-job.
			b.watched = appendRow(t, b.watched)
			b.cronOnly = appendRow(t, b.cronOnly)
			require.Equal(t, ingress.WatchReport{Tables: 2, Enqueued: 1, Failed: 1}, b.poll(t))
			require.Equal(t, 1, commitJobs(t, b.st))
			task, err := b.sch.GetTask(t.Context(), flow.CommitJobKey(b.watchedID))
			require.NoError(t, err)
			require.Equal(t, b.clock.Now().Add(flow.DefaultCommitDelay), task.ExecutionTime, "due after the commit delay")
			_, err = b.sch.GetTask(t.Context(), flow.CommitJobKey(b.cronID))
			require.ErrorIs(t, err, store.ErrNotFound)
			require.Equal(t, int64(1), b.enqueued.Load())

			// The same state again: still exactly one row.
			require.Equal(t, ingress.WatchReport{Tables: 2, Failed: 1}, b.poll(t))
			require.Equal(t, 1, commitJobs(t, b.st))

			// Two more commits before the next poll coalesce into the pending row.
			b.watched = appendRow(t, appendRow(t, b.watched))
			require.Equal(t, 1, b.poll(t).Enqueued)
			require.Equal(t, 1, commitJobs(t, b.st))
			require.Equal(t, int64(2), b.enqueued.Load())
			require.Equal(t, int64(1), b.coalesce.Load(), "the second enqueue found the pending row")
		})
	}
}

// TestWatcherIgnoresCommitsThatChangeNoData: a manifest rewrite (a replace
// snapshot, as TMS's own compactions and manifest rewrites commit) and a
// property change move the metadata location without changing data, so
// they enqueue nothing; an append after them does, and so does an append
// followed by a replace before the same poll.
func TestWatcherIgnoresCommitsThatChangeNoData(t *testing.T) {
	t.Parallel()
	b := setupWatch(t, store.BackendSQLite)
	ctx := t.Context()
	b.watched = appendRow(t, appendRow(t, b.watched))
	require.Equal(t, 1, b.poll(t).Primed)

	rewrite := func() {
		t.Helper()
		txn := b.watched.NewTransaction()
		res, err := txn.RewriteManifests(ctx)
		require.NoError(t, err)
		require.False(t, res.IsNoOp(), "two manifests to merge")
		b.watched, err = txn.Commit(ctx)
		require.NoError(t, err)
		require.Equal(t, table.OpReplace, b.watched.CurrentSnapshot().Summary.Operation)
	}
	rewrite()
	require.Equal(t, ingress.WatchReport{Tables: 2, NoData: 1, Failed: 1}, b.poll(t), "a replace snapshot changes no data")
	txn := b.watched.NewTransaction()
	require.NoError(t, txn.SetProperties(iceberg.Properties{"owner": "ops"}))
	var err error
	b.watched, err = txn.Commit(ctx)
	require.NoError(t, err)
	require.Equal(t, ingress.WatchReport{Tables: 2, NoData: 1, Failed: 1}, b.poll(t), "a property change changes no data")
	require.Zero(t, commitJobs(t, b.st))
	require.Zero(t, b.enqueued.Load())

	b.watched = appendRow(t, b.watched)
	rewrite() // the append is behind the replace, and still seen
	require.Equal(t, ingress.WatchReport{Tables: 2, Enqueued: 1, Failed: 1}, b.poll(t))
	require.Equal(t, 1, commitJobs(t, b.st))
}

// TestWatcherRegistersARecreatedTable: a watched table dropped and
// recreated under its name has a new table-uuid; the watcher registers the
// new table as a new row (the old row stays), primes it at the next poll
// and turns its commits into the new row's commit-job.
func TestWatcherRegistersARecreatedTable(t *testing.T) {
	t.Parallel()
	b := setupWatch(t, store.BackendSQLite)
	require.Equal(t, 1, b.poll(t).Primed)
	ctx := t.Context()
	require.NoError(t, b.cat.DropTable(ctx, table.Identifier{"ns", "watched"}))
	tbl, err := b.cat.CreateTable(ctx, table.Identifier{"ns", "watched"}, commitSchema,
		catalog.WithProperties(iceberg.Properties{"format-version": "2"}))
	require.NoError(t, err)

	require.Equal(t, ingress.WatchReport{Tables: 2, Recreated: 1, Failed: 1}, b.poll(t))
	cur, err := b.st.FindTable(ctx, catalogs.LocalName, "ns", "watched")
	require.NoError(t, err)
	require.NotEqual(t, b.watchedID, cur.ID)
	require.Equal(t, tbl.Metadata().TableUUID().String(), cur.UUID)
	old, err := b.st.GetTable(ctx, b.watchedID)
	require.NoError(t, err)
	require.NotEqual(t, cur.UUID, old.UUID, "the old row keeps its table-uuid")

	require.Equal(t, ingress.WatchReport{Tables: 2, Primed: 1, Failed: 1}, b.poll(t), "the new row is primed")
	appendRow(t, tbl)
	require.Equal(t, 1, b.poll(t).Enqueued)
	_, err = b.sch.GetTask(ctx, flow.CommitJobKey(cur.ID))
	require.NoError(t, err, "the commit-job is the new row's")
	require.Zero(t, commitJobs(t, b.st)-1)
}

func TestWatcherRunPollsEveryInterval(t *testing.T) {
	t.Parallel()
	b := setupWatch(t, store.BackendSQLite)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.watcher.Run(ctx) }()

	b.clock.WaitForTimers(1) // the first poll (priming) is done, the next is planned
	b.watched = appendRow(t, b.watched)
	require.Zero(t, commitJobs(t, b.st), "nothing before the next poll")
	b.clock.Advance(time.Minute)
	testkit.Eventually(t, 10*time.Second, "the next poll to enqueue", func() bool { return b.enqueued.Load() == 1 })
	require.Equal(t, 1, commitJobs(t, b.st))

	cancel()
	require.NoError(t, <-done)
}

func TestWatcherConfigErrors(t *testing.T) {
	t.Parallel()
	l := coordtest.NewLocalLedger(t, store.BackendSQLite)
	fl, err := flow.NewFlow(l.St, nil, flow.FlowConfig{DBURL: l.URL})
	require.NoError(t, err)
	_, err = ingress.NewWatcher(fl, nil, ingress.WatcherConfig{})
	require.ErrorContains(t, err, "engine is required")
	eng, err := scheduler.New(l.St, scheduler.Config{}, fl.Kinds(nil, 0)...)
	require.NoError(t, err)
	_, err = ingress.NewWatcher(fl, eng, ingress.WatcherConfig{Interval: -time.Second})
	require.ErrorIs(t, err, invalid.ErrArgument)
	require.ErrorContains(t, err, "interval")
	_, err = ingress.NewWatcher(fl, eng, ingress.WatcherConfig{Concurrency: -1})
	require.ErrorContains(t, err, "concurrency")
}

// TestUpsertCommitWakesThePoolWhenDue: commit-jobs enqueued with a commit
// delay are claimed when their delay has passed, although the engine's
// pools poll only hourly: the enqueuing node wakes its commit pool at each
// due time, the later one too.
func TestUpsertCommitWakesThePoolWhenDue(t *testing.T) {
	t.Parallel()
	l := coordtest.NewLocalLedger(t, store.BackendSQLite)
	var ids []int64
	for _, name := range []string{"a", "b"} {
		row, err := l.St.RegisterTable(t.Context(), store.TableRef{Catalog: "c", Namespace: "ns", Name: name, UUID: "u-" + name})
		require.NoError(t, err)
		ids = append(ids, row.ID)
	}
	fl, err := flow.NewFlow(l.St, nil, flow.FlowConfig{DBURL: l.URL, CommitDelay: 2 * time.Second})
	require.NoError(t, err)
	b := &coordtest.Bundle{T: t, URL: l.URL, Sch: l.St, Ctx: t.Context()}
	start := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	clock := scheduler.NewManualClock(start)
	ran := make(chan string, 2)
	n := b.Start(scheduler.Config{Clock: clock, PollInterval: time.Hour}, scheduler.Kind{Name: flow.KindCommitJob,
		Handler: func(_ context.Context, x *scheduler.Execution) error {
			ran <- x.Task.Instance + "@" + x.Now().Sub(start).String()
			return nil
		}})
	m := &coordtest.ManualNode{Node: n, Clock: clock}
	enqueue := func(id int64) {
		created, err := fl.UpsertCommit(t.Context(), n.Engine, id)
		require.NoError(t, err)
		require.True(t, created)
	}

	enqueue(ids[0]) // due at 2s
	var got []string
	for step := range 6 { // seconds of clock time, against an hourly poll
		m.Quiesce(t, b)
		if step == 1 {
			enqueue(ids[1]) // at 1s, due at 3s
			m.Quiesce(t, b)
		}
		clock.Advance(time.Second)
		m.Quiesce(t, b)
		if now := step + 1; now == 2 || now == 3 {
			// A row falls due now: wait for its claim while the manual
			// clock stands still (quiesce's timer count can be met before
			// the pool has handled its wake, on a loaded machine).
			select {
			case r := <-ran:
				got = append(got, r)
			case <-time.After(10 * time.Second):
			}
		}
		for len(ran) > 0 {
			got = append(got, <-ran)
		}
	}
	require.Equal(t, []string{fmt.Sprintf("%d@2s", ids[0]), fmt.Sprintf("%d@3s", ids[1])}, got,
		"each claimed when due, not before and not at the next poll")
}
