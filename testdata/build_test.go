package testdata

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

// build builds one recipe at scale into a temp dir and returns the dir and
// its report entry.
func build(t *testing.T, name string, scale int) (string, TableReport) {
	t.Helper()
	dir := t.TempDir()
	rep, err := Build(t.Context(), dir, BuildOptions{Recipes: []string{name}, Scale: scale})
	require.NoError(t, err)
	require.Len(t, rep.Tables, 1)
	tr := rep.Tables[0]
	require.Equal(t, name, tr.Name)
	require.Positive(t, tr.Took)
	t.Logf("%s scale %d: %d data files, %d+%d delete files, %d manifests, %d snapshots, %d rows in %s",
		name, scale, tr.DataFiles, tr.PositionDeleteFiles, tr.EqualityDeleteFiles, tr.Manifests, tr.Snapshots, tr.Rows, tr.Took)
	return dir, tr
}

// requireReport checks the report against what the test read itself.
func requireReport(t *testing.T, tr TableReport, l loaded, c contents, rows int) {
	t.Helper()
	require.Equal(t, len(c.data), tr.DataFiles)
	require.Equal(t, len(c.posDeletes), tr.PositionDeleteFiles)
	require.Equal(t, len(c.eqDeletes), tr.EqualityDeleteFiles)
	require.Equal(t, len(c.manifests), tr.Manifests)
	require.Equal(t, len(c.partitionRows), tr.Partitions)
	require.Equal(t, len(l.tbl.Metadata().Snapshots()), tr.Snapshots)
	require.EqualValues(t, rows, tr.Rows)
	require.Equal(t, l.tbl.Location(), tr.Location)
}

// requireSmallFiles checks every data file is under 75 % of the target size.
func requireSmallFiles(t *testing.T, l loaded, files []iceberg.DataFile) {
	t.Helper()
	target, err := strconv.ParseInt(l.tbl.Properties()[table.WriteTargetFileSizeBytesKey], 10, 64)
	require.NoError(t, err)
	require.EqualValues(t, DefaultTargetFileSize, target)
	for _, df := range files {
		require.Less(t, df.FileSizeBytes(), target*3/4, df.FilePath())
	}
}

func TestSmallFiles(t *testing.T) {
	t.Parallel()
	dir, tr := build(t, "tms.small_files", 1)
	l := load(t, dir, "tms.small_files")
	c := l.current(t)

	require.Equal(t, 2, l.tbl.Metadata().Version())
	require.True(t, l.tbl.Spec().IsUnpartitioned())
	require.Len(t, c.data, 200)
	require.Len(t, c.manifests, 200)
	require.Empty(t, c.posDeletes)
	require.Empty(t, c.eqDeletes)
	for _, df := range c.data {
		require.EqualValues(t, 1000, df.Count())
	}
	requireSmallFiles(t, l, c.data)

	// One append per snapshot: walking the ancestry from the current
	// snapshot meets 200 appends that each added exactly one data file.
	snaps := 0
	for s := l.tbl.CurrentSnapshot(); s != nil; {
		snaps++
		require.Equal(t, table.OpAppend, s.Summary.Operation)
		require.Equal(t, "1", s.Summary.Properties["added-data-files"], "snapshot %d", s.SnapshotID)
		if s.ParentSnapshotID == nil {
			break
		}
		s = l.tbl.SnapshotByID(*s.ParentSnapshotID)
	}
	require.Equal(t, 200, snaps)
	require.Len(t, l.tbl.Metadata().Snapshots(), 200)

	want, err := ExpectedRows("tms.small_files", 1)
	require.NoError(t, err)
	rows := l.scan(t)
	requireRows(t, want, rows)
	requireReport(t, tr, l, c, len(rows))
}

func TestPartitioned(t *testing.T) {
	t.Parallel()
	dir, tr := build(t, "tms.partitioned", 1)
	l := load(t, dir, "tms.partitioned")
	c := l.current(t)

	spec := l.tbl.Spec()
	require.Equal(t, 1, spec.NumFields())
	field := spec.Field(0)
	require.Equal(t, iceberg.DayTransform{}, field.Transform)
	require.Equal(t, fieldTS, field.SourceID())

	require.Len(t, c.data, 84)
	require.Len(t, l.tbl.Metadata().Snapshots(), 12)
	require.GreaterOrEqual(t, len(c.partitionRows), 5)
	require.Len(t, c.partitionRows, 7)
	for key, files := range c.partitionRows {
		require.Equal(t, 12, files, "files in partition %s", key)
	}
	days := map[int]bool{}
	for _, df := range c.data {
		require.EqualValues(t, 100, df.Count())
		v := df.Partition()[field.FieldID]
		day, err := strconv.Atoi(strings.TrimSpace(toString(v)))
		require.NoError(t, err, "partition value %v (%T)", v, v)
		days[day] = true
	}
	epochDay := int(epoch.Unix() / 86400)
	for d := range 7 {
		require.True(t, days[epochDay+d], "partition for %s", epoch.AddDate(0, 0, d).Format(time.DateOnly))
	}
	requireSmallFiles(t, l, c.data)

	want, err := ExpectedRows("tms.partitioned", 1)
	require.NoError(t, err)
	rows := l.scan(t)
	requireRows(t, want, rows)
	requireReport(t, tr, l, c, len(rows))
}

// toString renders a partition value (a day count, typed by iceberg-go).
func toString(v any) string {
	switch d := v.(type) {
	case iceberg.Date:
		return strconv.Itoa(int(d))
	case int32:
		return strconv.Itoa(int(d))
	case int:
		return strconv.Itoa(d)
	case int64:
		return strconv.FormatInt(d, 10)
	}
	return "not a day"
}

func TestDeletes(t *testing.T) {
	t.Parallel()
	dir, tr := build(t, "tms.deletes", 1)
	l := load(t, dir, "tms.deletes")
	c := l.current(t)

	require.Equal(t, 2, l.tbl.Metadata().Version())
	require.Equal(t, table.WriteModeMergeOnRead, l.tbl.Properties()[table.WriteDeleteModeKey])
	require.Len(t, c.data, 10, "merge-on-read keeps every data file")
	require.NotEmpty(t, c.posDeletes, "position-delete files")
	require.NotEmpty(t, c.eqDeletes, "equality-delete files")
	var posRecords, eqRecords int64
	for _, df := range c.posDeletes {
		require.Equal(t, iceberg.ParquetFile, df.FileFormat())
		posRecords += df.Count()
	}
	for _, df := range c.eqDeletes {
		require.Equal(t, iceberg.ParquetFile, df.FileFormat())
		require.Equal(t, []int{fieldID}, df.EqualityFieldIDs())
		eqRecords += df.Count()
	}
	require.EqualValues(t, 2*25, posRecords, "one position per deleted row")
	require.EqualValues(t, 2*25, eqRecords, "one key per deleted row")

	plan := planDeletes(mustLookup(t, "tms.deletes"), 1)
	removed := plan.removed()
	require.Len(t, removed, 100)

	rows := l.scan(t)
	require.Len(t, rows, 10_000-100, "the scan applies both kinds of delete")
	for _, id := range ids(rows) {
		_, gone := removed[id]
		require.False(t, gone, "deleted id %d is still returned", id)
	}
	want, err := ExpectedRows("tms.deletes", 1)
	require.NoError(t, err)
	requireRows(t, want, rows)
	requireReport(t, tr, l, c, len(rows))
	require.EqualValues(t, 100, tr.DeletedRows)
}

func mustLookup(t *testing.T, name string) Recipe {
	t.Helper()
	r, err := Lookup(name)
	require.NoError(t, err)
	return r
}

func TestManySnapshots(t *testing.T) {
	t.Parallel()
	dir, tr := build(t, "tms.many_snapshots", 1)
	l := load(t, dir, "tms.many_snapshots")
	c := l.current(t)

	require.GreaterOrEqual(t, len(l.tbl.Metadata().Snapshots()), 100)
	require.GreaterOrEqual(t, len(c.manifests), 100)
	require.Len(t, c.manifests, 120)
	require.Len(t, c.data, 120)
	require.NotEqual(t, "true", l.tbl.Properties()[table.ManifestMergeEnabledKey], "manifest merge stays off")

	want, err := ExpectedRows("tms.many_snapshots", 1)
	require.NoError(t, err)
	rows := l.scan(t)
	requireRows(t, want, rows)
	requireReport(t, tr, l, c, len(rows))
}

func TestOrphans(t *testing.T) {
	t.Parallel()
	start := time.Now()
	dir, tr := build(t, "tms.orphans", 1)
	l := load(t, dir, "tms.orphans")

	orphans, err := ReadOrphans(dir)
	require.NoError(t, err)
	require.Len(t, orphans, 12)
	require.Len(t, tr.Orphans, 12)

	root, err := localPath(l.tbl.Location())
	require.NoError(t, err)
	var old, fresh int
	for i, o := range orphans {
		require.Equal(t, "tms.orphans", o.Table)
		require.Equal(t, tr.Orphans[i].Path, o.Path)
		require.True(t, o.ModTime.Equal(tr.Orphans[i].ModTime))
		rel, err := filepath.Rel(root, o.Path)
		require.NoError(t, err)
		rel = filepath.ToSlash(rel)
		require.True(t, strings.HasPrefix(rel, "data/") || strings.HasPrefix(rel, "metadata/"), rel)
		require.Equal(t, "file://"+filepath.ToSlash(o.Path), o.Location)

		fi, err := os.Stat(o.Path)
		require.NoError(t, err)
		require.True(t, fi.ModTime().Equal(o.ModTime), "%s mtime %s, recorded %s", rel, fi.ModTime(), o.ModTime)
		if o.Old {
			old++
			require.Greater(t, time.Since(fi.ModTime()), 72*time.Hour, rel)
		} else {
			fresh++
			require.Less(t, time.Since(fi.ModTime()), 72*time.Hour, rel)
			require.False(t, fi.ModTime().Before(start.Truncate(time.Second)), rel)
		}
	}
	require.Equal(t, 6, old)
	require.Equal(t, 6, fresh)

	// Nothing the table references, in any snapshot, is a planted file.
	referenced := map[string]bool{l.tbl.MetadataLocation(): true}
	for e := range l.tbl.Metadata().PreviousFiles() {
		referenced[e.MetadataFile] = true
	}
	dataFiles := 0
	for _, s := range l.tbl.Metadata().Snapshots() {
		referenced[s.ManifestList] = true
		ms, err := s.Manifests(l.fs)
		require.NoError(t, err)
		for _, m := range ms {
			referenced[m.FilePath()] = true
			for e, err := range m.Entries(l.fs, false) {
				require.NoError(t, err)
				referenced[e.DataFile().FilePath()] = true
				dataFiles++
			}
		}
	}
	require.Positive(t, dataFiles)
	for ref := range referenced {
		p, err := localPath(ref)
		require.NoError(t, err)
		require.FileExists(t, p, "referenced paths and planted paths are spelled alike")
	}
	planted := map[string]bool{}
	for _, o := range orphans {
		require.False(t, referenced[o.Location], "%s is referenced", o.Location)
		planted[o.Location] = true
	}
	// And the planted files are the only unreferenced ones: the build itself
	// leaves nothing behind that orphan cleanup would find.
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		loc := "file://" + filepath.ToSlash(path)
		require.True(t, referenced[loc] || planted[loc], "%s is neither referenced nor planted", loc)
		return nil
	})
	require.NoError(t, err)

	want, err := ExpectedRows("tms.orphans", 1)
	require.NoError(t, err)
	rows := l.scan(t)
	requireRows(t, want, rows)
	requireReport(t, tr, l, l.current(t), len(rows))
}

func TestBuildIsDeterministic(t *testing.T) {
	t.Parallel()
	// tms.deletes exercises every writer the recipes use except the
	// partitioned fanout, whose output TestPartitioned compares with
	// ExpectedRows.
	names := []string{"tms.deletes"}
	dirA, dirB := t.TempDir(), t.TempDir()
	for _, dir := range []string{dirA, dirB} {
		_, err := Build(t.Context(), dir, BuildOptions{Recipes: names, Scale: 1})
		require.NoError(t, err)
	}
	for _, name := range names {
		a, b := load(t, dirA, name), load(t, dirB, name)
		require.NotEqual(t, a.tbl.Metadata().TableUUID(), b.tbl.Metadata().TableUUID(), "two separate builds")
		rowsA, rowsB := a.scan(t), b.scan(t)
		require.NotEmpty(t, rowsA)
		requireRows(t, rowsA, rowsB)
	}
}

func TestScaleMultipliesCommits(t *testing.T) {
	t.Parallel()
	dir, tr := build(t, "tms.deletes", 2)
	l := load(t, dir, "tms.deletes")
	c := l.current(t)
	require.Len(t, c.data, 20)
	require.EqualValues(t, 2*100, tr.DeletedRows)
	want, err := ExpectedRows("tms.deletes", 2)
	require.NoError(t, err)
	require.Len(t, want, 20_000-200)
	rows := l.scan(t)
	requireRows(t, want, rows)
	requireReport(t, tr, l, c, len(rows))
}
