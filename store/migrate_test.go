package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/migrations"
	"github.com/tms-dev/tms/store"
)

// harness gives the migration tests raw access to one backend, beside the
// store: they check what the store wrote and plant states it never writes.
type harness struct {
	name   string
	newURL func(t testing.TB) string
	// exec runs statements outside the store.
	exec func(t testing.TB, dbURL, sql string)
	// ints runs a query returning one integer column.
	ints func(t testing.TB, dbURL, sql string) []int64
	// tableExists reports whether a table exists.
	tableExists func(t testing.TB, dbURL, table string) bool
	// futureVersionTable creates a version table claiming version 99.
	futureVersionTable string
}

// migrateTo applies the first n migrations to dbURL by hand, as an older
// release left the database, recording each in the version table.
func (h harness) migrateTo(t testing.TB, dbURL string, n int) {
	t.Helper()
	ms, err := migrations.All(h.name)
	require.NoError(t, err)
	for _, m := range ms[:n] {
		h.exec(t, dbURL, m.SQL)
		h.exec(t, dbURL, fmt.Sprintf(`INSERT INTO tms_schema_migration (version, name) VALUES (%d, '%s')`, m.Version, m.Name))
	}
}

func harnesses() []harness {
	return []harness{
		{
			name:   "postgres",
			newURL: pgSchemaURL,
			exec:   pgExec,
			ints: func(t testing.TB, dbURL, q string) []int64 {
				t.Helper()
				ctx := context.Background()
				conn, err := pgx.Connect(ctx, dbURL)
				require.NoError(t, err)
				defer conn.Close(ctx)
				rows, err := conn.Query(ctx, q)
				require.NoError(t, err)
				out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				require.NoError(t, err)
				return out
			},
			tableExists: func(t testing.TB, dbURL, table string) bool {
				t.Helper()
				ctx := context.Background()
				conn, err := pgx.Connect(ctx, dbURL)
				require.NoError(t, err)
				defer conn.Close(ctx)
				var ok bool
				require.NoError(t, conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok))
				return ok
			},
			futureVersionTable: `CREATE TABLE tms_schema_migration (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
				INSERT INTO tms_schema_migration (version, name) VALUES (1, 'ledger'), (99, 'future')`,
		},
		{
			name:   "sqlite",
			newURL: sqliteURL,
			exec: func(t testing.TB, dbURL, q string) {
				t.Helper()
				db := rawSQLite(t, dbURL)
				_, err := db.Exec(q)
				require.NoError(t, err)
			},
			ints: func(t testing.TB, dbURL, q string) []int64 {
				t.Helper()
				db := rawSQLite(t, dbURL)
				rows, err := db.Query(q)
				require.NoError(t, err)
				defer rows.Close()
				var out []int64
				for rows.Next() {
					var v int64
					require.NoError(t, rows.Scan(&v))
					out = append(out, v)
				}
				require.NoError(t, rows.Err())
				return out
			},
			tableExists: func(t testing.TB, dbURL, table string) bool {
				t.Helper()
				var n int
				require.NoError(t, rawSQLite(t, dbURL).QueryRow(
					`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n))
				return n == 1
			},
			futureVersionTable: `CREATE TABLE tms_schema_migration (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT '');
				INSERT INTO tms_schema_migration (version, name) VALUES (1, 'ledger'), (99, 'future')`,
		},
	}
}

// rawSQLite opens the file behind a sqlite:// URL without the store.
func rawSQLite(t testing.TB, dbURL string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", strings.TrimPrefix(dbURL, "sqlite://")+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func allVersions() []int {
	var vs []int
	for v := 1; v <= migrations.Latest(); v++ {
		vs = append(vs, v)
	}
	return vs
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			testMigrate(t, h)
		})
	}
}

func testMigrate(t *testing.T, h harness) {
	latest := migrations.Latest()
	versionsOf := func(t testing.TB, dbURL string) []int64 {
		return h.ints(t, dbURL, `SELECT version FROM tms_schema_migration ORDER BY version`)
	}
	wantVersions := func() []int64 {
		var out []int64
		for _, v := range allVersions() {
			out = append(out, int64(v))
		}
		return out
	}()

	t.Run("FreshDatabaseGetsEverythingOnce", func(t *testing.T) {
		t.Parallel()
		ctx, dbURL := t.Context(), h.newURL(t)
		current, got, err := store.MigrationStatus(ctx, dbURL)
		require.NoError(t, err)
		require.Equal(t, [2]int{0, latest}, [2]int{current, got})

		applied, err := store.Migrate(ctx, dbURL, zaptest.NewLogger(t))
		require.NoError(t, err)
		require.Equal(t, allVersions(), applied)
		require.Equal(t, wantVersions, versionsOf(t, dbURL))
		for _, table := range []string{"maintained_table", "table_maintenance_job", "table_snapshot_metrics"} {
			require.True(t, h.tableExists(t, dbURL, table), table)
		}
		current, _, err = store.MigrationStatus(ctx, dbURL)
		require.NoError(t, err)
		require.Equal(t, latest, current)

		applied, err = store.Migrate(ctx, dbURL, nil)
		require.NoError(t, err)
		require.Empty(t, applied, "a rerun applies nothing")
		require.Equal(t, wantVersions, versionsOf(t, dbURL))

		s, err := store.Open(ctx, dbURL, nil)
		require.NoError(t, err)
		require.NoError(t, s.Close())
	})

	// A database at version 6 may hold several in-flight rows of one table;
	// 0007 keeps the oldest of each table in flight and closes the others
	// lost with their fence bumped, then enforces one per table.
	t.Run("Upgrade7ClosesOverlappingInFlightRows", func(t *testing.T) {
		t.Parallel()
		ctx, dbURL := t.Context(), h.newURL(t)
		h.migrateTo(t, dbURL, 6)
		h.exec(t, dbURL, `INSERT INTO maintained_table (id, catalog, namespace, name, table_uuid) VALUES (1, 'c', 'ns', 'a', 'u1'), (2, 'c', 'ns', 'b', 'u2')`)
		h.exec(t, dbURL, `INSERT INTO table_maintenance_job (table_id, policy_id, types, "trigger", status, fence) VALUES
			(1, 1, 'compaction', 'cron', 'running', 1),
			(1, 2, 'snapshot-expiry', 'cron', 'pending', 3),
			(1, 3, 'orphan-cleanup', 'cron', 'running', 1),
			(2, 1, 'compaction', 'commit', 'running', 1)`)
		applied, err := store.Migrate(ctx, dbURL, zaptest.NewLogger(t))
		require.NoError(t, err)
		require.Equal(t, versionsFrom(7), applied)
		require.Equal(t, []int64{1, 4}, h.ints(t, dbURL, `SELECT id FROM table_maintenance_job WHERE finished_at IS NULL ORDER BY id`))
		require.Equal(t, []int64{2, 3}, h.ints(t, dbURL, `SELECT id FROM table_maintenance_job WHERE status = 'lost' AND error LIKE 'migration 0007:%' ORDER BY id`))
		require.Equal(t, []int64{1, 4, 2, 1}, h.ints(t, dbURL, `SELECT fence FROM table_maintenance_job ORDER BY id`))

		s, err := store.Open(ctx, dbURL, nil)
		require.NoError(t, err)
		defer s.Close()
		_, err = s.CreateJob(ctx, store.NewJob{TableID: 2, PolicyID: 2, Types: []string{"snapshot-expiry"}, Trigger: store.TriggerCron})
		require.ErrorIs(t, err, store.ErrInFlight)
		j, err := s.GetJob(ctx, 3)
		require.NoError(t, err)
		require.False(t, j.InFlight())
		require.ErrorIs(t, s.FinishJob(ctx, 3, 1, store.Finish{Status: store.StatusSucceeded}), store.ErrStaleFence, "its runner is fenced out")
	})

	// A database at version 7 has job rows without a submitter; 0008 adds
	// the column and leaves them empty, and SetJobID fills it in.
	t.Run("Upgrade8LeavesExistingRowsWithoutSubmitter", func(t *testing.T) {
		t.Parallel()
		ctx, dbURL := t.Context(), h.newURL(t)
		h.migrateTo(t, dbURL, 7)
		h.exec(t, dbURL, `INSERT INTO maintained_table (id, catalog, namespace, name, table_uuid) VALUES (1, 'c', 'ns', 'a', 'u1')`)
		h.exec(t, dbURL, `INSERT INTO table_maintenance_job (table_id, policy_id, types, "trigger", status, fence, job_id) VALUES
			(1, 1, 'compaction', 'cron', 'running', 1, 'local-1')`)
		applied, err := store.Migrate(ctx, dbURL, zaptest.NewLogger(t))
		require.NoError(t, err)
		require.Equal(t, versionsFrom(8), applied)

		s, err := store.Open(ctx, dbURL, nil)
		require.NoError(t, err)
		defer s.Close()
		j, err := s.GetJob(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, [2]string{"local-1", ""}, [2]string{j.JobID, j.Submitter})
		require.NoError(t, s.SetJobID(ctx, 1, 1, "local-2", "local"))
		j, err = s.GetJob(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, [2]string{"local-2", "local"}, [2]string{j.JobID, j.Submitter})
	})

	t.Run("ConcurrentMigratorsApplyEachMigrationOnce", func(t *testing.T) {
		t.Parallel()
		ctx, dbURL := t.Context(), h.newURL(t)
		const nodes = 4
		var (
			wg      sync.WaitGroup
			applied [nodes][]int
			errs    [nodes]error
		)
		start := make(chan struct{})
		for i := range nodes {
			wg.Go(func() {
				<-start
				applied[i], errs[i] = store.Migrate(ctx, dbURL, nil)
			})
		}
		close(start)
		wg.Wait()
		var all []int
		for i := range nodes {
			require.NoError(t, errs[i], "node %d", i)
			all = append(all, applied[i]...)
		}
		slices.Sort(all)
		require.Equal(t, allVersions(), all, "every migration applied by exactly one node")
		require.Equal(t, wantVersions, versionsOf(t, dbURL))
	})

	t.Run("DatabaseAheadIsRefusedAndUntouched", func(t *testing.T) {
		t.Parallel()
		ctx, dbURL := t.Context(), h.newURL(t)
		h.exec(t, dbURL, h.futureVersionTable)

		applied, err := store.Migrate(ctx, dbURL, nil)
		require.ErrorIs(t, err, store.ErrSchemaAhead)
		require.ErrorContains(t, err, "database schema version 99 is newer than this binary")
		require.Empty(t, applied)
		require.False(t, h.tableExists(t, dbURL, "maintained_table"), "nothing may be applied")
		require.Equal(t, []int64{1, 99}, versionsOf(t, dbURL))

		_, err = store.Open(ctx, dbURL, nil)
		require.ErrorIs(t, err, store.ErrSchemaAhead)
		require.ErrorContains(t, err, "upgrade tms")

		current, got, err := store.MigrationStatus(ctx, dbURL)
		require.NoError(t, err)
		require.Equal(t, [2]int{99, latest}, [2]int{current, got})
	})

	t.Run("OpenRefusesUnmigratedDatabase", func(t *testing.T) {
		t.Parallel()
		ctx, dbURL := t.Context(), h.newURL(t)
		if h.name == "sqlite" {
			h.exec(t, dbURL, `CREATE TABLE unrelated (x INTEGER)`) // the file exists but has no schema
		}
		_, err := store.Open(ctx, dbURL, nil)
		require.ErrorIs(t, err, store.ErrSchemaBehind)
		require.ErrorContains(t, err, fmt.Sprintf("database at version 0, binary expects %d", latest))
		require.ErrorContains(t, err, "run `tms-coordinator migrate --db ")

		s, err := store.OpenWith(ctx, dbURL, nil, store.OpenOptions{SkipSchemaCheck: true})
		require.NoError(t, err)
		require.NoError(t, s.Close())
	})
}

func TestOpenMissingSQLiteFileIsNotCreated(t *testing.T) {
	t.Parallel()
	ctx, dbURL := t.Context(), sqliteURL(t)
	path := strings.TrimPrefix(dbURL, "sqlite://")

	_, err := store.Open(ctx, dbURL, nil)
	require.ErrorIs(t, err, store.ErrSchemaBehind)
	require.ErrorContains(t, err, "does not exist")
	current, latest, err := store.MigrationStatus(ctx, dbURL)
	require.NoError(t, err)
	require.Equal(t, [2]int{0, migrations.Latest()}, [2]int{current, latest})
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "neither Open nor MigrationStatus creates the file")

	_, err = store.Migrate(ctx, dbURL, nil)
	require.NoError(t, err)
	_, err = os.Stat(path)
	require.NoError(t, err, "Migrate creates it")
}

func TestOpenRejectsBadURLs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, tc := range []struct{ url, want string }{
		{"mysql://root@localhost/tms", `unsupported database URL scheme "mysql"`},
		{"./tms.db", "has no scheme"},
		{"sqlite://", "needs a file path"},
		{"sqlite://:memory:", "not a plain file path"},
		{"sqlite://./tms.db?mode=ro", "must not contain"},
	} {
		_, err := store.Open(ctx, tc.url, nil)
		require.ErrorIs(t, err, store.ErrInvalidArgument, tc.url)
		require.ErrorContains(t, err, tc.want, tc.url)

		_, err = store.Migrate(ctx, tc.url, nil)
		require.ErrorIs(t, err, store.ErrInvalidArgument, tc.url)
		_, _, err = store.MigrationStatus(ctx, tc.url)
		require.ErrorIs(t, err, store.ErrInvalidArgument, tc.url)
	}
}

func TestOpenUnreachablePostgres(t *testing.T) {
	t.Parallel()
	// The deadline only keeps a broken test from hanging; the store's own
	// connect timeout is what makes it fail.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dbURL := "postgres://postgres:secret@127.0.0.1:1/test?sslmode=disable"

	_, err := store.Open(ctx, dbURL, nil)
	require.Error(t, err)
	require.ErrorContains(t, err, "cannot connect to PostgreSQL at 127.0.0.1:1")
	require.NotContains(t, err.Error(), "secret")

	_, err = store.Migrate(ctx, dbURL, nil)
	require.ErrorContains(t, err, "cannot connect to PostgreSQL at 127.0.0.1:1")
}

// versionsFrom is every migration version from v to the latest, as Migrate
// reports what it applied to a database at v-1.
func versionsFrom(v int) []int {
	var out []int
	for ; v <= migrations.Latest(); v++ {
		out = append(out, v)
	}
	return out
}
