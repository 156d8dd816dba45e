package sampler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/testdata"
)

// testSchema is the schema of the hand-built test tables.
var testSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 2, Name: "region", Type: iceberg.PrimitiveTypes.String},
)

// bundle is what setup returns: a fresh local catalog with namespace "ns".
type bundle struct {
	ctx context.Context
	cat catalog.Catalog
	dir string
}

func setup(t testing.TB) bundle {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := catalogs.OpenLocal(ctx, dir, true)
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	return bundle{ctx: ctx, cat: cat, dir: dir}
}

// create makes table ns.name with testSchema, format v2 and the given extra
// properties.
func (b bundle) create(t testing.TB, name string, props iceberg.Properties, opts ...catalog.CreateTableOpt) *table.Table {
	t.Helper()
	all := iceberg.Properties{"format-version": "2"}
	for k, v := range props {
		all[k] = v
	}
	opts = append(opts, catalog.WithProperties(all))
	tbl, err := b.cat.CreateTable(b.ctx, table.Identifier{"ns", name}, testSchema, opts...)
	require.NoError(t, err)
	return tbl
}

// appendJSON appends the rows (a JSON array of {"id":…,"region":…}) as one
// commit and returns the new table.
func (b bundle) appendJSON(t testing.TB, tbl *table.Table, rows string) *table.Table {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	require.NoError(t, err)
	at, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{rows})
	require.NoError(t, err)
	defer at.Release()
	tbl, err = tbl.AppendTable(b.ctx, at, 1<<20, nil)
	require.NoError(t, err)
	return tbl
}

// addFakeFiles commits data files of the given sizes (and 10 records each)
// without writing them: the paths do not exist, which also proves that the
// sampler never opens a data file.
func (b bundle) addFakeFiles(t testing.TB, tbl *table.Table, sizes ...int64) *table.Table {
	t.Helper()
	files := make([]iceberg.DataFile, len(sizes))
	snap := int64(0)
	if s := tbl.CurrentSnapshot(); s != nil {
		snap = s.SnapshotID
	}
	for i, size := range sizes {
		path := fmt.Sprintf("%s/data/missing-%d-%d.parquet", tbl.Location(), snap, i)
		bld, err := iceberg.NewDataFileBuilder(tbl.Spec(), iceberg.EntryContentData, path,
			iceberg.ParquetFile, nil, nil, nil, 10, size)
		require.NoError(t, err)
		files[i] = bld.Build()
	}
	tx := tbl.NewTransaction()
	require.NoError(t, tx.AddDataFiles(b.ctx, files, nil))
	tbl, err := tx.Commit(b.ctx)
	require.NoError(t, err)
	return tbl
}

// deleteWhere deletes rows matching filter (merge-on-read tables get a
// position delete file).
func (b bundle) deleteWhere(t testing.TB, tbl *table.Table, filter iceberg.BooleanExpression) *table.Table {
	t.Helper()
	tbl, err := tbl.Delete(b.ctx, filter, nil)
	require.NoError(t, err)
	return tbl
}

// equalityDelete commits one equality delete file removing the given ids.
func (b bundle) equalityDelete(t testing.TB, tbl *table.Table, ids ...int64) *table.Table {
	t.Helper()
	tbl, err := testdata.EqualityDeleteIDs(b.ctx, tbl, ids...)
	require.NoError(t, err)
	return tbl
}

// liveEntries reads every live manifest entry of snap the plain iceberg-go
// way (full decode, sequential): the independent reference the tests compare
// the sampler with.
func liveEntries(t testing.TB, tbl *table.Table, snap *table.Snapshot) ([]iceberg.ManifestFile, []iceberg.ManifestEntry) {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	require.NoError(t, err)
	manifests, err := snap.Manifests(fs)
	require.NoError(t, err)
	var entries []iceberg.ManifestEntry
	for _, m := range manifests {
		es, err := m.FetchEntries(fs, true)
		require.NoError(t, err)
		entries = append(entries, es...)
	}
	return manifests, entries
}

// localPath turns a file:// location into a path.
func localPath(loc string) string {
	return strings.TrimPrefix(loc, "file://")
}
