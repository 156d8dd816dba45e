package sampler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/sampler"
	"github.com/tms-dev/tms/testdata"
)

// TestSampleRecipes checks the sampler against what the testdata builder
// counted by reading the tables back, on real tables with partitions, many
// manifests, and position and equality delete files.
func TestSampleRecipes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	report, err := testdata.Build(ctx, dir, testdata.BuildOptions{
		Recipes: []string{"tms.deletes", "tms.partitioned", "tms.many_snapshots"},
		Scale:   testdata.DefaultScale,
	})
	require.NoError(t, err)
	cat, err := catalogs.OpenLocal(ctx, dir, false)
	require.NoError(t, err)

	for _, want := range report.Tables {
		t.Run(want.Name, func(t *testing.T) {
			ident, err := catalogs.ParseIdent(want.Name)
			require.NoError(t, err)
			tbl, err := cat.LoadTable(ctx, ident)
			require.NoError(t, err)
			oldest := tbl.Metadata().Snapshots()[0].TimestampMs
			for _, s := range tbl.Metadata().Snapshots() {
				oldest = min(oldest, s.TimestampMs)
			}
			now := time.UnixMilli(oldest + 60_000)

			res, err := sampler.Sample(ctx, tbl, 0, sampler.Options{Now: func() time.Time { return now }})
			require.NoError(t, err)
			m := res.Metrics
			require.EqualValues(t, want.DataFiles, m.DataFileNumber)
			require.EqualValues(t, want.PositionDeleteFiles, m.PositionDeleteFileNumber)
			require.EqualValues(t, want.EqualityDeleteFiles, m.EqualityDeleteFileNumber)
			require.EqualValues(t, want.PositionDeleteFiles+want.EqualityDeleteFiles, m.DeleteFileNumber)
			require.EqualValues(t, want.DataFiles+want.PositionDeleteFiles+want.EqualityDeleteFiles, m.FileNumber)
			require.EqualValues(t, want.Partitions, m.PartitionNumber)
			require.EqualValues(t, want.Manifests, m.ManifestNumber)
			require.EqualValues(t, want.Snapshots, m.SnapshotNumber)
			require.EqualValues(t, want.Rows+want.DeletedRows, m.RecordCount, "record count does not subtract deletes")
			require.EqualValues(t, 60_000, m.OldestSnapshotAgeMs)
			// Every recipe file is far below the 512 MiB target.
			require.EqualValues(t, testdata.DefaultTargetFileSize, m.TargetFileSize)
			require.Equal(t, m.DataFileNumber, m.SmallFileNumber)
		})
	}
}
