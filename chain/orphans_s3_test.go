package chain

import (
	"context"
	stdfs "io/fs"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/seaweedtest"
	"github.com/tms-dev/tms/testdata"
)

// On S3 orphan cleanup lists a table flat (blobIO finds the gocloud FileIO
// under the chain's recording wrapper) and sees exactly the files a
// directory walk sees, with the same sizes and modification times: data
// files in partition folders, metadata, a hidden marker, and a nested
// folder; directory markers are not files.
func TestListFilesFlatOnS3(t *testing.T) {
	t.Parallel()
	s := seaweedtest.Start(t)
	ctx := context.Background()
	sc := testdata.Schema()
	cf, _ := sc.FindFieldByName("category")
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{cf.ID}, FieldID: 1000, Name: "category", Transform: iceberg.IdentityTransform{}})
	_, tbl := seaweedtest.CreateTable(t, s.Catalog(t), "listing", sc, catalog.WithPartitionSpec(&spec))
	tbl, err := testdata.FillSmallFiles(ctx, tbl, 12, 20)
	require.NoError(t, err)
	raw, err := tbl.FS(ctx)
	require.NoError(t, err)
	for _, rel := range []string{"data/category=c1/_SUCCESS", "data/category=c2/nested/00000-0-x.parquet"} {
		require.NoError(t, raw.(iceio.WriteFileIO).WriteFile(tbl.Location()+"/"+rel, []byte("x")))
	}
	wrapped := recordingIO{IO: raw, rec: &recorder{}}
	_, ok := blobIO(wrapped)
	require.True(t, ok, "the gocloud FileIO is found under the recording wrapper")

	type entry struct {
		size  int64
		mtime time.Time
	}
	flat := map[string]entry{}
	require.NoError(t, listFiles(ctx, wrapped, tbl.Location(), func(string) bool { return false }, nil, func(p string, size int64, mtime time.Time) {
		flat[p] = entry{size, mtime.Truncate(time.Second)}
	}))
	walked := map[string]entry{}
	require.NoError(t, raw.(iceio.ListableIO).WalkDir(tbl.Location(), func(p string, d stdfs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		walked[p] = entry{info.Size(), info.ModTime().Truncate(time.Second)}
		return nil
	}))
	require.Equal(t, walked, flat)
	var names []string
	for p := range flat {
		names = append(names, p)
	}
	sort.Strings(names)
	require.Contains(t, names, tbl.Location()+"/data/category=c1/_SUCCESS")
	require.Contains(t, names, tbl.Location()+"/data/category=c2/nested/00000-0-x.parquet")
	require.Contains(t, names, tbl.MetadataLocation())
	require.Greater(t, len(names), 12+2, "data files, both planted files and the metadata")
}

// On S3 with the default scope, orphan cleanup deletes a planted orphan
// in the table's data path and leaves alone a non-Iceberg object under the
// table's location (an export next to the table), which the flat listing
// of the location sees and the detail counts; the table reads the same
// rows. SeaweedFS's table bucket refuses objects under a table outside
// data/ and metadata/, and objects named like a CSV file, so the table
// writes to data/rows (write.data.path) and the export, without an
// extension, lies in data/export/.
func TestOrphanCleanupScopeOnS3(t *testing.T) {
	t.Parallel()
	s := seaweedtest.Start(t)
	ctx := context.Background()
	cat := s.Catalog(t)
	ident, tbl := seaweedtest.CreateTable(t, cat, "scoped", testdata.Schema())
	tx := tbl.NewTransaction()
	require.NoError(t, tx.SetProperties(iceberg.Properties{table.WriteDataPathKey: tbl.Location() + "/data/rows"}))
	tbl, err := tx.Commit(ctx)
	require.NoError(t, err)
	tbl, err = testdata.FillSmallFiles(ctx, tbl, 3, 20)
	require.NoError(t, err)
	fsys, err := tbl.FS(ctx)
	require.NoError(t, err)
	orphan := tbl.Location() + "/data/rows/00099-9-7e570000-0000-4000-8000-000000000011-00001.parquet"
	export := tbl.Location() + "/data/export/part-00000"
	admin, err := iceio.LoadFS(ctx, s.Props(), tbl.Location())
	require.NoError(t, err)
	for _, p := range []string{orphan, export} {
		require.NoError(t, admin.(iceio.WriteFileIO).WriteFile(p, []byte("not referenced")), p)
	}
	var all []string
	require.NoError(t, listFiles(ctx, fsys.(iceio.ListableIO), tbl.Location(), func(string) bool { return false }, nil, func(p string, _ int64, _ time.Time) {
		all = append(all, p)
	}))
	s.SetModTime(t, time.Now().Add(-3*time.Hour), all...)
	idsBefore := scanS3IDs(t, cat, ident)

	rep, err := Run(ctx, cat, ident, []Step{{Type: OrphanCleanup, Policy: policyJSON(`{"rewriteOptions": {"older-than": "1h"}}`)}}, Options{})
	require.NoError(t, err)
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Err)
	d := tr.Detail.(*OrphanPlan)
	require.Equal(t, []OrphanFile{{Path: orphan, SizeBytes: int64(len("not referenced"))}}, d.Files)
	require.Equal(t, 1, *d.OutsideTablePaths)
	require.Equal(t, []string{tbl.Location() + "/data/rows", tbl.Location() + "/metadata"}, d.ListedRoots)
	var after []string
	require.NoError(t, listFiles(ctx, fsys.(iceio.ListableIO), tbl.Location(), func(string) bool { return false }, nil, func(p string, _ int64, _ time.Time) {
		after = append(after, p)
	}))
	require.NotContains(t, after, orphan)
	require.Contains(t, after, export)
	require.Len(t, after, len(all)-1, "only the orphan is deleted")
	require.Equal(t, idsBefore, scanS3IDs(t, cat, ident))
}

// scanS3IDs is the sorted id column of a plain iceberg-go scan of ident.
func scanS3IDs(t *testing.T, cat catalog.Catalog, ident table.Identifier) []int64 {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), ident)
	require.NoError(t, err)
	return sortedIDs(t, tbl)
}

// TestOrphanCleanupOtherTableOnS3: on the flat S3 listing, a table created
// inside this table's data/ folder is found by its metadata folder and left
// whole, and this table's planted orphan is deleted. Both tables live in an
// ordinary bucket under a SQL catalog (the table bucket refuses a table
// inside another's data/); the inner table reads the same rows by a plain
// iceberg-go scan.
func TestOrphanCleanupOtherTableOnS3(t *testing.T) {
	t.Parallel()
	s := seaweedtest.Start(t)
	ctx := context.Background()
	cat, _ := s.SQLCatalog(t, t.TempDir(), s.PlainBucket(t, "plain")+"/warehouse")
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	ident, innerIdent := table.Identifier{"ns", "outer"}, table.Identifier{"ns", "inner"}
	tbl, err := cat.CreateTable(ctx, ident, testdata.Schema())
	require.NoError(t, err)
	tbl, err = testdata.FillSmallFiles(ctx, tbl, 3, 20)
	require.NoError(t, err)
	inner, err := cat.CreateTable(ctx, innerIdent, testdata.Schema(), catalog.WithLocation(tbl.Location()+"/data/inner"))
	require.NoError(t, err)
	_, err = testdata.FillSmallFiles(ctx, inner, 3, 20)
	require.NoError(t, err)

	fsys, err := tbl.FS(ctx)
	require.NoError(t, err)
	list := func() []string {
		var out []string
		require.NoError(t, listFiles(ctx, fsys.(iceio.ListableIO), tbl.Location(), func(string) bool { return false }, nil, func(p string, _ int64, _ time.Time) {
			out = append(out, p)
		}))
		sort.Strings(out)
		return out
	}
	orphan := tbl.Location() + "/data/00099-9-7e570000-0000-4000-8000-000000000012-00001.parquet"
	require.NoError(t, fsys.(iceio.WriteFileIO).WriteFile(orphan, []byte("not referenced")))
	all := list()
	s.SetModTime(t, time.Now().Add(-3*time.Hour), all...)
	var innerFiles []string
	for _, p := range all {
		if strings.HasPrefix(p, tbl.Location()+"/data/inner/") {
			innerFiles = append(innerFiles, p)
		}
	}
	require.GreaterOrEqual(t, len(innerFiles), 3+1+1, "data files, a manifest list, metadata")
	idsBefore, innerBefore := scanS3IDs(t, cat, ident), scanS3IDs(t, cat, innerIdent)

	rep, err := Run(ctx, cat, ident, []Step{{Type: OrphanCleanup, Policy: policyJSON(`{"rewriteOptions": {"older-than": "1h"}}`)}}, Options{})
	require.NoError(t, err)
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Err)
	d := tr.Detail.(*OrphanPlan)
	require.Equal(t, []OrphanFile{{Path: orphan, SizeBytes: int64(len("not referenced"))}}, d.Files)
	require.Len(t, d.OtherTables, 1)
	require.Equal(t, tbl.Location()+"/data/inner", d.OtherTables[0].Root)
	require.Equal(t, len(innerFiles), d.OtherTables[0].Files)
	after := list()
	require.NotContains(t, after, orphan)
	require.Len(t, after, len(all)-1, "only the orphan is deleted")
	require.Equal(t, idsBefore, scanS3IDs(t, cat, ident))
	require.Equal(t, innerBefore, scanS3IDs(t, cat, innerIdent), "the inner table reads the same rows")
}
