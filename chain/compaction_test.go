package chain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/sampler"
)

func TestCompactionSmallFiles(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.small_files")
	before := b.sum(t)
	var mu sync.Mutex
	var seen []string
	b.opts.Hooks.Sampled = func(_ context.Context, ty Type, when string, r sampler.Result) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(ty)+"/"+when)
		return nil
	}
	rep := b.run(t, Step{Type: Compaction})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Reason, "data-file-mse")
	require.Contains(t, tr.Reason, "≥ minDataFileMse")
	require.EqualValues(t, smallFiles, tr.MetricsBefore.DataFileNumber)
	require.EqualValues(t, 1, tr.MetricsAfter.DataFileNumber)
	require.NotEqual(t, tr.BeforeSnapshotID, tr.AfterSnapshotID)
	require.Equal(t, []string{"compaction/before", "compaction/after"}, seen)
	require.Equal(t, before, b.sum(t))
	require.Empty(t, b.strayFiles(t))
	d, ok := tr.Detail.(*CompactionDetail)
	require.True(t, ok)
	require.Equal(t, smallFiles, d.InputFiles)
	require.Equal(t, 1, d.OutputFiles)
}

func TestCompactionBelowThresholdSkips(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.small_files")
	rep := b.run(t, Step{Type: Compaction, Policy: policyJSON(`{"minDataFileMse": 1e30}`)})
	require.Equal(t, Skipped, rep.Types[0].Outcome)
	require.Contains(t, rep.Types[0].Reason, "below thresholds: data-file-mse")
	require.Equal(t, rep.Types[0].BeforeSnapshotID, b.load(t).CurrentSnapshot().SnapshotID)
}

func TestCompactionDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.small_files")
	files := diskFiles(t, b.load(t))
	b.opts.DryRun = true
	rep := b.run(t, Step{Type: Compaction})
	require.Equal(t, Skipped, rep.Types[0].Outcome)
	require.True(t, strings.HasPrefix(rep.Types[0].Reason, fmt.Sprintf("dry run: would rewrite %d files", smallFiles)), rep.Types[0].Reason)
	require.Equal(t, files, diskFiles(t, b.load(t)))
}

func TestCompactionAppliesDeletes(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.deletes")
	before := b.sum(t)
	rep := b.run(t, Step{Type: Compaction})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Reason, "delete-file-number")
	require.EqualValues(t, 1, tr.MetricsAfter.DataFileNumber)
	require.Positive(t, tr.MetricsBefore.DeleteFileNumber)
	require.Zero(t, tr.MetricsAfter.DeleteFileNumber, "every delete file is dead once all data files are rewritten")
	require.Equal(t, before, b.sum(t))
	require.Empty(t, b.strayFiles(t))
}

func TestCompactionWhereOnlyMatchingPartitions(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.partitioned")
	before := b.sum(t)
	rep := b.run(t, Step{Type: Compaction, Policy: policyJSON(`{"rewriteOptions": {
		"where": "ts >= '2024-01-05T00:00:00+00:00'", "max-concurrent-file-group-rewrites": "3"}}`)})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.Equal(t, before, b.sum(t))
	perPartition := filesPerPartition(t, b.load(t))
	require.Len(t, perPartition, 7)
	for day, n := range perPartition {
		if day >= "2024-01-05" {
			require.Equal(t, 1, n, day)
		} else {
			require.Equal(t, 12, n, day)
		}
	}
	require.Empty(t, b.strayFiles(t))
}

func TestCompactionPartialProgress(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.partitioned")
	before := b.sum(t)
	rep := b.run(t, Step{Type: Compaction, Policy: policyJSON(`{"rewriteOptions": {
		"partial-progress.enabled": "true", "partial-progress.max-commits": "3"}}`)})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.Equal(t, 3, tr.Detail.(*CompactionDetail).Commits)
	require.EqualValues(t, 7, tr.MetricsAfter.DataFileNumber)
	require.Equal(t, before, b.sum(t))
	require.Empty(t, b.strayFiles(t))
}

// filesPerPartition counts the live data files per day partition.
func filesPerPartition(t *testing.T, tbl *table.Table) map[string]int {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	require.NoError(t, err)
	out := map[string]int{}
	for _, task := range tasks {
		for _, v := range task.File.Partition() {
			day := v.(iceberg.Date).ToTime().Format("2006-01-02")
			out[day]++
		}
	}
	return out
}

// A writer that appends between our plan and our commit: the commit loses
// the race, the chain finds the writer's snapshot only appended, rebuilds
// the rewrite on it and commits; the writer's rows and ours are all there
// and nothing of the lost attempt is left.
func TestCompactionConcurrentAppend(t *testing.T) {
	t.Parallel()
	for _, retries := range []string{"0", "3"} {
		t.Run("retries="+retries, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "tms.small_files")
			b.setProps(t, iceberg.Properties{table.CommitNumRetriesKey: retries})
			var intended string
			var once sync.Once
			b.opts.Hooks.BeforeCommit = func(context.Context, Type) error {
				once.Do(func() {
					b.appendRows(t, 1_000_000, 500)
					intended = b.sum(t).Checksum
				})
				return nil
			}
			rep := b.run(t, Step{Type: Compaction})
			tr := rep.Types[0]
			require.Equal(t, Done, tr.Outcome, tr.Reason)
			require.Contains(t, tr.Reason, "rebased 1 times over 1 snapshots")
			rebases := tr.Detail.(*CompactionDetail).Rebases
			require.Len(t, rebases, 1)
			require.Len(t, rebases[0].Snapshots, 1)
			require.Equal(t, InterveningSnapshot{ID: rebases[0].To, Operation: "append", AddedDataFiles: 1}, rebases[0].Snapshots[0])
			require.Equal(t, rep.Types[0].BeforeSnapshotID, rebases[0].From)
			got := b.sum(t)
			require.Equal(t, intended, got.Checksum)
			require.EqualValues(t, smallRows+500, got.Rows)
			require.EqualValues(t, 2, tr.MetricsAfter.DataFileNumber, "the compacted file plus the appended one")
			require.Empty(t, b.strayFiles(t))
		})
	}
}

func TestCompactionConcurrentDelete(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.small_files")
	var intended string
	var once sync.Once
	b.opts.Hooks.BeforeCommit = func(context.Context, Type) error {
		once.Do(func() {
			b.deleteRows(t, 1500)
			intended = b.sum(t).Checksum
		})
		return nil
	}
	rep := b.run(t, Step{Type: Compaction})
	tr := rep.Types[0]
	require.Equal(t, Conflict, tr.Outcome, tr.Reason)
	got := b.sum(t)
	require.Equal(t, intended, got.Checksum)
	require.EqualValues(t, smallRows-1500, got.Rows)
	require.Empty(t, b.strayFiles(t))
}

// A commit after S0 ends the type as ended-drift; the next type still runs.
func TestDriftEndsTypeAndChainGoesOn(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.small_files")
	// The compaction's second table load is its drift gate: a writer
	// commits just before it, after S0.
	loads := 0
	b.cat = &loadHookCatalog{Catalog: b.cat, before: func() {
		if loads++; loads == 2 {
			b.appendRows(t, 1_000_000, 10)
		}
	}}
	rep := b.run(t, Step{Type: Compaction},
		Step{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 2}`)})
	require.Equal(t, EndedDrift, rep.Types[0].Outcome, rep.Types[0].Reason)
	require.Contains(t, rep.Types[0].Reason, "moved")
	require.Empty(t, rep.Types[0].Err)
	require.Equal(t, Done, rep.Types[1].Outcome, rep.Types[1].Reason)
	require.EqualValues(t, smallRows+10, b.sum(t).Rows)
	require.Empty(t, b.strayFiles(t))
}

var errFence = errors.New("fence is stale")

func TestBeforeCommitErrorStopsChain(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.small_files")
	head := b.load(t).CurrentSnapshot().SnapshotID
	before := b.sum(t)
	b.opts.Hooks.BeforeCommit = func(context.Context, Type) error { return errFence }
	rep, err := Run(b.ctx, b.cat, b.ident, []Step{{Type: Compaction}, {Type: ManifestRewrite}}, b.opts)
	require.ErrorIs(t, err, errFence)
	require.Len(t, rep.Types, 1)
	require.Equal(t, Failed, rep.Types[0].Outcome)
	require.True(t, rep.Failed())
	require.Contains(t, rep.Types[0].Err, "fence is stale")
	require.Equal(t, head, b.load(t).CurrentSnapshot().SnapshotID)
	require.Equal(t, before, b.sum(t))
	require.Empty(t, b.strayFiles(t))
}

func TestCompactionPolicyTargetAndPartitionLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.partitioned")
	before := b.sum(t)
	rep := b.run(t, Step{Type: Compaction, Policy: policyJSON(`{"maxPartitionNum": 2, "minDataFileMse": 1,
		"rewriteOptions": {"target-file-size-bytes": "1048576", "min-input-files": "2"}}`)})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.EqualValues(t, 1<<20, tr.MetricsBefore.TargetFileSize, "S0 is sampled against the policy's target")
	require.Len(t, tr.Detail.(*CompactionDetail).Groups, 2)
	compacted := 0
	for _, n := range filesPerPartition(t, b.load(t)) {
		if n == 1 {
			compacted++
		}
	}
	require.Equal(t, 2, compacted)
	require.Equal(t, before, b.sum(t))
}

// TestUnchangedTableSamplesOnce checks that a type whose table did not move
// since the previous type's sample reuses that sample instead of reading
// every manifest again: the manifests are made unreadable right after the
// first sample, and the second type still gets its S0. The reused metrics
// equal a fresh sample's, with only the clock-relative snapshot age
// refreshed.
func TestUnchangedTableSamplesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	tbl := b.load(t)
	clock := time.UnixMilli(tbl.CurrentSnapshot().TimestampMs).Add(time.Hour)
	b.opts.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	fs, err := tbl.FS(b.ctx)
	require.NoError(t, err)
	manifests, err := tbl.CurrentSnapshot().Manifests(fs)
	require.NoError(t, err)
	saved := map[string][]byte{}
	b.opts.Hooks.Sampled = func(_ context.Context, typ Type, when string, _ sampler.Result) error {
		if typ == Compaction && when == WhenBefore {
			for _, m := range manifests {
				p := localPath(m.FilePath())
				data, err := os.ReadFile(p)
				require.NoError(t, err)
				saved[p] = data
				require.NoError(t, os.WriteFile(p, []byte("garbage"), 0o644))
			}
		}
		return nil
	}
	rep := b.run(t,
		Step{Type: Compaction, Policy: policyJSON(`{"minDataFileMse": 1e30}`)},
		Step{Type: ManifestRewrite},
	)
	require.Equal(t, Skipped, rep.Types[0].Outcome)
	require.Equal(t, Skipped, rep.Types[1].Outcome)
	first, second := rep.Types[0].MetricsBefore, rep.Types[1].MetricsBefore
	require.Equal(t, rep.Types[0].BeforeSnapshotID, rep.Types[1].BeforeSnapshotID)
	require.Greater(t, second.OldestSnapshotAgeMs, first.OldestSnapshotAgeMs, "the age follows the clock")
	second.OldestSnapshotAgeMs = first.OldestSnapshotAgeMs
	require.Equal(t, first, second)

	// A fresh sample of the same snapshot agrees with the reused one.
	for p, data := range saved {
		require.NoError(t, os.WriteFile(p, data, 0o644))
	}
	fresh, err := sampler.Sample(b.ctx, b.load(t), 0, sampler.Options{Now: func() time.Time { return clock }})
	require.NoError(t, err)
	fresh.Metrics.OldestSnapshotAgeMs = first.OldestSnapshotAgeMs
	require.Equal(t, first, fresh.Metrics)
}

// TestGroupBuffering checks that the reader→writer buffer stays near
// compactionBufferBytes whatever the file sizes: big files get smaller
// Arrow batches instead of 64 batches of 131,072 rows.
func TestGroupBuffering(t *testing.T) {
	files := func(n int, size, rows int64) []table.FileScanTask {
		spec := iceberg.NewPartitionSpec()
		out := make([]table.FileScanTask, n)
		for i := range out {
			bld, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentData, fmt.Sprintf("f%d.parquet", i),
				iceberg.ParquetFile, nil, nil, nil, rows, size)
			require.NoError(t, err)
			out[i] = table.FileScanTask{File: bld.Build()}
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		tasks      []table.FileScanTask
		conc       int
		wantRows   int
		minBuf     int
		maxBuf     int
		bufferedMB float64 // upper bound of batches × estimated batch bytes
	}{
		// 200 files × 10,000 rows of ~16 B on disk: batches are whole files.
		{"bench 200x10k", files(200, 164_000, 10_000), 1, 32_263, 30, 40, 25},
		// 128 MiB files of 1M rows: 2 MiB batches instead of 131,072 rows.
		{"big files", files(10, 128<<20, 1<<20), 1, 4096, 12, 12, 25},
		// Two groups share the budget.
		{"big files, 2 groups", files(10, 128<<20, 1<<20), 2, 4096, 6, 6, 13},
		// Tiny files: batches are whole files, capped at maxGroupBatchBuffer.
		{"tiny files", files(100, 1_000, 10), 1, 5242, maxGroupBatchBuffer, maxGroupBatchBuffer, 1},
		// Very wide rows: at least minBatchRows, at least minGroupBatchBuffer.
		{"wide rows", files(4, 256<<20, 4096), 5, minBatchRows, minGroupBatchBuffer, minGroupBatchBuffer, 130},
		// No row counts: iceberg-go's defaults bounded by the minimum buffer.
		{"unknown", files(3, 0, 0), 1, maxBatchRows, minGroupBatchBuffer, minGroupBatchBuffer, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, buf := groupBuffering(tc.tasks, tc.conc)
			require.Equal(t, tc.wantRows, rows)
			require.GreaterOrEqual(t, buf, tc.minBuf)
			require.LessOrEqual(t, buf, tc.maxBuf)
			var size, count int64
			for _, ft := range tc.tasks {
				size, count = size+ft.File.FileSizeBytes(), count+ft.File.Count()
			}
			if count > 0 {
				perBatch := float64(min(int64(rows), count/int64(len(tc.tasks)))) * float64(size*decodedPerEncodedByte/count)
				require.LessOrEqual(t, float64(buf)*perBatch/(1<<20), tc.bufferedMB)
			}
		})
	}
}

func TestGroupConcurrency(t *testing.T) {
	for _, tc := range []struct{ n, limit, procs, want int }{
		{n: 1, limit: 5, procs: 2, want: 1},
		{n: 2, limit: 5, procs: 2, want: 2},
		{n: 3, limit: 5, procs: 2, want: 3},   // all at once: 2 then 1 would leave a CPU idle
		{n: 4, limit: 5, procs: 2, want: 2},   // 2 and 2
		{n: 5, limit: 5, procs: 2, want: 3},   // 3 then 2, not 2, 2, 1
		{n: 5, limit: 2, procs: 2, want: 2},   // the policy's limit wins
		{n: 7, limit: 5, procs: 2, want: 4},   // 4 then 3
		{n: 200, limit: 5, procs: 2, want: 2}, // even rounds
		{n: 13, limit: 20, procs: 4, want: 5}, // 4, 4, 4, 1 and 5, 5, 3 leave a tail; 6, 6, 1 too: procs+1
		{n: 9, limit: 20, procs: 8, want: 9},
		{n: 17, limit: 20, procs: 8, want: 9}, // 9 then 8, not 8, 8, 1
		{n: 11, limit: 20, procs: 4, want: 6}, // 6 then 5, not 4, 4, 3 or 5, 5, 1
		{n: 5, limit: 5, procs: 1, want: 1},
		{n: 0, limit: 5, procs: 2, want: 1},
	} {
		require.Equal(t, tc.want, groupConcurrency(tc.n, tc.limit, tc.procs), "%+v", tc)
	}
}

// What lands while a compaction works decides whether it commits: deletes
// in partitions it does not rewrite (copy-on-write and merge-on-read) are
// benign and it commits on top of them; a merge-on-read delete in a
// partition it rewrites, and a schema change, are conflicts. Rows always
// end as the writers intended.
func TestCompactionCommitsThroughBenignChanges(t *testing.T) {
	t.Parallel()
	onlyLate := policyJSON(`{"rewriteOptions": {"where": "ts >= '2024-01-05T00:00:00+00:00'"}}`)
	early := iceberg.LessThan(iceberg.Reference("ts"), "2024-01-02T00:00:00+00:00")
	late := iceberg.GreaterThanEqual(iceberg.Reference("ts"), "2024-01-06T00:00:00+00:00")
	mor := iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeMergeOnRead}
	for _, tc := range []struct {
		name    string
		props   iceberg.Properties
		write   func(t *testing.T, b bundle)
		outcome Outcome
		reason  string
	}{
		{"copy-on-write delete elsewhere", iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeCopyOnWrite},
			func(t *testing.T, b bundle) { b.delete(t, early) }, Done, "rebased 1 times"},
		{"merge-on-read delete elsewhere", mor,
			func(t *testing.T, b bundle) { b.delete(t, early) }, Done, "rebased 1 times"},
		{"merge-on-read delete in a rewritten partition", mor,
			func(t *testing.T, b bundle) {
				b.delete(t, iceberg.NewAnd(late, iceberg.LessThan(iceberg.Reference("id"), int64(350))))
			},
			Conflict, "which may apply to the input files"},
		{"copy-on-write delete in a rewritten partition", iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeCopyOnWrite},
			func(t *testing.T, b bundle) { b.delete(t, late) }, Conflict, "removed input file"},
		{"schema change", nil, func(t *testing.T, b bundle) {
			txn := b.load(t).NewTransaction()
			require.NoError(t, txn.UpdateSchema(true, false).AddColumn([]string{"extra"}, iceberg.PrimitiveTypes.Int32, "", false, nil).Commit())
			_, err := txn.Commit(b.ctx)
			require.NoError(t, err)
			b.appendRows(t, 1_000_000, 10) // a snapshot, so the head moves
		}, Conflict, "the schema changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "tms.partitioned")
			if tc.props != nil {
				b.setProps(t, tc.props)
			}
			var intended checksum.Result
			var once sync.Once
			b.opts.Hooks.BeforeCommit = func(context.Context, Type) error {
				once.Do(func() {
					tc.write(t, b)
					intended = b.sum(t)
				})
				return nil
			}
			rep := b.run(t, Step{Type: Compaction, Policy: onlyLate})
			tr := rep.Types[0]
			require.Equal(t, tc.outcome, tr.Outcome, tr.Reason)
			require.Contains(t, tr.Reason, tc.reason)
			require.Equal(t, intended, b.sum(t))
			require.Empty(t, b.strayFiles(t))
		})
	}
}

func TestScanConcurrency(t *testing.T) {
	t.Parallel()
	files := func(n int, size int64) []table.FileScanTask {
		out := make([]table.FileScanTask, n)
		for i := range out {
			b, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData, fmt.Sprintf("s3://b/f%d.parquet", i),
				iceberg.ParquetFile, nil, nil, nil, 10, size)
			require.NoError(t, err)
			out[i] = table.FileScanTask{File: b.Build()}
		}
		return out
	}
	for _, tc := range []struct {
		loc        string
		n          int
		size       int64
		procs, con int
		want       int
	}{
		{"file:///w/t", 100, 10 << 10, 2, 1, 2}, // local: the CPUs
		{"/w/t", 100, 10 << 10, 4, 2, 2},        // local: a share of them
		{"s3://b/t", 1000, 10 << 10, 2, 1, 32},  // small objects: latency-bound
		{"s3://b/t", 10, 16 << 20, 2, 1, 4},     // 64 MiB of 16 MiB files
		{"gs://b/t", 10, 512 << 20, 2, 1, 2},    // big files: never under the CPU share
		{"abfss://c@a/t", 3, 1 << 20, 8, 2, 32}, // capped
	} {
		require.Equal(t, tc.want, scanConcurrency(tc.loc, files(tc.n, tc.size), tc.procs, tc.con), "%+v", tc)
	}
}

// loadHookCatalog calls before ahead of every LoadTable.
type loadHookCatalog struct {
	catalog.Catalog
	before func()
}

func (c *loadHookCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	c.before()
	return c.Catalog.LoadTable(ctx, ident)
}
