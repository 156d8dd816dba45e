package chain

import (
	"cmp"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tms-dev/tms/internal/location"
	"github.com/tms-dev/tms/policy"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/testdata"
)

// osPath is the absolute OS path of a local path in any spelling.
func osPath(t *testing.T, p string) string {
	t.Helper()
	c := testCanon(t, nil, nil, "").Canon(p)
	require.Equal(t, c.Full, c.Key, "%s is not local", p)
	return c.Full
}

// testCanon is the normaliser orphan planning builds from a policy's
// equivalences (nil schemes: Spark's default), relative paths resolved
// against dir ("": the working directory).
func testCanon(t testing.TB, schemes, authorities map[string]string, dir string) location.Normaliser {
	t.Helper()
	n, err := location.New(location.Options{EqualSchemes: schemes, EqualAuthorities: authorities, Dir: dir})
	require.NoError(t, err)
	return n
}

// treeFiles lists every file under root.
func treeFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	}))
	slices.Sort(out)
	return out
}

// metadataFiles returns the OS paths of the current metadata file, every
// metadata log entry and version-hint.text (when it exists).
func metadataFiles(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	out := []string{osPath(t, tbl.MetadataLocation())}
	for e := range tbl.Metadata().PreviousFiles() {
		out = append(out, osPath(t, e.MetadataFile))
	}
	hint := filepath.Join(osPath(t, tbl.Location()), "metadata", "version-hint.text")
	if _, err := os.Stat(hint); err == nil {
		out = append(out, hint)
	}
	return out
}

// sortedIDs returns the id column of a full scan of tbl, sorted.
func sortedIDs(t *testing.T, tbl *table.Table) []int64 {
	t.Helper()
	_, recs, err := tbl.Scan().ToArrowRecords(t.Context())
	require.NoError(t, err)
	var ids []int64
	for rec, err := range recs {
		require.NoError(t, err)
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
		rec.Release()
	}
	slices.Sort(ids)
	return ids
}

// oracleChecksum writes batches into a fresh unpartitioned table of the
// recipe schema and checksums that: the digest of the expected rows,
// computed without the foreign table's files or layout.
func oracleChecksum(t *testing.T, batches []arrow.RecordBatch) (checksum.Result, []int64) {
	t.Helper()
	ctx := t.Context()
	cat, err := catalogs.OpenLocal(ctx, t.TempDir(), true)
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"oracle"}, nil))
	tbl, err := cat.CreateTable(ctx, table.Identifier{"oracle", "rows"}, testdata.Schema())
	require.NoError(t, err)
	var ids []int64
	for _, b := range batches {
		ids = append(ids, b.Column(0).(*array.Int64).Int64Values()...)
	}
	slices.Sort(ids)
	at := array.NewTableFromRecords(batches[0].Schema(), batches)
	defer at.Release()
	tbl, err = tbl.AppendTable(ctx, at, 1<<20, nil)
	require.NoError(t, err)
	sum, err := checksum.Table(ctx, tbl, 0)
	require.NoError(t, err)
	return sum, ids
}

// checkForeignCleanup runs orphan cleanup (a dry run, then for real) on a
// built path recipe and asserts it deletes exactly the planted orphans:
// every kept (hidden) file and every referenced file survives, the table
// loads at the same metadata location with the same rows.
func checkForeignCleanup(t *testing.T, f testdata.ForeignTable) {
	t.Helper()
	ctx := t.Context()
	require.NotEmpty(t, f.Orphans)
	require.NotEmpty(t, f.Kept)
	cat, tbl, err := f.LoadTable(ctx)
	require.NoError(t, err)
	root := osPath(t, tbl.Location())
	metaLoc := tbl.MetadataLocation()
	meta := metadataFiles(t, tbl)
	before, err := checksum.Table(ctx, tbl, 0)
	require.NoError(t, err)
	oracle, ids := oracleChecksum(t, f.Expected)
	require.Equal(t, oracle, before, "the table's rows are the rows the builder wrote")
	require.Equal(t, ids, sortedIDs(t, tbl))
	files := treeFiles(t, root)

	planned := func(rep Report) []string {
		var out []string
		for _, o := range rep.Types[0].Detail.(*OrphanPlan).Files {
			out = append(out, osPath(t, o.Path))
		}
		slices.Sort(out)
		return out
	}
	opts := Options{Log: zaptest.NewLogger(t)}
	steps := []Step{{Type: OrphanCleanup, Policy: policyJSON(`{"rewriteOptions": {"older-than": "72h", "prefix-mismatch-mode": "error"}}`)}}

	dry := opts
	dry.DryRun = true
	rep, err := Run(ctx, cat, f.Ident, steps, dry)
	require.NoError(t, err)
	require.Equal(t, Skipped, rep.Types[0].Outcome, rep.Types[0].Err)
	require.Equal(t, f.Orphans, planned(rep))
	require.Equal(t, files, treeFiles(t, root), "a dry run deletes nothing")

	rep, err = Run(ctx, cat, f.Ident, steps, opts)
	require.NoError(t, err)
	require.Equal(t, Done, rep.Types[0].Outcome, rep.Types[0].Err)
	require.Equal(t, f.Orphans, planned(rep))
	after := treeFiles(t, root)
	deleted := slices.DeleteFunc(slices.Clone(files), func(p string) bool { return slices.Contains(after, p) })
	require.Equal(t, f.Orphans, deleted, "deleted exactly the planted orphans")
	for _, p := range slices.Concat(f.Kept, meta) {
		require.FileExists(t, p)
	}

	_, again, err := f.LoadTable(ctx)
	require.NoError(t, err)
	require.Equal(t, metaLoc, again.MetadataLocation())
	sum, err := checksum.Table(ctx, again, 0)
	require.NoError(t, err)
	require.Equal(t, before, sum)
	require.Equal(t, ids, sortedIDs(t, again))
}

// TestOrphanCleanupRelativeLocation runs in the recipe's working directory
// (t.Chdir), so it cannot be parallel.
func TestOrphanCleanupRelativeLocation(t *testing.T) {
	f := testdata.BuildForeignT(t, "foreign.relative")
	_, tbl, err := f.LoadTable(t.Context())
	require.NoError(t, err)
	require.False(t, filepath.IsAbs(tbl.Location()), "location %s", tbl.Location())
	require.True(t, filepath.IsAbs(tbl.MetadataLocation()), "metadata location %s", tbl.MetadataLocation())
	current := osPath(t, tbl.MetadataLocation())

	// iceberg-go's planner compares the relative listing with the absolute
	// metadata paths: it plans the current metadata.json and the whole log.
	theirs, err := tbl.PlanOrphanFiles(t.Context(), table.WithFilesOlderThan(policy.DefaultOrphanOlderThan))
	require.NoError(t, err)
	var theirsAbs []string
	for _, p := range theirs.Files() {
		theirsAbs = append(theirsAbs, osPath(t, p))
	}
	require.Contains(t, theirsAbs, current)

	// TMS's does not.
	fsys, err := tbl.FS(t.Context())
	require.NoError(t, err)
	ours, err := newTestPlanner(t, policy.OrphanOptions{}).plan(t.Context(), tbl, fsys)
	require.NoError(t, err)
	for _, o := range ours.files {
		require.NotEqual(t, current, o.canon.Full)
		require.NotContains(t, metadataFiles(t, tbl), o.canon.Full)
	}

	checkForeignCleanup(t, f)
}

func TestOrphanCleanupFileURIs(t *testing.T) {
	t.Parallel()
	f := testdata.BuildForeignT(t, "foreign.file-uri")
	_, tbl, err := f.LoadTable(t.Context())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(tbl.Location(), "file:/") && !strings.HasPrefix(tbl.Location(), "file://"), tbl.Location())
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	require.NoError(t, err)
	spellings := map[string]bool{}
	for _, task := range tasks {
		p := task.File.FilePath()
		switch {
		case strings.HasPrefix(p, "file:///"):
			spellings["file:///"] = true
		case strings.HasPrefix(p, "file:/"):
			spellings["file:/"] = true
		case strings.HasPrefix(p, "/"):
			spellings["/"] = true
		}
	}
	require.Len(t, spellings, 3, "data files spelled file:/, file:/// and bare")
	checkForeignCleanup(t, f)
}

func TestOrphanCleanupHadoopSidecars(t *testing.T) {
	t.Parallel()
	f := testdata.BuildForeignT(t, "foreign.hadoop-sidecars")
	var crc, temporary, partition int
	for _, k := range f.Kept {
		switch {
		case strings.HasSuffix(k, ".crc"):
			crc++
		case strings.Contains(k, "/_temporary/"):
			temporary++
		}
	}
	for _, o := range f.Orphans {
		if strings.Contains(o, "/_category=") {
			partition++
		}
	}
	require.Greater(t, crc, 20)
	require.Positive(t, temporary)
	require.Equal(t, 1, partition, "the orphan in a _category= partition folder is not hidden")
	checkForeignCleanup(t, f)
}

func newTestPlanner(t *testing.T, p policy.OrphanOptions) orphanPlanner {
	t.Helper()
	return orphanPlanner{
		canon:     testCanon(t, p.EqualSchemes, p.EqualAuthorities, ""),
		olderThan: cmp.Or(p.OlderThan, policy.DefaultOrphanOlderThan),
		mismatch:  p.PrefixMismatch,
	}
}

// The canonical forms orphan planning compares are tested with the
// normaliser in package internal/location.

func TestHiddenFilter(t *testing.T) {
	t.Parallel()
	v1 := iceberg.NewPartitionSpecID(0, iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "category", Transform: iceberg.IdentityTransform{}})
	v2 := iceberg.NewPartitionSpecID(1,
		iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "category", Transform: iceberg.IdentityTransform{}},
		iceberg.PartitionField{SourceIDs: []int{5}, FieldID: 1001, Name: "_region", Transform: iceberg.IdentityTransform{}})
	h := newHiddenFilter([]iceberg.PartitionSpec{v1, v2})
	plain := newHiddenFilter([]iceberg.PartitionSpec{v1})
	for _, tc := range []struct {
		rel            string
		hidden, plainH bool
	}{
		{"data/00000-0-x.parquet", false, false},
		{"data/category=books/00000-0-x.parquet", false, false},
		{"data/.00000-0-x.parquet.crc", true, true},
		{"metadata/.v3.metadata.json.crc", true, true},
		{"data/_SUCCESS", true, true},
		{"data/_temporary/0/_temporary/attempt_1/part-0.parquet", true, true},
		{"data/_region=eu/00000-0-x.parquet", false, true},
		{"data/category=books/_region=eu/00000-0-x.parquet", false, true},
		{"data/_region=eu/.00000-0-x.parquet.crc", true, true},
		{"data/_region=eu/_SUCCESS", true, true},
		{"data/_regionx=eu/00000-0-x.parquet", true, true},
		{"data/_category=books/00000-0-x.parquet", true, true},
		{"data/.hidden/x", true, true},
		{"data/.hidden", true, true},
	} {
		require.Equal(t, tc.hidden, h.hiddenRel(tc.rel), tc.rel)
		require.Equal(t, tc.plainH, plain.hiddenRel(tc.rel), "without _region: %s", tc.rel)
	}
}

// TestOrphanGuardAborts feeds the guard plans that name a referenced file
// under another spelling: each aborts naming both paths, and nothing is
// deleted.
func TestOrphanGuardAborts(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	ctx := b.ctx
	tbl := b.load(t)
	fsys, err := tbl.FS(ctx)
	require.NoError(t, err)
	pl := newTestPlanner(t, policy.OrphanOptions{})
	refs, err := pl.references(ctx, tbl, fsys)
	require.NoError(t, err)
	current := tbl.MetadataLocation()
	currentOS := osPath(t, current)
	dir, base := filepath.Split(currentOS)
	var logged string
	for e := range tbl.Metadata().PreviousFiles() {
		logged = e.MetadataFile
	}
	loggedOS := osPath(t, logged)
	tasks, err := tbl.Scan().PlanFiles(ctx)
	require.NoError(t, err)
	dataFile := tasks[0].File.FilePath()
	elsewhere := filepath.Join(osPath(t, tbl.Location()), "data", "copied", filepath.Base(dataFile))

	for _, tc := range []struct {
		name, planned, want string
	}{
		{"current metadata, another spelling", dir + "./" + base, current},
		{"current metadata, file: spelling", "file:" + currentOS, current},
		{"base name of a data file", elsewhere, dataFile},
		{"logged metadata, gzip spelling", strings.TrimSuffix(loggedOS, ".metadata.json") + ".gz.metadata.json", logged},
		{"logged metadata, .gz suffix", loggedOS + ".gz", logged},
	} {
		plan := &orphanPlan{refs: refs, location: tbl.Location(), files: []plannedOrphan{{path: tc.planned, canon: pl.canon.Canon(tc.planned), size: 1}}}
		err := plan.guard()
		require.ErrorIs(t, err, errOrphanGuard, tc.name)
		require.ErrorContains(t, err, tc.planned, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	// A planned file that looks like nothing referenced passes.
	ok := filepath.Join(dir, "00099-7e570000-0000-4000-8000-000000000000.metadata.json")
	require.NoError(t, (&orphanPlan{refs: refs, files: []plannedOrphan{{path: ok, canon: pl.canon.Canon(ok)}}}).guard())

	// End to end: a copy of a data file under another folder is an orphan by
	// path but shares a referenced base name, so the whole cleanup aborts,
	// the type fails naming both paths, and no planted orphan is deleted.
	require.NoError(t, os.MkdirAll(filepath.Dir(elsewhere), 0o755))
	require.NoError(t, os.WriteFile(elsewhere, []byte("copy"), 0o644))
	old := time.Now().Add(-testdata.OrphanAge)
	require.NoError(t, os.Chtimes(elsewhere, old, old))
	files := diskFiles(t, tbl)
	rep := b.run(t, Step{Type: OrphanCleanup})
	require.Equal(t, Failed, rep.Types[0].Outcome, rep.Types[0].Reason)
	require.Contains(t, rep.Types[0].Err, elsewhere)
	require.Contains(t, rep.Types[0].Err, dataFile)
	require.Contains(t, rep.Types[0].Err, "nothing deleted")
	require.Equal(t, files, diskFiles(t, b.load(t)))
}

// rootsAt is the root set of a plan that covers the location loc.
func rootsAt(c location.Normaliser, loc string) *rootSet {
	return newRootSet([]orphanRoot{{raw: loc, canon: c.Canon(loc)}})
}

// TestOrphanPrefixMismatch: a listed file whose path a reference names
// under another authority is an error by default, kept with ignore and an
// orphan with delete; equal-authorities makes it referenced.
func TestOrphanPrefixMismatch(t *testing.T) {
	t.Parallel()
	const loc, ref, stray = "hdfs://nn1:8020/wh/t", "hdfs://nn1:8020/wh/t/data/a.parquet", "hdfs://nn2:8020/wh/t/data/a.parquet"
	plan := func(mode table.PrefixMismatchMode, auths map[string]string) ([]plannedOrphan, error) {
		pl := orphanPlanner{canon: testCanon(t, nil, auths, "/"), mismatch: mode}
		refs := &orphanRefs{full: map[string]string{}, byKey: map[string]string{}, base: map[string]string{}, logged: map[string]string{}}
		refs.add(pl.canon, ref)
		return pl.match([]plannedOrphan{{path: stray, canon: pl.canon.Canon(stray)}}, refs, rootsAt(pl.canon, loc))
	}
	_, err := plan(table.PrefixMismatchError, nil)
	require.ErrorContains(t, err, "prefix mismatch: listed "+stray+" and referenced "+ref)
	got, err := plan(table.PrefixMismatchIgnore, nil)
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = plan(table.PrefixMismatchDelete, map[string]string{})
	require.ErrorContains(t, err, "not under a folder orphan cleanup lists", "nn2 is not under nn1's location either")
	require.Empty(t, got)
	got, err = plan(table.PrefixMismatchError, map[string]string{"nn1:8020": "ns", "nn2:8020": "ns"})
	require.NoError(t, err)
	require.Empty(t, got, "equal authorities: referenced")

	// Under the location (s3a listed, s3 referenced): delete mode plans it.
	pl := orphanPlanner{canon: testCanon(t, map[string]string{}, nil, "/"), mismatch: table.PrefixMismatchDelete}
	refs := &orphanRefs{full: map[string]string{}, byKey: map[string]string{}, base: map[string]string{}, logged: map[string]string{}}
	refs.add(pl.canon, "s3://b/t/data/a.parquet")
	listed := []plannedOrphan{{path: "s3a://b/t/data/a.parquet", canon: pl.canon.Canon("s3a://b/t/data/a.parquet")}}
	got, err = pl.match(listed, refs, rootsAt(pl.canon, "s3a://b/t"))
	require.NoError(t, err)
	require.Len(t, got, 1)
	pl.mismatch = table.PrefixMismatchError
	_, err = pl.match(listed, refs, rootsAt(pl.canon, "s3a://b/t"))
	require.ErrorContains(t, err, "prefix mismatch")
	pl.canon = testCanon(t, nil, nil, "/")
	refs = &orphanRefs{full: map[string]string{}, byKey: map[string]string{}, base: map[string]string{}, logged: map[string]string{}}
	refs.add(pl.canon, "s3://b/t/data/a.parquet")
	listed[0].canon = pl.canon.Canon(listed[0].path)
	got, err = pl.match(listed, refs, rootsAt(pl.canon, "s3a://b/t"))
	require.NoError(t, err)
	require.Empty(t, got, "s3a is s3 by default")
}
