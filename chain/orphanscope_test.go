//go:build unix

package chain

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/testdata"
)

// scopeWarehouse is a fresh local catalog whose tables the scope tests lay
// out: dir holds catalog.db, warehouse its "warehouse" property.
type scopeWarehouse struct {
	dir, warehouse string
	cat            catalog.Catalog
}

func newScopeWarehouse(t *testing.T) scopeWarehouse {
	t.Helper()
	dir := t.TempDir()
	cat, err := catalogs.OpenLocal(t.Context(), dir, true)
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(t.Context(), table.Identifier{"ns"}, nil))
	props, err := catalogs.LocalProps(dir)
	require.NoError(t, err)
	return scopeWarehouse{dir: dir, warehouse: props["warehouse"], cat: cat}
}

// table creates ns.name with the recipe schema and appends three data
// files of 20 rows each (unless appends is 0), and returns it as a bundle.
func (w scopeWarehouse) table(t *testing.T, name string, appends int, opts ...catalog.CreateTableOpt) bundle {
	t.Helper()
	ident := table.Identifier{"ns", name}
	tbl, err := w.cat.CreateTable(t.Context(), ident, testdata.Schema(), opts...)
	require.NoError(t, err)
	if appends > 0 {
		_, err = testdata.FillSmallFiles(t.Context(), tbl, appends, 20)
		require.NoError(t, err)
	}
	return bundle{ctx: t.Context(), dir: w.dir, cat: w.cat, ident: ident, opts: Options{Log: zaptest.NewLogger(t)}}
}

// cleanWith runs orphan cleanup with older-than 1h and the extra policy
// fields in extra (JSON object members, "" for none).
func cleanWith(t *testing.T, b bundle, extra string) TypeReport {
	t.Helper()
	body := `"older-than": "1h"`
	if extra != "" {
		body += ", " + extra
	}
	return b.run(t, Step{Type: OrphanCleanup, Policy: policyJSON(`{"rewriteOptions": {` + body + `}}`)}).Types[0]
}

// orphanDetail returns the plan of an orphan-cleanup report.
func orphanDetail(t *testing.T, tr TypeReport) *OrphanPlan {
	t.Helper()
	d, ok := tr.Detail.(*OrphanPlan)
	require.True(t, ok, "detail %T (%s %s)", tr.Detail, tr.Reason, tr.Err)
	return d
}

// plantWriterOrphans plants a data file and a manifest a failed writer
// would leave in the table's data/ and metadata/ folders and returns them.
func plantWriterOrphans(t *testing.T, root string) []string {
	t.Helper()
	out := []string{
		filepath.Join(root, "data", "00099-9-7e570000-0000-4000-8000-00000000000a-00001.parquet"),
		filepath.Join(root, "metadata", "7e570000-0000-4000-8000-00000000000b-m0.avro"),
	}
	for _, p := range out {
		plant(t, p)
	}
	return out
}

// TestOrphanCleanupLeavesTableInsideLocation: a table created with a
// LOCATION directly under another table's location (not inside its data/
// folder). Cleanup of the outer table deletes its own planted orphans and
// not one file of the inner table, which still reads the same rows; the
// detail lists only the outer table's data and metadata folders and counts
// the inner table's files as left alone.
func TestOrphanCleanupLeavesTableInsideLocation(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	outer := w.table(t, "outer", 3)
	outerRoot := localPath(outer.load(t).Location())
	inner := w.table(t, "inner", 3, catalog.WithLocation("file://"+filepath.Join(outerRoot, "inner")))
	innerRoot := localPath(inner.load(t).Location())
	require.True(t, strings.HasPrefix(innerRoot, outerRoot+"/"), "%s is under %s", innerRoot, outerRoot)
	innerRows := inner.rows(t)
	require.Len(t, innerRows, 60)
	innerSum := inner.sum(t)
	outerSum := outer.sum(t)

	planted := plantWriterOrphans(t, outerRoot)
	ageTree(t, outerRoot)
	innerFiles := entries(t, innerRoot)
	require.GreaterOrEqual(t, len(innerFiles), 3+3+1, "data files, manifests, manifest lists, metadata")
	before := entries(t, outerRoot)

	tr := cleanWith(t, outer, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, planted, gone(before, entries(t, outerRoot)), "deleted exactly the planted orphans")
	require.Equal(t, innerFiles, entries(t, innerRoot), "no file of the inner table is deleted")
	require.Equal(t, innerRows, inner.rows(t), "the inner table loads with the same rows")
	require.Equal(t, innerSum, inner.sum(t))
	require.Equal(t, outerSum, outer.sum(t))

	d := orphanDetail(t, tr)
	require.Equal(t, policy.OrphanScopeTablePaths, d.Scope)
	require.Equal(t, []string{"file://" + outerRoot + "/data", "file://" + outerRoot + "/metadata"}, d.ListedRoots,
		"the referenced data/ and metadata/ folders are listed once each")
	require.NotNil(t, d.OutsideTablePaths)
	require.Zero(t, *d.OutsideTablePaths, "the inner table's files are another table's, not files outside the table's paths")
	require.Len(t, d.OtherTables, 1)
	require.Equal(t, "file://"+innerRoot, d.OtherTables[0].Root)
	require.Equal(t, len(innerFiles), d.OtherTables[0].Files, "every file of the inner table is counted as left alone")
	require.Contains(t, d.OtherTables[0].Why, "table-uuid "+inner.load(t).Metadata().TableUUID().String())
	require.Contains(t, tr.Reason, "; "+strconv.Itoa(len(innerFiles))+" files of another table under the table's folders, left alone")
}

// TestOrphanCleanupWarehouseRootTable: a table whose location is the
// catalog's warehouse, with two ordinary tables in their default folders
// below it. With the warehouse unknown, cleanup lists the location once
// and classifies; with it known (Options.Warehouse), it lists only the
// table's own folders and does not count the rest. Either way it deletes
// the root table's planted orphans only and the other tables read the same
// rows. Scope location is refused for it, naming why, and deletes nothing.
func TestOrphanCleanupWarehouseRootTable(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	rootTbl := w.table(t, "root", 2, catalog.WithLocation(w.warehouse))
	whRoot := localPath(w.warehouse)
	require.Equal(t, whRoot, localPath(rootTbl.load(t).Location()))
	others := []bundle{w.table(t, "a", 3), w.table(t, "b", 2)}
	var rowsBefore [][]string
	var otherFiles []map[string]bool
	for _, o := range others {
		loc := localPath(o.load(t).Location())
		require.True(t, strings.HasPrefix(loc, whRoot+"/"), "%s is below the warehouse", loc)
		require.False(t, strings.HasPrefix(loc, whRoot+"/data/") || strings.HasPrefix(loc, whRoot+"/metadata/"), loc)
		rowsBefore = append(rowsBefore, o.rows(t))
		otherFiles = append(otherFiles, entries(t, loc))
	}
	checkOthers := func() {
		t.Helper()
		for i, o := range others {
			require.Equal(t, otherFiles[i], entries(t, localPath(o.load(t).Location())), "no file of %v is deleted", o.ident)
			require.Equal(t, rowsBefore[i], o.rows(t), "%v reads the same rows", o.ident)
		}
	}

	// The warehouse unknown: the location is listed once and classified.
	planted := plantWriterOrphans(t, whRoot)
	ageTree(t, whRoot)
	before := entries(t, whRoot)
	tr := cleanWith(t, rootTbl, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, planted, gone(before, entries(t, whRoot)))
	checkOthers()
	d := orphanDetail(t, tr)
	require.NotNil(t, d.OutsideTablePaths)
	require.Zero(t, *d.OutsideTablePaths)
	require.Len(t, d.OtherTables, 2, "the two tables below the warehouse root are found as other tables")
	require.Equal(t, len(otherFiles[0])+len(otherFiles[1]), d.OtherTables[0].Files+d.OtherTables[1].Files)

	// The warehouse known: only the table's own folders are listed.
	rootTbl.opts.Warehouse = w.warehouse
	planted = plantWriterOrphans(t, whRoot)
	ageTree(t, whRoot)
	before = entries(t, whRoot)
	tr = cleanWith(t, rootTbl, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, planted, gone(before, entries(t, whRoot)))
	checkOthers()
	d = orphanDetail(t, tr)
	require.Nil(t, d.OutsideTablePaths, "a table at the warehouse root does not list the warehouse to count")
	require.Equal(t, []string{w.warehouse + "/data", w.warehouse + "/metadata"}, d.ListedRoots)

	// Scope location: refused, nothing deleted.
	planted = plantWriterOrphans(t, whRoot)
	ageTree(t, whRoot)
	before = entries(t, whRoot)
	tr = cleanWith(t, rootTbl, `"scope": "location"`)
	require.Equal(t, Failed, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Err, "scope location is refused for a table at the root of the catalog's warehouse")
	require.Empty(t, gone(before, entries(t, whRoot)), "nothing deleted")
	checkOthers()
}

// TestOrphanCleanupDataPathElsewhere: a table whose write.data.path lies
// outside its location. Its data orphan there is deleted; a file under the
// location outside the table's paths is left alone and counted. Scope
// location is refused for it, naming the data path.
func TestOrphanCleanupDataPathElsewhere(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	elsewhere := filepath.Join(t.TempDir(), "t-data")
	b := w.table(t, "t", 3, catalog.WithProperties(iceberg.Properties{table.WriteDataPathKey: "file://" + elsewhere}))
	root := localPath(b.load(t).Location())
	rowsBefore := b.rows(t)
	dataFiles := entries(t, elsewhere)
	require.Len(t, dataFiles, 3, "the data files live in the data path")
	orphan := filepath.Join(elsewhere, "00099-9-7e570000-0000-4000-8000-00000000000c-00001.parquet")
	plant(t, orphan)
	foreign := filepath.Join(root, "other", "00001-0-7e570000-0000-4000-8000-00000000000d-00001.parquet")
	plant(t, foreign)
	ageTree(t, root, elsewhere)
	before := entries(t, root, elsewhere)

	tr := cleanWith(t, b, `"scope": "location"`)
	require.Equal(t, Failed, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Err, "write.data.path file://"+elsewhere+" lies outside the table location")
	require.Empty(t, gone(before, entries(t, root, elsewhere)), "nothing deleted")

	tr = cleanWith(t, b, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.Equal(t, []string{orphan}, gone(before, entries(t, root, elsewhere)))
	require.FileExists(t, foreign)
	d := orphanDetail(t, tr)
	require.Contains(t, d.ListedRoots, "file://"+elsewhere)
	require.Equal(t, 1, *d.OutsideTablePaths)
	require.Equal(t, rowsBefore, b.rows(t))
}

// TestOrphanCleanupLeavesExportFolder: a non-Iceberg folder under a
// table's location is left alone and counted, while the recipe's planted
// orphans (in data/ and metadata/) are deleted. With scope location the
// cleanup lists the whole location as before and deletes both the export
// and a planted orphan under <location>/other/.
func TestOrphanCleanupLeavesExportFolder(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	sum := b.sum(t)
	root := localPath(b.load(t).Location())
	export := filepath.Join(root, "export", "part-0.csv")
	plant(t, export)
	other := filepath.Join(root, "other", "00001-0-7e570000-0000-4000-8000-00000000000e-00001.parquet")
	plant(t, other)
	ageTree(t, root)
	before := entries(t, root)

	tr := cleanWith(t, b, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, recipeOrphans(t, b), gone(before, entries(t, root)), "deleted exactly the recipe's orphans")
	require.FileExists(t, export)
	require.FileExists(t, other)
	require.Equal(t, 2, *orphanDetail(t, tr).OutsideTablePaths)
	require.Contains(t, tr.Reason, "; 2 files under the location outside the table's paths, left alone")

	tr = cleanWith(t, b, `"scope": "location"`)
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.NoFileExists(t, export)
	require.NoFileExists(t, other)
	d := orphanDetail(t, tr)
	require.Equal(t, policy.OrphanScopeLocation, d.Scope)
	require.Equal(t, []string{"file://" + root}, d.ListedRoots)
	require.Nil(t, d.OutsideTablePaths)
	require.Len(t, d.Files, 2)
	require.Equal(t, sum, b.sum(t))
}

// TestOrphanCleanupGCDisabled: a table with gc.enabled=false is skipped,
// in a dry run and for real, naming the property; nothing is listed (no
// detail) and nothing deleted.
func TestOrphanCleanupGCDisabled(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	b := w.table(t, "t", 2, catalog.WithProperties(iceberg.Properties{"gc.enabled": "false"}))
	root := localPath(b.load(t).Location())
	plantWriterOrphans(t, root)
	ageTree(t, root)
	before := entries(t, root)
	for _, dry := range []bool{true, false} {
		b.opts.DryRun = dry
		tr := cleanWith(t, b, "")
		require.Equal(t, Skipped, tr.Outcome, tr.Err)
		require.Equal(t, "table property gc.enabled=false: no file of this table may be deleted", tr.Reason)
		require.Nil(t, tr.Detail, "nothing listed")
		require.Equal(t, before, entries(t, root), "nothing deleted")
	}
}

// TestOrphanCleanupReferencedFolder: a data file the metadata names in
// <location>/extra/ (written while write.data.path pointed there) makes
// extra/ one of the table's folders: its orphan is deleted, while a file in
// a folder the metadata does not reference is left alone. A table with no
// data folder yet is simply empty there, not an error.
func TestOrphanCleanupReferencedFolder(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	b := w.table(t, "t", 0)
	tbl := b.load(t)
	root := localPath(tbl.Location())
	_, err := os.Stat(filepath.Join(root, "data"))
	require.ErrorIs(t, err, os.ErrNotExist, "no data folder yet")
	tr := cleanWith(t, b, "")
	require.Equal(t, Skipped, tr.Outcome, tr.Err)
	require.Contains(t, tr.Reason, "no orphan files older than 1h")

	tx := tbl.NewTransaction()
	require.NoError(t, tx.SetProperties(iceberg.Properties{table.WriteDataPathKey: tbl.Location() + "/extra"}))
	tbl, err = tx.Commit(t.Context())
	require.NoError(t, err)
	tbl, err = testdata.FillSmallFiles(t.Context(), tbl, 2, 20)
	require.NoError(t, err)
	tx = tbl.NewTransaction()
	require.NoError(t, tx.RemoveProperties([]string{table.WriteDataPathKey}))
	tbl, err = tx.Commit(t.Context())
	require.NoError(t, err)
	_, err = testdata.FillSmallFiles(t.Context(), tbl, 1, 20)
	require.NoError(t, err)
	rowsBefore := b.rows(t)
	require.Len(t, rowsBefore, 60)
	require.Len(t, entries(t, filepath.Join(root, "extra")), 2)

	orphan := filepath.Join(root, "extra", "00099-9-7e570000-0000-4000-8000-00000000000f-00001.parquet")
	plant(t, orphan)
	stray := filepath.Join(root, "notes", "00099-9-7e570000-0000-4000-8000-000000000010-00001.parquet")
	plant(t, stray)
	ageTree(t, root)
	before := entries(t, root)
	tr = cleanWith(t, b, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.Equal(t, []string{orphan}, gone(before, entries(t, root)))
	d := orphanDetail(t, tr)
	require.Equal(t, []string{"file://" + root + "/data", "file://" + root + "/extra", "file://" + root + "/metadata"}, d.ListedRoots)
	require.Equal(t, 1, *d.OutsideTablePaths)
	require.Equal(t, rowsBefore, b.rows(t))
}

// TestOrphanRootSet: nested roots are kept once (a metadata path under the
// data path, a referenced folder under data/), and rootKind recognises a
// bucket root in both spellings, the filesystem root and the warehouse.
func TestOrphanRootSet(t *testing.T) {
	t.Parallel()
	c := testCanon(t, nil, nil, "/")
	root := func(p string) orphanRoot { return orphanRoot{raw: p, canon: c.Canon(p)} }
	s := newRootSet([]orphanRoot{root("s3://b/t/data/meta"), root("s3://b/t/data"), root("s3a://b/t/data/"), root("s3://b/t/metadata")})
	var got []string
	for _, r := range s.roots {
		got = append(got, r.raw)
	}
	require.Equal(t, []string{"s3://b/t/data", "s3://b/t/metadata"}, got)
	r, ok := s.under(c.Canon("s3://b/t/data/meta/x.avro"))
	require.True(t, ok)
	require.Equal(t, "s3://b/t/data", r.raw)
	_, ok = s.under(c.Canon("s3://b/t/inner/data/x.parquet"))
	require.False(t, ok)

	for _, loc := range []string{"s3://bucket", "s3://bucket/", "/", "file:///"} {
		require.NotEmpty(t, rootKind(loc, c, ""), loc)
		require.ErrorContains(t, checkLocationScope(loc, nil, c, ""), "scope location is refused for a table at the root of ", loc)
	}
	require.Empty(t, rootKind("s3://bucket/t", c, ""))
	require.Contains(t, rootKind("file:///wh/", c, "/wh"), "warehouse")
	require.Empty(t, rootKind("/lake", c, "lake"), "a warehouse name is not a location")
}

// TestOrphanCleanupUnlistableRoot: a root that exists but cannot be listed
// (write.data.path names a file, not a folder) fails the type with an
// error naming the path, and nothing is deleted; only a root that does not
// exist is empty.
func TestOrphanCleanupUnlistableRoot(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	notDir := filepath.Join(t.TempDir(), "not-a-folder")
	plant(t, notDir)
	b := w.table(t, "t", 0, catalog.WithProperties(iceberg.Properties{table.WriteDataPathKey: "file://" + notDir}))
	root := localPath(b.load(t).Location())
	orphan := filepath.Join(root, "metadata", "7e570000-0000-4000-8000-000000000012-m0.avro")
	plant(t, orphan)
	ageTree(t, root)
	tr := cleanWith(t, b, "")
	require.Equal(t, Failed, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Err, "list file://"+notDir+": ")
	require.FileExists(t, orphan, "nothing deleted")
	require.FileExists(t, notDir)
}
