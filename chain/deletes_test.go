package chain

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/scanoracle"
	"github.com/tms-dev/tms/testdata"
)

// morBundle is a v2 merge-on-read table tms.mor (id, payload), unpartitioned,
// written by iceberg-go alone, in a fresh local warehouse.
func morBundle(t *testing.T, props iceberg.Properties) bundle {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	cat, err := catalogs.OpenLocal(ctx, dir, true)
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"tms"}, nil))
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "payload", Type: iceberg.PrimitiveTypes.String})
	all := iceberg.Properties{"format-version": "2", table.WriteDeleteModeKey: table.WriteModeMergeOnRead}
	for k, v := range props {
		all[k] = v
	}
	ident := table.Identifier{"tms", "mor"}
	_, err = cat.CreateTable(ctx, ident, schema, catalog.WithProperties(all))
	require.NoError(t, err)
	return bundle{ctx: ctx, dir: dir, cat: cat, ident: ident, opts: Options{Log: zaptest.NewLogger(t)}}
}

// appendIDs appends rows with ids [first, first+n) as one data file.
func (b bundle) appendIDs(t *testing.T, first, n int) {
	t.Helper()
	rows := make([]string, n)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"id": %d, "payload": "row %d of a file that starts at %d"}`, first+i, first+i, first)
	}
	_, err := testdata.AppendJSON(b.ctx, b.load(t), rows)
	require.NoError(t, err)
}

// rows is the independent reader, scanoracle.Rows: iceberg-go's own scan
// of the current snapshot (not package faithful or checksum), every row as a
// canonical string, sorted.
func (b bundle) rows(t *testing.T) []string {
	t.Helper()
	rows, err := scanoracle.Rows(b.ctx, b.load(t))
	require.NoError(t, err)
	return rows
}

// requireRows fails unless iceberg-go's scan reads exactly want, saying how
// many rows came back or went missing rather than printing them all.
func (b bundle) requireRows(t *testing.T, want []string) {
	t.Helper()
	if diff := scanoracle.Diff(want, b.rows(t), 10); diff != "" {
		t.Fatalf("iceberg-go's scan: %s", diff)
	}
}

// liveFiles returns the data and delete files of the current snapshot
// (scanoracle.LiveFiles), failing the test when the manifests do not read.
func (b bundle) liveFiles(t *testing.T) (data, deletes []iceberg.DataFile) {
	t.Helper()
	data, deletes, err := scanoracle.LiveFiles(b.ctx, b.load(t))
	require.NoError(t, err)
	return data, deletes
}

// A merge-on-read DELETE writes one position-delete file for every data file
// the statement touched. A compaction that rewrites some of those data files
// and leaves another (here a large file already inside the size band) must
// keep the delete file, or the rows it deleted from the kept file come back.
func TestCompactionKeepsDeletesOfFilesItKeeps(t *testing.T) {
	t.Parallel()
	b := morBundle(t, nil)
	b.appendIDs(t, 0, 20_000) // the large file
	for i := range 10 {
		b.appendIDs(t, 100_000+i*100, 100)
	}
	data, _ := b.liveFiles(t)
	var large int64
	for _, df := range data {
		large = max(large, df.FileSizeBytes())
	}
	// One DELETE over the large file and two small ones: iceberg-go
	// writes one position-delete file that names all three.
	between := func(lo, hi int64) iceberg.BooleanExpression {
		return iceberg.NewAnd(iceberg.GreaterThanEqual(iceberg.Reference("id"), lo), iceberg.LessThan(iceberg.Reference("id"), hi))
	}
	b.delete(t, iceberg.NewOr(iceberg.LessThan(iceberg.Reference("id"), int64(201)),
		iceberg.NewOr(between(100_000, 100_003), between(100_500, 100_525))))
	_, deletes := b.liveFiles(t)
	require.NotEmpty(t, deletes, "merge-on-read deletes")
	before := b.rows(t)
	require.Len(t, before, 20_000+1_000-201-28)

	// The large file is the target size: inside the band, never a
	// candidate; the ten small ones are.
	rep := b.run(t, Step{Type: Compaction, Policy: policyJSON(fmt.Sprintf(
		`{"minDataFileMse": 0, "rewriteOptions": {"target-file-size-bytes": %d}}`, large))})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Reason, "rewrote 10 files")
	b.requireRows(t, before)
	d := tr.Detail.(*CompactionDetail)
	require.NotEmpty(t, d.Verified)
	require.Positive(t, d.KeptDeleteFiles, "the delete file that still applies to the large file stays")

	data, deletes = b.liveFiles(t)
	require.Len(t, data, 2)
	require.NotEmpty(t, deletes, "the delete files naming the large file are live")

	// Rewriting everything leaves the delete file nothing to apply to: it
	// goes, and the verifier read what it named.
	rep = b.run(t, Step{Type: Compaction, Policy: policyJSON(
		`{"minDataFileMse": 0, "rewriteOptions": {"min-input-files": 1, "target-file-size-bytes": 1073741824}}`)})
	tr = rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	b.requireRows(t, before)
	d = tr.Detail.(*CompactionDetail)
	require.Equal(t, len(deletes), d.RemovedDeleteFiles)
	require.Zero(t, d.KeptDeleteFiles)
	last := d.Verified[len(d.Verified)-1].Deletes
	require.Equal(t, len(deletes), last.Removed)
	require.GreaterOrEqual(t, last.NamedPaths, 3, "the large file and two small ones")
	data, deletes = b.liveFiles(t)
	require.Len(t, data, 1)
	require.Empty(t, deletes)
}

// The verifier does not trust the decision: handed the removal of a
// position-delete file that still names a data file that stays, it refuses
// the commit and names both files.
func TestVerifierRefusesRemovingLiveDeletes(t *testing.T) {
	t.Parallel()
	b := morBundle(t, nil)
	b.appendIDs(t, 0, 1_000)
	b.appendIDs(t, 1_000, 10)
	b.appendIDs(t, 2_000, 10)
	b.delete(t, iceberg.NewOr(iceberg.LessThan(iceberg.Reference("id"), int64(5)),
		iceberg.EqualTo(iceberg.Reference("id"), int64(1_003))))
	tbl := b.load(t)
	fs, err := tbl.FS(b.ctx)
	require.NoError(t, err)
	data, deletes := b.liveFiles(t)
	require.Len(t, deletes, 1)
	canon, err := defaultCanon()
	require.NoError(t, err)
	removed := map[string]bool{}
	var large string
	for _, df := range data {
		if df.Count() == 1_000 {
			large = df.FilePath()
		} else {
			removed[canon(df.FilePath())] = true
		}
	}
	x, err := indexSurvivors(b.ctx, fs, tbl.CurrentSnapshot(), removed, canon)
	require.NoError(t, err)
	named, err := namedPaths(b.ctx, fs, deletes[0])
	require.NoError(t, err)
	require.Len(t, named, 2, "the large file and one small one")
	rm := &deleteRemovals{files: deletes, named: map[string][]string{deleteKey(deletes[0]): named}, survivors: x, canon: canon}
	_, err = checkRemovals(tbl.Metadata(), rm)
	require.ErrorIs(t, err, errVerify)
	require.ErrorContains(t, err, deletes[0].FilePath())
	require.ErrorContains(t, err, large)

	// Spelled another way, the data file that stays is still the same file.
	respelled := map[string][]string{deleteKey(deletes[0]): {"file:" + strings.TrimPrefix(large, "file://")}}
	_, err = checkRemovals(tbl.Metadata(), &deleteRemovals{files: deletes, named: respelled, survivors: x, canon: canon})
	require.ErrorIs(t, err, errVerify)
}

// A concurrent delete file that names an input of the rewrite under another
// spelling (s3a:// for s3://, file:/ for file:///) still applies to it: the
// rebase must see a conflict, or the rewrite would drop the file its rows
// are deleted from and bring them back.
func TestRebaseSeesRespelledDeleteTargets(t *testing.T) {
	t.Parallel()
	file := func(content iceberg.ManifestEntryContent, path, ref string) iceberg.DataFile {
		bld, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, content, path, iceberg.ParquetFile, nil, nil, nil, 10, 1000)
		require.NoError(t, err)
		if ref != "" {
			bld.ReferencedDataFile(ref)
		}
		return bld.Build()
	}
	in, err := newInputs([]iceberg.DataFile{
		file(iceberg.EntryContentData, "s3://bucket/t/data/a.parquet", ""),
		file(iceberg.EntryContentData, "file:///wh/t/data/b.parquet", ""),
	})
	require.NoError(t, err)
	for ref, want := range map[string]bool{
		"s3a://bucket/t/data/a.parquet":   true,
		"s3://bucket/t//data/a.parquet":   true,
		"file:/wh/t/data/b.parquet":       true,
		"/wh/t/data/b.parquet":            true,
		"s3://bucket/t/data/c.parquet":    false,
		"file:///wh/t/data/other.parquet": false,
	} {
		d := file(iceberg.EntryContentPosDeletes, "s3://bucket/t/data/delete.parquet", ref)
		require.Equal(t, want, in.mayApply(nil, d), ref)
	}
}

// equalityDelete commits one equality-delete file on column id.
func (b bundle) equalityDelete(t *testing.T, ids ...int64) {
	t.Helper()
	_, err := testdata.EqualityDeleteIDs(b.ctx, b.load(t), ids...)
	require.NoError(t, err)
}

// A `where` filter picks the files a compaction rewrites, and each is
// rewritten whole: the rows outside the filter keep their equality deletes
// too, even those a filtered scan would not need (an equality delete of
// id 150 cannot match id >= 160, so iceberg-go's filtered plan leaves it
// out).
func TestCompactionWhereKeepsEqualityDeletes(t *testing.T) {
	t.Parallel()
	b := morBundle(t, nil)
	b.appendIDs(t, 0, 100)
	b.appendIDs(t, 100, 100)
	b.equalityDelete(t, 5, 150)
	before := b.rows(t)
	require.Len(t, before, 198)
	require.False(t, slices.ContainsFunc(before, func(r string) bool { return strings.HasPrefix(r, "id=150 |") }), "id 150 is deleted")
	rep := b.run(t, Step{Type: Compaction, Policy: policyJSON(
		`{"minDataFileMse": 0, "rewriteOptions": {"min-input-files": 1, "where": "id >= 160"}}`)})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Reason, "rewrote 1 files")
	b.requireRows(t, before)
}

// iceberg-go writes the deletion vectors of one merge-on-read DELETE on a
// v3 table into one Puffin file. Each is its own entry: the manifest
// rewrite's verifier and the compaction's record-count bound count each
// data file's own deletion vector, not the Puffin file once.
func TestSharedPuffinDeletionVectors(t *testing.T) {
	t.Parallel()
	b := morBundle(t, iceberg.Properties{"format-version": "3"})
	for i := range 3 {
		b.appendIDs(t, i*100, 100)
	}
	b.delete(t, iceberg.NewOr(iceberg.LessThan(iceberg.Reference("id"), int64(3)),
		iceberg.NewOr(iceberg.EqualTo(iceberg.Reference("id"), int64(150)), iceberg.GreaterThan(iceberg.Reference("id"), int64(295)))))
	_, deletes := b.liveFiles(t)
	require.Len(t, deletes, 3, "one deletion vector per data file")
	require.Equal(t, deletes[0].FilePath(), deletes[2].FilePath(), "in one Puffin file")
	before := b.rows(t)
	require.Len(t, before, 300-3-1-4)

	rep := b.run(t, Step{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 1, "maxAvgManifestSizeBytes": 1073741824}`)})
	require.Equal(t, Done, rep.Types[0].Outcome, rep.Types[0].Reason)
	b.requireRows(t, before)
	rep = b.run(t, Step{Type: Compaction, Policy: policyJSON(`{"minDataFileMse": 0, "rewriteOptions": {"min-input-files": 1}}`)})
	require.Equal(t, Done, rep.Types[0].Outcome, rep.Types[0].Reason)
	b.requireRows(t, before)
	d := rep.Types[0].Detail.(*CompactionDetail)
	require.Equal(t, 3, d.RemovedDeleteFiles)
	require.Equal(t, "exact", d.Verified[len(d.Verified)-1].Partitions[0].Count)
	_, deletes = b.liveFiles(t)
	require.Empty(t, deletes)
}

// What a position-delete file names is proved or it stays: a file that is
// not Parquet, or that cannot be opened, gives an error (planRemovals keeps
// the file and names it in unread_delete_files), and a file whose bounds
// or referenced file name one target is not read at all.
func TestNamedPathsOfUnreadableDeletes(t *testing.T) {
	t.Parallel()
	fs, err := morBundle(t, nil).load(t).FS(t.Context())
	require.NoError(t, err)
	file := func(format iceberg.FileFormat, path string, build func(*iceberg.DataFileBuilder)) iceberg.DataFile {
		bld, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentPosDeletes, path, format, nil, nil, nil, 3, 100)
		require.NoError(t, err)
		if build != nil {
			build(bld)
		}
		return bld.Build()
	}
	_, err = namedPaths(t.Context(), fs, file(iceberg.OrcFile, "file:///nowhere/d.orc", nil))
	require.ErrorContains(t, err, "cannot read the file_path values of a ORC position-delete file")
	_, err = namedPaths(t.Context(), fs, file(iceberg.ParquetFile, "file:///nowhere/d.parquet", nil))
	require.ErrorContains(t, err, "open")

	target := "file:///wh/t/data/a.parquet"
	got, err := namedPaths(t.Context(), fs, file(iceberg.OrcFile, "file:///nowhere/d.orc", func(b *iceberg.DataFileBuilder) {
		b.LowerBoundValues(map[int][]byte{posDeleteFilePathID: []byte(target)}).UpperBoundValues(map[int][]byte{posDeleteFilePathID: []byte(target)})
	}))
	require.NoError(t, err)
	require.Equal(t, []string{target}, got)
	got, err = namedPaths(t.Context(), fs, file(iceberg.OrcFile, "file:///nowhere/d.orc", func(b *iceberg.DataFileBuilder) { b.ReferencedDataFile(target) }))
	require.NoError(t, err)
	require.Equal(t, []string{target}, got)
}

// delete-ratio-threshold (Spark's option, default 0.3): a data file of
// the target size is rewritten when its deletion vector removes at least
// that share of its rows, and kept below it; 0 turns the rule off.
func TestCompactionDeleteRatioThreshold(t *testing.T) {
	t.Parallel()
	b := morBundle(t, iceberg.Properties{"format-version": "3"})
	b.appendIDs(t, 0, 100)
	data, _ := b.liveFiles(t)
	require.Len(t, data, 1)
	// The file is exactly the target size: size alone never selects it.
	target := data[0].FileSizeBytes()
	b.delete(t, iceberg.LessThan(iceberg.Reference("id"), int64(40)))
	before := b.rows(t)
	require.Len(t, before, 60)
	compact := func(ratio string) TypeReport {
		t.Helper()
		content := fmt.Sprintf(`{"minDataFileMse": 0, "minDeleteFileNumber": 1, "rewriteOptions": {"min-input-files": 1, "target-file-size-bytes": %d%s}}`, target, ratio)
		rep := b.run(t, Step{Type: Compaction, Policy: policyJSON(content)})
		b.requireRows(t, before)
		return rep.Types[0]
	}
	for _, off := range []string{`, "delete-ratio-threshold": 0`, `, "delete-ratio-threshold": 0.5`} {
		tr := compact(off)
		require.Equal(t, Skipped, tr.Outcome, "%s: 40 %% deleted, the rule off or below it: %s", off, tr.Reason)
		require.Contains(t, tr.Reason, "no file group qualifies")
	}
	tr := compact("")
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	d := tr.Detail.(*CompactionDetail)
	require.Equal(t, 1, d.InputFiles, "40 % deleted reaches the default 0.3")
	require.Equal(t, 1, d.RemovedDeleteFiles, "its deletion vector leaves with it")
	_, deletes := b.liveFiles(t)
	require.Empty(t, deletes)
}

// remove-dangling-deletes (default true): a compaction commit also removes
// the delete files that apply to no live data file any more, even when it
// rewrites none of their files: here a position delete (naming its file only
// in its file_path column; on v3 a deletion vector) whose data file a
// copy-on-write delete dropped
// while another data file of its partition stays. false keeps it. The
// equality delete older than every data file left is dead either way
// (iceberg-go's collector finds it).
func TestCompactionRemovesDanglingDeletes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		format, option    string
		removed, dangling int
	}{
		{"2", "", 2, 1}, {"2", `, "remove-dangling-deletes": false`, 1, 0},
		// On v3 the position deletes are deletion vectors, which name their
		// data file in the metadata.
		{"3", "", 2, 1}, {"3", `, "remove-dangling-deletes": false`, 1, 0},
	} {
		b := morBundle(t, iceberg.Properties{"format-version": c.format})
		b.appendIDs(t, 0, 100)
		_, err := testdata.EqualityDeleteIDs(b.ctx, b.load(t), 7)
		require.NoError(t, err)
		b.appendIDs(t, 100, 100)
		b.delete(t, iceberg.EqualTo(iceberg.Reference("id"), int64(5)))   // a position delete of the first file
		b.delete(t, iceberg.EqualTo(iceberg.Reference("id"), int64(150))) // one of the second file
		// Copy-on-write drops the first file whole, leaving its deletes.
		b.setProps(t, iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeCopyOnWrite})
		b.delete(t, iceberg.LessThan(iceberg.Reference("id"), int64(100)))
		b.setProps(t, iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeMergeOnRead})
		b.appendIDs(t, 300, 50)
		data, deletes := b.liveFiles(t)
		require.Len(t, data, 2)
		require.Len(t, deletes, 3, "both position deletes and the equality delete are live")
		before := b.rows(t)
		require.Len(t, before, 99+50)

		// Only the third file is rewritten; the second stays.
		rep := b.run(t, Step{Type: Compaction, Policy: policyJSON(`{"minDataFileMse": 0, "rewriteOptions": {"min-input-files": 1, "where": "id >= 300"` + c.option + `}}`)})
		require.Equal(t, Done, rep.Types[0].Outcome, rep.Types[0].Reason)
		b.requireRows(t, before)
		d := rep.Types[0].Detail.(*CompactionDetail)
		require.Equal(t, 1, d.InputFiles)
		require.Equal(t, c.removed, d.RemovedDeleteFiles, "v%s, option %q", c.format, c.option)
		require.Equal(t, c.dangling, d.DanglingDeleteFiles, "v%s, option %q", c.format, c.option)
		_, deletes = b.liveFiles(t)
		require.Len(t, deletes, 3-c.removed)
	}
}
