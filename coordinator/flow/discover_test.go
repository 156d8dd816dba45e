package flow_test

import (
	"io"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
	"github.com/tms-dev/tms/testdata"
)

// TestDiscover registers the tables under a catalog, a namespace (with a
// nested namespace below it) and one table, on both backends; discovering
// again returns the same rows, and a dropped and recreated table becomes a
// new row.
func TestDiscover(t *testing.T) {
	dir := testdata.BuildAdjustedT(t, func(r *testdata.Recipe) {
		r.Appends, r.RowsPerAppend, r.Orphans = 1, 10, 0
		r.PositionDeletes, r.EqualityDeletes = 0, 0
	}, "tms.small_files", "tms.partitioned")
	ctx := t.Context()
	cat, err := catalogs.OpenLocal(ctx, dir, false)
	require.NoError(t, err)
	t.Cleanup(func() { cat.(io.Closer).Close() })

	// A nested namespace with one table, under tms.
	nested := table.Identifier{"tms", "sub"}
	require.NoError(t, cat.CreateNamespace(ctx, nested, nil))
	_, err = cat.CreateTable(ctx, append(nested, "t"), testdata.Schema())
	require.NoError(t, err)
	// A table in another top-level namespace, outside tms.
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"other"}, nil))
	_, err = cat.CreateTable(ctx, table.Identifier{"other", "x"}, testdata.Schema())
	require.NoError(t, err)

	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		t.Run(backend, func(t *testing.T) {
			url := testdb.URL(t, backend)
			_, err := store.Migrate(ctx, url, zaptest.NewLogger(t))
			require.NoError(t, err)
			st, err := store.Open(ctx, url, zaptest.NewLogger(t))
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			names := func(rep flow.DiscoverReport) []string {
				var out []string
				for _, tb := range rep.Tables {
					require.Equal(t, "local", tb.Catalog)
					require.NotEmpty(t, tb.UUID)
					out = append(out, tb.Namespace+"."+tb.Name)
				}
				return out
			}
			log := zaptest.NewLogger(t)

			ns, err := flow.Discover(ctx, st, cat, flow.Object{Catalog: "local", Namespace: []string{"tms"}}, log)
			require.NoError(t, err)
			require.ElementsMatch(t, []string{"tms.small_files", "tms.partitioned", "tms.sub.t"}, names(ns))
			require.Equal(t, 2, ns.Namespaces)

			all, err := flow.Discover(ctx, st, cat, flow.Object{Catalog: "local"}, log)
			require.NoError(t, err)
			require.ElementsMatch(t, []string{"tms.small_files", "tms.partitioned", "tms.sub.t", "other.x"}, names(all))
			ids := map[string]int64{}
			for _, tb := range all.Tables {
				ids[tb.Namespace+"."+tb.Name] = tb.ID
			}
			for _, tb := range ns.Tables {
				require.Equal(t, ids[tb.Namespace+"."+tb.Name], tb.ID, "rediscovery must return the same row")
			}

			one, err := flow.Discover(ctx, st, cat, flow.Object{Catalog: "local", Namespace: []string{"tms", "sub"}, Table: "t"}, log)
			require.NoError(t, err)
			require.Len(t, one.Tables, 1)
			require.Equal(t, ids["tms.sub.t"], one.Tables[0].ID)

			// Dropped and recreated: a new incarnation, a new row.
			require.NoError(t, cat.DropTable(ctx, table.Identifier{"tms", "sub", "t"}))
			_, err = cat.CreateTable(ctx, table.Identifier{"tms", "sub", "t"}, testdata.Schema())
			require.NoError(t, err)
			again, err := flow.Discover(ctx, st, cat, flow.Object{Catalog: "local", Namespace: []string{"tms", "sub"}, Table: "t"}, log)
			require.NoError(t, err)
			require.Len(t, again.Tables, 1)
			require.NotEqual(t, ids["tms.sub.t"], again.Tables[0].ID)
			live, err := st.FindTable(ctx, "local", "tms.sub", "t")
			require.NoError(t, err)
			require.Equal(t, again.Tables[0].ID, live.ID)

			// Objects that do not exist are errors naming them.
			_, err = flow.Discover(ctx, st, cat, flow.Object{Catalog: "local", Namespace: []string{"nope"}}, log)
			require.ErrorContains(t, err, "local.nope")
			_, err = flow.Discover(ctx, st, cat, flow.Object{Catalog: "local", Namespace: []string{"tms"}, Table: "nope"}, log)
			require.ErrorIs(t, err, catalog.ErrNoSuchTable)
			require.ErrorContains(t, err, "local.tms.nope")
		})
	}
}
