package sampler_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/sampler"
)

func TestSampleKnownSizes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "sizes", iceberg.Properties{table.WriteTargetFileSizeBytesKey: "1000"})
	tbl = b.addFakeFiles(t, tbl, 100, 749, 750)
	first := tbl.CurrentSnapshot()
	tbl = b.addFakeFiles(t, tbl, 999, 1000, 5000)

	now := time.UnixMilli(first.TimestampMs + 5000)
	res, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{Now: func() time.Time { return now }})
	require.NoError(t, err)

	manifests, _ := liveEntries(t, tbl, tbl.CurrentSnapshot())
	var manifestBytes int64
	for _, m := range manifests {
		manifestBytes += m.Length()
	}
	require.Equal(t, tbl.CurrentSnapshot().SnapshotID, res.SnapshotID)
	require.Equal(t, sampler.Metrics{
		FileNumber:     6,
		DataFileNumber: 6,
		// T = 1000 from the table property: 0.75·T = 750, so 100 and 749 are small.
		SmallFileNumber: 2,
		// Deficits 900, 251, 250, 1, 0, 0.
		DataFileMSE:         (900*900 + 251*251 + 250*250 + 1*1) / 6.0,
		AvgFileSize:         (100 + 749 + 750 + 999 + 1000 + 5000) / 6.0,
		TotalFileSize:       100 + 749 + 750 + 999 + 1000 + 5000,
		RecordCount:         60,
		ManifestNumber:      2,
		AvgManifestSize:     float64(manifestBytes) / 2,
		SnapshotNumber:      2,
		OldestSnapshotAgeMs: 5000,
		PartitionNumber:     1,
		// Unpartitioned: the one partition holds both small files.
		MaxPartitionSmallFileNumber: 2,
		TargetFileSize:              1000,
	}, res.Metrics)

	// The option overrides the property: with T = 800 only 100 is small (< 600).
	res, err = sampler.Sample(b.ctx, tbl, 0, sampler.Options{TargetFileSize: 800, Now: func() time.Time { return now }})
	require.NoError(t, err)
	require.EqualValues(t, 800, res.Metrics.TargetFileSize)
	require.EqualValues(t, 1, res.Metrics.SmallFileNumber)
	require.InDelta(t, (700*700+51*51+50*50)/6.0, res.Metrics.DataFileMSE, 1e-9)
}

func TestSampleMatchesManifestEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "real", nil)
	tbl = b.appendJSON(t, tbl, `[{"id": 1, "region": "a"}, {"id": 2, "region": "b"}]`)
	tbl = b.appendJSON(t, tbl, `[{"id": 3, "region": "c"}]`)
	tbl = b.appendJSON(t, tbl, `[{"id": 4}, {"id": 5}, {"id": 6}, {"id": 7}]`)

	// Pick T between the smallest and largest real file so that the
	// thresholds matter, and recompute everything from a full decode.
	manifests, entries := liveEntries(t, tbl, tbl.CurrentSnapshot())
	require.Len(t, entries, 3)
	sizes := make([]int64, len(entries))
	var records int64
	for i, e := range entries {
		sizes[i] = e.DataFile().FileSizeBytes()
		records += e.DataFile().Count()
	}
	target := slices.Max(sizes)
	var small int64
	var sq, total float64
	for _, s := range sizes {
		if float64(s) < 0.75*float64(target) {
			small++
		}
		d := float64(target - min(target, s))
		sq += d * d
		total += float64(s)
	}

	for _, conc := range []int{1, 2, 8} {
		res, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{TargetFileSize: target, Concurrency: conc})
		require.NoError(t, err)
		m := res.Metrics
		require.EqualValues(t, 3, m.DataFileNumber)
		require.EqualValues(t, 3, m.FileNumber)
		require.EqualValues(t, 7, m.RecordCount)
		require.Equal(t, records, m.RecordCount)
		require.Equal(t, small, m.SmallFileNumber)
		require.InDelta(t, sq/3, m.DataFileMSE, 1e-6)
		require.InDelta(t, total/3, m.AvgFileSize, 1e-9)
		require.EqualValues(t, len(manifests), m.ManifestNumber)
		require.EqualValues(t, 3, m.SnapshotNumber)
		require.EqualValues(t, 1, m.PartitionNumber)
	}
}

func TestSamplePartitionNumber(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{2}, FieldID: 1000, Name: "region", Transform: iceberg.IdentityTransform{},
	})
	tbl := b.create(t, "parts", nil, catalog.WithPartitionSpec(&spec))
	tbl = b.appendJSON(t, tbl, `[{"id": 1, "region": "a"}, {"id": 2, "region": "b"}, {"id": 3, "region": "a"}]`)
	res, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Metrics.PartitionNumber)
	require.EqualValues(t, 2, res.Metrics.DataFileNumber)
	require.EqualValues(t, 1, res.Metrics.MaxPartitionSmallFileNumber, "one small file in each partition")

	// A second file in an existing partition adds no partition; a null
	// region is a partition of its own.
	tbl = b.appendJSON(t, tbl, `[{"id": 4, "region": "b"}, {"id": 5, "region": "c"}, {"id": 6}]`)
	res, err = sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
	require.NoError(t, err)
	require.EqualValues(t, 4, res.Metrics.PartitionNumber)
	require.EqualValues(t, 5, res.Metrics.DataFileNumber)
	require.EqualValues(t, 2, res.Metrics.MaxPartitionSmallFileNumber, "region b holds two small files")
}

func TestSampleDeleteFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "deletes", iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeMergeOnRead})
	tbl = b.appendJSON(t, tbl, `[{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}, {"id": 5}]`)
	tbl = b.deleteWhere(t, tbl, iceberg.EqualTo(iceberg.Reference("id"), int64(2)))
	tbl = b.equalityDelete(t, tbl, 4)

	res, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
	require.NoError(t, err)
	m := res.Metrics
	require.EqualValues(t, 1, m.DataFileNumber)
	require.EqualValues(t, 1, m.PositionDeleteFileNumber)
	require.EqualValues(t, 1, m.EqualityDeleteFileNumber)
	require.EqualValues(t, 2, m.DeleteFileNumber)
	require.EqualValues(t, 3, m.FileNumber)
	// Record count is what the data files hold: deleted rows are not subtracted.
	require.EqualValues(t, 5, m.RecordCount)
	// Delete file sizes are not part of the data file totals.
	_, entries := liveEntries(t, tbl, tbl.CurrentSnapshot())
	for _, e := range entries {
		if e.DataFile().ContentType() == iceberg.EntryContentData {
			require.Equal(t, e.DataFile().FileSizeBytes(), m.TotalFileSize)
		}
	}
	require.EqualValues(t, 3, m.ManifestNumber)
	// The delete debt: one deleted position and one deleted key over five
	// rows, two delete files of the one (unpartitioned) partition, no
	// deletion vector on a v2 table.
	require.EqualValues(t, 1, m.PositionDeleteRecordCount)
	require.EqualValues(t, 1, m.EqualityDeleteRecordCount)
	require.EqualValues(t, 0, m.DeletionVectorNumber)
	require.InDelta(t, 2.0/5, m.DeleteRatio, 1e-12)
	require.EqualValues(t, 2, m.MaxPartitionDeleteFileNumber)
}

// On a v3 table iceberg-go writes merge-on-read deletes as deletion
// vectors, one per data file, sharing one Puffin file; each counts its own
// cardinality.
func TestSampleDeletionVectors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "dvs", iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeMergeOnRead, "format-version": "3"})
	tbl = b.appendJSON(t, tbl, `[{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}]`)
	tbl = b.appendJSON(t, tbl, `[{"id": 5}, {"id": 6}, {"id": 7}, {"id": 8}]`)
	tbl = b.deleteWhere(t, tbl, iceberg.NewOr(iceberg.LessThan(iceberg.Reference("id"), int64(4)), iceberg.EqualTo(iceberg.Reference("id"), int64(8))))

	res, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
	require.NoError(t, err)
	m := res.Metrics
	require.EqualValues(t, 2, m.DeletionVectorNumber, "one per data file")
	require.EqualValues(t, 2, m.PositionDeleteFileNumber)
	require.EqualValues(t, 4, m.PositionDeleteRecordCount, "3 + 1 deleted positions")
	require.InDelta(t, 4.0/8, m.DeleteRatio, 1e-12)
	require.EqualValues(t, 2, m.MaxPartitionDeleteFileNumber)
}

func TestSampleEmptyTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "empty", nil)
	res, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
	require.NoError(t, err)
	require.Equal(t, sampler.Result{Metrics: sampler.Metrics{TargetFileSize: sampler.DefaultTargetFileSize}}, res)
}

func TestSampleOlderSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "history", iceberg.Properties{table.WriteTargetFileSizeBytesKey: "1000"})
	tbl = b.addFakeFiles(t, tbl, 100)
	first := tbl.CurrentSnapshot().SnapshotID
	tbl = b.addFakeFiles(t, tbl, 2000, 3000)

	res, err := sampler.Sample(b.ctx, tbl, first, sampler.Options{})
	require.NoError(t, err)
	require.Equal(t, first, res.SnapshotID)
	require.EqualValues(t, 1, res.Metrics.DataFileNumber)
	require.EqualValues(t, 100, res.Metrics.TotalFileSize)
	require.EqualValues(t, 1, res.Metrics.ManifestNumber)
	// Snapshot count and age describe the table, not the sampled snapshot.
	require.EqualValues(t, 2, res.Metrics.SnapshotNumber)

	res, err = sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Metrics.DataFileNumber)
}

func TestSampleUnknownSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.addFakeFiles(t, b.create(t, "unknown", nil), 10)
	_, err := sampler.Sample(b.ctx, tbl, 123456789, sampler.Options{})
	require.ErrorIs(t, err, sampler.ErrNoSuchSnapshot)
	require.ErrorContains(t, err, "123456789")
	require.ErrorContains(t, err, "ns.unknown")
}

func TestSampleBrokenManifest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"corrupt", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte("this is not an avro file"), 0o644))
		}},
		{"missing", func(t *testing.T, path string) {
			require.NoError(t, os.Remove(path))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			tbl := b.create(t, "broken", nil)
			tbl = b.addFakeFiles(t, tbl, 10)
			tbl = b.addFakeFiles(t, tbl, 20)
			manifests, _ := liveEntries(t, tbl, tbl.CurrentSnapshot())
			victim := manifests[len(manifests)-1].FilePath()
			tc.damage(t, localPath(victim))

			_, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
			require.Error(t, err)
			require.ErrorContains(t, err, victim)
		})
	}
}

func TestSampleBadTargetFileSize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "badtarget", iceberg.Properties{table.WriteTargetFileSizeBytesKey: "lots"})
	_, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
	require.ErrorIs(t, err, sampler.ErrInvalidArgument)
	require.ErrorContains(t, err, table.WriteTargetFileSizeBytesKey)

	// An explicit target does not need the property.
	res, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{TargetFileSize: 42})
	require.NoError(t, err)
	require.EqualValues(t, 42, res.Metrics.TargetFileSize)

	_, err = sampler.Sample(b.ctx, tbl, 0, sampler.Options{TargetFileSize: -1})
	require.ErrorIs(t, err, sampler.ErrInvalidArgument)
}

// TestMetricsJSONKeys pins the JSON names written to table_snapshot_metrics.
func TestMetricsJSONKeys(t *testing.T) {
	t.Parallel()
	raw, err := json.Marshal(sampler.Metrics{})
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(raw, &got))
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, []string{
		"file-number", "data-file-number", "position-delete-file-number", "equality-delete-file-number",
		"delete-file-number", "small-file-number", "data-file-mse", "avg-file-size", "total-file-size",
		"record-count", "manifest-number", "avg-manifest-size", "snapshot-number", "oldest-snapshot-age-ms",
		"partition-number", "max-partition-small-file-number", "target-file-size-bytes",
		"position-delete-record-count", "equality-delete-record-count", "deletion-vector-number", "delete-ratio",
		"max-partition-delete-file-number",
	}, keys)
}

func TestSmallFileBoundary(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// T = 7: 0.75·T = 5.25, so 5 is small and 6 is not.
	tbl := b.create(t, "boundary", iceberg.Properties{table.WriteTargetFileSizeBytesKey: strconv.Itoa(7)})
	tbl = b.addFakeFiles(t, tbl, 0, 5, 6, 7)
	res, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Metrics.SmallFileNumber)
	require.InDelta(t, (49+4+1)/4.0, res.Metrics.DataFileMSE, 1e-12)
}

func TestSampleCanceled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.addFakeFiles(t, b.create(t, "canceled", nil), 1, 2)
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	_, err := sampler.Sample(ctx, tbl, 0, sampler.Options{})
	require.ErrorIs(t, err, context.Canceled)
}

// A manifest whose list entry counts no added and no existing files holds
// only DELETED entries; the sampler does not read it (as PlanFiles does
// not). Proven by corrupting it: the sample still succeeds and matches a
// full decode of the live entries.
func TestSampleSkipsDeletedOnlyManifests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "deleted_only", nil)
	tbl = b.appendJSON(t, tbl, `[{"id": 1, "region": "a"}, {"id": 2, "region": "a"}]`)
	tbl = b.appendJSON(t, tbl, `[{"id": 3, "region": "b"}]`)
	tbl = b.deleteWhere(t, tbl, iceberg.LessThan(iceberg.Reference("id"), int64(3)))

	fs, err := tbl.FS(b.ctx)
	require.NoError(t, err)
	all, err := tbl.CurrentSnapshot().Manifests(fs)
	require.NoError(t, err)
	var skipped []string
	for _, mf := range all {
		if !mf.HasAddedFiles() && !mf.HasExistingFiles() {
			skipped = append(skipped, mf.FilePath())
		}
	}
	require.NotEmpty(t, skipped, "the delete should leave a manifest of DELETED entries only")
	_, live := liveEntries(t, tbl, tbl.CurrentSnapshot())
	require.Len(t, live, 1)
	for _, p := range skipped {
		require.NoError(t, os.WriteFile(localPath(p), []byte("not read"), 0o644))
	}

	res, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{ScanTasks: true})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Metrics.DataFileNumber)
	require.EqualValues(t, 1, res.Metrics.RecordCount)
	require.EqualValues(t, len(all), res.Metrics.ManifestNumber)
	require.Len(t, res.Tasks, 1)
	require.Equal(t, live[0].DataFile().FilePath(), res.Tasks[0].File.FilePath())
}
