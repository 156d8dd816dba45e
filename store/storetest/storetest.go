// Package storetest is the conformance suite of store.Store: one set of
// behaviour tests that every backend (PostgreSQL, SQLite) must pass, in the
// manner of river's riverdrivertest. Backends run it from their own tests
// with Exercise.
//
// It owns only test code. It must not run SQL or know which backend it
// tests: everything it checks goes through the store.Store interface, so a
// behaviour that cannot be observed there is not part of the contract.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// Exercise runs the whole suite, every part of Store as its own subtest:
// the ledger (Tables, Jobs, …), the task table (Tasks), the policies
// (Policies), the operators' reads (LedgerQueries, TableHealth) and the
// plan's bulk reads (PlanReads). open must return a fresh, migrated, empty
// store for each call and register its cleanup (Close, dropping the
// database) with t.Cleanup. Subtests call t.Parallel.
func Exercise(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()

	setup := func(t *testing.T) *bundle {
		t.Helper()
		s := open(t)
		return &bundle{s: s, ctx: t.Context()}
	}

	t.Run("Backend", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Contains(t, []string{store.BackendPostgres, store.BackendSQLite}, b.s.Backend())
	})

	t.Run("Tables", func(t *testing.T) {
		t.Parallel()
		exerciseTables(t, setup)
	})
	t.Run("Jobs", func(t *testing.T) {
		t.Parallel()
		exerciseJobs(t, setup)
	})
	t.Run("Fencing", func(t *testing.T) {
		t.Parallel()
		exerciseFencing(t, setup)
		exerciseCloseJob(t, setup)
	})
	t.Run("InFlight", func(t *testing.T) {
		t.Parallel()
		exerciseInFlight(t, setup)
	})
	t.Run("Metrics", func(t *testing.T) {
		t.Parallel()
		exerciseMetrics(t, setup)
	})
	t.Run("JobsOps", func(t *testing.T) {
		t.Parallel()
		exerciseJobsOps(t, setup)
	})
	t.Run("RunnerSupport", func(t *testing.T) {
		t.Parallel()
		exerciseRunnerSupport(t, setup)
	})
	t.Run("CommitEvents", func(t *testing.T) {
		t.Parallel()
		exerciseCommitEvents(t, setup)
	})

	t.Run("Tasks", func(t *testing.T) {
		t.Parallel()
		exerciseTasks(t, open)
	})
	t.Run("Policies", func(t *testing.T) {
		t.Parallel()
		exercisePolicies(t, open)
	})
	t.Run("LedgerQueries", func(t *testing.T) {
		t.Parallel()
		exerciseLedgerQueries(t, open)
	})
	t.Run("TableHealth", func(t *testing.T) {
		t.Parallel()
		exerciseTableHealth(t, open)
	})
	t.Run("PlanReads", func(t *testing.T) {
		t.Parallel()
		exercisePlanReads(t, open)
	})
}

// bundle is what each subtest gets from setup.
type bundle struct {
	s   store.Store
	ctx context.Context
}

// table registers a table with a fresh uuid.
func (b *bundle) table(t *testing.T, name string) store.Table {
	t.Helper()
	tbl, err := b.s.RegisterTable(b.ctx, store.TableRef{Catalog: "cat", Namespace: "db.sch", Name: name, UUID: rand.Text()})
	require.NoError(t, err)
	return tbl
}

// job creates a cron job row for (table, policy).
func (b *bundle) job(t *testing.T, tableID, policyID int64) store.Job {
	t.Helper()
	j, err := b.s.CreateJob(b.ctx, store.NewJob{
		TableID: tableID, PolicyID: policyID, Types: []string{"compaction"}, Trigger: store.TriggerCron,
	})
	require.NoError(t, err)
	return j
}

// get reads a job row back.
func (b *bundle) get(t *testing.T, id int64) store.Job {
	t.Helper()
	j, err := b.s.GetJob(b.ctx, id)
	require.NoError(t, err)
	return j
}

func ptr[T any](v T) *T { return &v }

func exerciseTables(t *testing.T, setup func(*testing.T) *bundle) {
	t.Run("RegisterIsIdempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := store.TableRef{Catalog: "cat", Namespace: "db.sch", Name: "orders", UUID: "uuid-1"}
		first, err := b.s.RegisterTable(b.ctx, ref)
		require.NoError(t, err)
		require.Positive(t, first.ID)
		require.Equal(t, ref, first.TableRef)
		require.Equal(t, time.UTC, first.CreatedAt.Location())
		require.WithinDuration(t, time.Now(), first.CreatedAt, time.Minute)

		again, err := b.s.RegisterTable(b.ctx, ref)
		require.NoError(t, err)
		require.Equal(t, first, again)

		got, err := b.s.GetTable(b.ctx, first.ID)
		require.NoError(t, err)
		require.Equal(t, first, got)
	})

	t.Run("Locations", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a, c := b.table(t, "a"), b.table(t, "c")
		b.table(t, "never-run")
		got, err := b.s.TableLocations(b.ctx)
		require.NoError(t, err)
		require.Empty(t, got, "no location is recorded before a runner records it")
		require.NoError(t, b.s.RecordTableFacts(b.ctx, c.ID, store.TableFacts{Location: "s3://lake/db/c", GCEnabled: true}))
		require.NoError(t, b.s.RecordTableFacts(b.ctx, a.ID, store.TableFacts{Location: "s3://lake/db/a", GCEnabled: true}))
		require.NoError(t, b.s.RecordTableFacts(b.ctx, a.ID, store.TableFacts{Location: "s3://lake/db/a", GCEnabled: true}), "the same location again")
		require.NoError(t, b.s.RecordTableFacts(b.ctx, c.ID, store.TableFacts{Location: "s3://lake/db/a/data/c", GCEnabled: true}), "a moved table")
		got, err = b.s.TableLocations(b.ctx)
		require.NoError(t, err)
		require.Equal(t, []store.TableLocation{
			{TableRef: a.TableRef, ID: a.ID, Location: "s3://lake/db/a"},
			{TableRef: c.TableRef, ID: c.ID, Location: "s3://lake/db/a/data/c"},
		}, got)
		require.ErrorIs(t, b.s.RecordTableFacts(b.ctx, c.ID+1000, store.TableFacts{Location: "s3://x", GCEnabled: true}), store.ErrNotFound)
		require.ErrorIs(t, b.s.RecordTableFacts(b.ctx, a.ID, store.TableFacts{Location: "", GCEnabled: true}), store.ErrInvalidArgument)

		// Outside folders: recorded, replaced, cleared; a row with only
		// folders is listed with an empty location.
		never, err := b.s.FindTable(b.ctx, a.Catalog, a.Namespace, "never-run")
		require.NoError(t, err)
		require.NoError(t, b.s.RecordOutsideFolders(b.ctx, a.ID, []string{"s3://lake/export/x", "s3://other/y"}))
		require.NoError(t, b.s.RecordOutsideFolders(b.ctx, a.ID, []string{"s3://lake/export/x", "s3://other/y"}), "the same folders again")
		require.NoError(t, b.s.RecordOutsideFolders(b.ctx, never.ID, []string{"/data/brought"}))
		require.NoError(t, b.s.RecordOutsideFolders(b.ctx, c.ID, nil))
		got, err = b.s.TableLocations(b.ctx)
		require.NoError(t, err)
		require.Equal(t, []store.TableLocation{
			{TableRef: a.TableRef, ID: a.ID, Location: "s3://lake/db/a", OutsideFolders: []string{"s3://lake/export/x", "s3://other/y"}},
			{TableRef: c.TableRef, ID: c.ID, Location: "s3://lake/db/a/data/c"},
			{TableRef: never.TableRef, ID: never.ID, OutsideFolders: []string{"/data/brought"}},
		}, got)
		require.NoError(t, b.s.RecordOutsideFolders(b.ctx, a.ID, []string{}), "none any more")
		got, err = b.s.TableLocations(b.ctx)
		require.NoError(t, err)
		require.Nil(t, got[0].OutsideFolders)
		require.ErrorIs(t, b.s.RecordOutsideFolders(b.ctx, c.ID+1000, nil), store.ErrNotFound)
		require.ErrorIs(t, b.s.RecordOutsideFolders(b.ctx, a.ID, []string{"s3://x", ""}), store.ErrInvalidArgument)
	})

	t.Run("ConcurrentRegisterReturnsOneRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ref := store.TableRef{Catalog: "cat", Namespace: "db", Name: "events", UUID: "uuid-c"}
		ids := make(chan int64, 8)
		errs := make(chan error, 8)
		start := make(chan struct{})
		for range 8 {
			go func() {
				<-start
				tbl, err := b.s.RegisterTable(b.ctx, ref)
				errs <- err
				ids <- tbl.ID
			}()
		}
		close(start)
		var want int64
		for i := range 8 {
			require.NoError(t, <-errs)
			id := <-ids
			if i == 0 {
				want = id
			}
			require.Equal(t, want, id)
		}
	})

	t.Run("RecreatedTableIsNewRowAndFindReturnsNewest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old, err := b.s.RegisterTable(b.ctx, store.TableRef{Catalog: "cat", Namespace: "db", Name: "t", UUID: "uuid-old"})
		require.NoError(t, err)
		// Same name in another namespace and catalog must not be confused with it.
		_, err = b.s.RegisterTable(b.ctx, store.TableRef{Catalog: "cat", Namespace: "db2", Name: "t", UUID: "uuid-x"})
		require.NoError(t, err)
		_, err = b.s.RegisterTable(b.ctx, store.TableRef{Catalog: "other", Namespace: "db", Name: "t", UUID: "uuid-y"})
		require.NoError(t, err)

		found, err := b.s.FindTable(b.ctx, "cat", "db", "t")
		require.NoError(t, err)
		require.Equal(t, old, found)

		recreated, err := b.s.RegisterTable(b.ctx, store.TableRef{Catalog: "cat", Namespace: "db", Name: "t", UUID: "uuid-new"})
		require.NoError(t, err)
		require.NotEqual(t, old.ID, recreated.ID)

		found, err = b.s.FindTable(b.ctx, "cat", "db", "t")
		require.NoError(t, err)
		require.Equal(t, recreated, found)

		// Re-registering the old incarnation returns the old row, not a third.
		again, err := b.s.RegisterTable(b.ctx, old.TableRef)
		require.NoError(t, err)
		require.Equal(t, old, again)
		found, err = b.s.FindTable(b.ctx, "cat", "db", "t")
		require.NoError(t, err)
		require.Equal(t, recreated.ID, found.ID)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.s.FindTable(b.ctx, "cat", "db", "missing")
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = b.s.GetTable(b.ctx, 424242)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("RegisterRejectsEmptyFields", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		full := store.TableRef{Catalog: "c", Namespace: "n", Name: "t", UUID: "u"}
		for _, ref := range []store.TableRef{
			{Namespace: "n", Name: "t", UUID: "u"},
			{Catalog: "c", Name: "t", UUID: "u"},
			{Catalog: "c", Namespace: "n", UUID: "u"},
			{Catalog: "c", Namespace: "n", Name: "t", UUID: " "},
		} {
			_, err := b.s.RegisterTable(b.ctx, ref)
			require.ErrorIs(t, err, store.ErrInvalidArgument, "%+v", ref)
		}
		_, err := b.s.FindTable(b.ctx, full.Catalog, full.Namespace, full.Name)
		require.ErrorIs(t, err, store.ErrNotFound, "a rejected table must not be stored")
	})
}

func exerciseJobs(t *testing.T, setup func(*testing.T) *bundle) {
	t.Run("Lifecycle", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "orders")
		before := time.Now().Add(-time.Second)
		spec := json.RawMessage(`{"table": "cat.db.sch.orders", "types": ["compaction", "manifest-rewrite"]}`)
		created, err := b.s.CreateJob(b.ctx, store.NewJob{
			TableID: tbl.ID, PolicyID: 7, Types: []string{"compaction", "manifest-rewrite"},
			Trigger: store.TriggerCommit, Spec: spec,
		})
		require.NoError(t, err)
		require.Positive(t, created.ID)
		require.Equal(t, tbl.ID, created.TableID)
		require.Equal(t, int64(7), created.PolicyID)
		require.Equal(t, []string{"compaction", "manifest-rewrite"}, created.Types)
		require.Equal(t, store.TriggerCommit, created.Trigger)
		require.Equal(t, store.StatusPending, created.Status)
		require.Equal(t, int64(1), created.Fence)
		require.Empty(t, created.JobID)
		require.Empty(t, created.Submitter)
		require.Nil(t, created.BeforeSnapshotID)
		require.Nil(t, created.AfterSnapshotID)
		require.Empty(t, created.Error)
		require.JSONEq(t, string(spec), string(created.Spec))
		require.Equal(t, time.UTC, created.CreatedAt.Location())
		require.WithinRange(t, created.CreatedAt, before, time.Now().Add(time.Second))
		require.True(t, created.StartedAt.IsZero())
		require.True(t, created.InFlight())
		require.Equal(t, created, b.get(t, created.ID))

		require.NoError(t, b.s.SetJobID(b.ctx, created.ID, 1, "spark-app-42", "gravitino"))
		// A time in another zone with nanoseconds comes back in UTC, in microseconds.
		startedAt := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3*3600))
		require.NoError(t, b.s.StartJob(b.ctx, created.ID, 1, startedAt))
		require.NoError(t, b.s.SetBeforeSnapshot(b.ctx, created.ID, 1, 1001))
		running := b.get(t, created.ID)
		require.Equal(t, store.StatusRunning, running.Status)
		require.Equal(t, "spark-app-42", running.JobID)
		require.Equal(t, "gravitino", running.Submitter, "the submitter kind round-trips")
		require.Equal(t, startedAt.UTC().Truncate(time.Microsecond), running.StartedAt)
		require.Equal(t, ptr(int64(1001)), running.BeforeSnapshotID)
		require.True(t, running.InFlight())

		finishedAt := startedAt.Add(90 * time.Second)
		require.NoError(t, b.s.FinishJob(b.ctx, created.ID, 1, store.Finish{
			Status: store.StatusFailed, AfterSnapshotID: ptr(int64(1002)), Error: "boom", At: finishedAt,
		}))
		done := b.get(t, created.ID)
		require.Equal(t, store.StatusFailed, done.Status)
		require.Equal(t, ptr(int64(1002)), done.AfterSnapshotID)
		require.Equal(t, "boom", done.Error)
		require.Equal(t, "gravitino", done.Submitter, "finishing keeps the submitter")
		require.Equal(t, finishedAt.UTC().Truncate(time.Microsecond), done.FinishedAt)
		require.False(t, done.InFlight())
		require.Equal(t, int64(1), done.Fence)
		require.Equal(t, created.CreatedAt, done.CreatedAt)
	})

	t.Run("FinishWithoutSnapshotOrError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		j := b.job(t, b.table(t, "t").ID, store.NoPolicy)
		before := time.Now().Add(-time.Second)
		require.NoError(t, b.s.FinishJob(b.ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSkipped}))
		got := b.get(t, j.ID)
		require.Equal(t, store.StatusSkipped, got.Status)
		require.Nil(t, got.AfterSnapshotID)
		require.Empty(t, got.Error)
		require.WithinRange(t, got.FinishedAt, before, time.Now().Add(time.Second), "zero At means now")
		require.True(t, got.StartedAt.IsZero())
	})

	t.Run("CreateRejectsBadJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "t")
		good := store.NewJob{TableID: tbl.ID, PolicyID: 1, Types: []string{"compaction"}, Trigger: store.TriggerManual}
		for name, mutate := range map[string]func(*store.NewJob){
			"no types":        func(j *store.NewJob) { j.Types = nil },
			"empty type":      func(j *store.NewJob) { j.Types = []string{"compaction", ""} },
			"comma in type":   func(j *store.NewJob) { j.Types = []string{"compaction,snapshot-expiry"} },
			"unknown trigger": func(j *store.NewJob) { j.Trigger = "hourly" },
			"negative policy": func(j *store.NewJob) { j.PolicyID = -1 },
			"bad spec":        func(j *store.NewJob) { j.Spec = json.RawMessage(`{"a":`) },
			"no table":        func(j *store.NewJob) { j.TableID = 0 },
		} {
			j := good
			mutate(&j)
			_, err := b.s.CreateJob(b.ctx, j)
			require.ErrorIs(t, err, store.ErrInvalidArgument, name)
		}
		j := good
		j.TableID = tbl.ID + 1000
		_, err := b.s.CreateJob(b.ctx, j)
		require.ErrorIs(t, err, store.ErrNotFound, "unknown table")

		// None of the rejected jobs holds the in-flight slot.
		_, err = b.s.CreateJob(b.ctx, good)
		require.NoError(t, err)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.s.GetJob(b.ctx, 999)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = b.s.BumpFence(b.ctx, 999)
		require.ErrorIs(t, err, store.ErrNotFound)
		for name, write := range fencedWrites(b) {
			require.ErrorIs(t, write(999, 1), store.ErrNotFound, name)
		}
	})

	t.Run("ListNewestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl, other := b.table(t, "t"), b.table(t, "other")
		var ids []int64
		for p := range int64(5) {
			j := b.job(t, tbl.ID, p)
			ids = append(ids, j.ID)
			o := b.job(t, other.ID, p)
			for _, j := range []store.Job{j, o} { // one in flight per table
				require.NoError(t, b.s.FinishJob(b.ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded}))
			}
		}
		jobs, err := b.s.ListJobs(b.ctx, tbl.ID, 10)
		require.NoError(t, err)
		require.Len(t, jobs, 5)
		for i, j := range jobs {
			require.Equal(t, ids[len(ids)-1-i], j.ID)
			require.Equal(t, tbl.ID, j.TableID)
		}
		jobs, err = b.s.ListJobs(b.ctx, tbl.ID, 2)
		require.NoError(t, err)
		require.Equal(t, []int64{ids[4], ids[3]}, []int64{jobs[0].ID, jobs[1].ID})

		jobs, err = b.s.ListJobs(b.ctx, tbl.ID+1000, 10)
		require.NoError(t, err)
		require.Empty(t, jobs)

		_, err = b.s.ListJobs(b.ctx, tbl.ID, 0)
		require.ErrorIs(t, err, store.ErrInvalidArgument)
	})
}
