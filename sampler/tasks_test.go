package sampler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/sampler"
	"github.com/tms-dev/tms/testdata"
)

// TestSampleScanTasks: with ScanTasks, a table without delete files gets
// exactly the scan tasks iceberg-go's PlanFiles returns (same files, whole,
// same partitions, sizes, record counts and sequence numbers), so a
// compaction can plan from the sample; a table with delete files gets none
// (its plan must match deletes to files), and without the option neither
// does any table.
func TestSampleScanTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	_, err := testdata.Build(ctx, dir, testdata.BuildOptions{
		Recipes: []string{"tms.partitioned", "tms.deletes"}, Scale: testdata.DefaultScale,
	})
	require.NoError(t, err)
	cat, err := catalogs.OpenLocal(ctx, dir, false)
	require.NoError(t, err)
	key := func(ts []table.FileScanTask) []string {
		var out []string
		for _, task := range ts {
			f := task.File
			seq := int64(-1)
			if task.DataSequenceNumber != nil {
				seq = *task.DataSequenceNumber
			}
			out = append(out, fmt.Sprintf("%s size=%d len=%d start=%d rows=%d spec=%d part=%v seq=%d",
				f.FilePath(), f.FileSizeBytes(), task.Length, task.Start, f.Count(), f.SpecID(), f.Partition(), seq))
		}
		slices.Sort(out)
		return out
	}
	for _, name := range []string{"tms.partitioned", "tms.deletes"} {
		ident, err := catalogs.ParseIdent(name)
		require.NoError(t, err)
		tbl, err := cat.LoadTable(ctx, ident)
		require.NoError(t, err)
		now := func() time.Time { return time.UnixMilli(tbl.Metadata().LastUpdatedMillis()) }
		res, err := sampler.Sample(ctx, tbl, 0, sampler.Options{ScanTasks: true, Now: now})
		require.NoError(t, err)
		plain, err := sampler.Sample(ctx, tbl, 0, sampler.Options{Now: now})
		require.NoError(t, err)
		require.Nil(t, plain.Tasks, "%s: no tasks unless asked", name)
		require.Equal(t, plain.Metrics, res.Metrics, "%s: the same metrics either way", name)
		if res.Metrics.DeleteFileNumber > 0 {
			require.Nil(t, res.Tasks, "%s has delete files: iceberg-go plans it", name)
			continue
		}
		planned, err := tbl.Scan().PlanFiles(ctx)
		require.NoError(t, err)
		require.Len(t, res.Tasks, int(res.Metrics.DataFileNumber), name)
		require.Equal(t, key(planned), key(res.Tasks), "%s: the sample's tasks are PlanFiles' tasks", name)
	}
}
