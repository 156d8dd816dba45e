package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
	"github.com/tms-dev/tms/testdata"
)

// smallFilesTable (re)creates ident in the local catalog at dir as a fresh
// table of n small files and returns its table-uuid.
func smallFilesTable(t *testing.T, dir string, ident table.Identifier, n int, drop bool) string {
	t.Helper()
	ctx := context.Background()
	cat, err := catalogs.OpenLocal(ctx, dir, true)
	require.NoError(t, err)
	defer cat.(catalog.Closer).Close()
	if drop {
		require.NoError(t, cat.DropTable(ctx, ident))
	} else if err := cat.CreateNamespace(ctx, ident[:1], nil); err != nil {
		require.ErrorIs(t, err, catalog.ErrNamespaceAlreadyExists)
	}
	tbl, err := cat.CreateTable(ctx, ident, testdata.Schema())
	require.NoError(t, err)
	tbl, err = testdata.FillSmallFiles(ctx, tbl, n, 20)
	require.NoError(t, err)
	return tbl.Metadata().TableUUID().String()
}

// TestServeRecreatedTable drops and recreates a maintained table under the
// same name while serve runs: the new table is registered as a new ledger
// row (the old row's history stays readable) and maintained again, both
// under a table attachment (sync loads the table at every sync) and under
// a namespace attachment (the runner that finds the table-uuid changed
// registers the new table and the next instant runs on it).
func TestServeRecreatedTable(t *testing.T) {
	t.Parallel()
	for _, object := range []string{"local.rec.t", "local.rec"} {
		t.Run(object, func(t *testing.T) {
			t.Parallel()
			db := testdb.SQLiteURL(t)
			dir := t.TempDir()
			ident := table.Identifier{"rec", "t"}
			oldUUID := smallFilesTable(t, dir, ident, 6, false)
			code, _, stderr := run(t, "migrate", "--db", db)
			require.Equal(t, cli.ExitOK, code, stderr)
			file := filepath.Join(t.TempDir(), "p.json")
			require.NoError(t, os.WriteFile(file, []byte(`{"schedule": {"crontab": "*/2 * * * * *"}, "minIntervalMs": 0}`), 0o600))
			code, _, stderr = run(t, "policy", "create", "--db", db, "--name", "p", "--type", "compaction", "--content-file", file)
			require.Equal(t, cli.ExitOK, code, stderr)
			code, _, stderr = run(t, "policy", "attach", "--db", db, "--name", "p", "--object", object)
			require.Equal(t, cli.ExitOK, code, stderr)
			n := serve(t, db, dir)
			st := ledger(t, db)
			old := registered(t, st, "rec.t")
			require.Equal(t, oldUUID, old.UUID)
			compacted := func(id int64) bool {
				jobs, err := st.ListJobs(t.Context(), id, 50)
				require.NoError(t, err)
				return slices.ContainsFunc(jobs, func(j store.Job) bool {
					return j.Status == store.StatusSucceeded && j.AfterSnapshotID != nil && *j.AfterSnapshotID != *j.BeforeSnapshotID
				})
			}
			testkit.Eventually(t, time.Minute, "the first table to be compacted", func() bool { return compacted(old.ID) })

			newUUID := smallFilesTable(t, dir, ident, 6, true)
			var cur store.Table
			testkit.Eventually(t, 2*time.Minute, "the recreated table to be registered", func() bool {
				var err error
				cur, err = st.FindTable(t.Context(), "local", "rec", "t")
				require.NoError(t, err)
				return cur.UUID == newUUID
			})
			require.NotEqual(t, old.ID, cur.ID, "a new incarnation is a new row")
			testkit.Eventually(t, time.Minute, "the recreated table to be compacted", func() bool { return compacted(cur.ID) })
			n.stop(t)

			oldJobs, err := st.ListJobs(t.Context(), old.ID, 100)
			require.NoError(t, err)
			require.True(t, compacted(old.ID), "the old table's history stays")
			for _, j := range oldJobs {
				if j.Status == store.StatusFailed {
					require.Contains(t, j.Error, "dropped and recreated", "job %d", j.ID)
				}
				require.False(t, j.InFlight())
			}
			got, err := st.GetTable(t.Context(), old.ID)
			require.NoError(t, err)
			require.Equal(t, oldUUID, got.UUID)
		})
	}
}
