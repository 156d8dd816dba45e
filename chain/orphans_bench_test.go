package chain

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/testdata"
)

// Orphan-planning benchmark table: 10,000 data files in 50 appends of 200,
// and 1,000 metadata files (50 manifests, 50 manifest lists, and
// metadata.json files: one per append and one per property-only commit,
// all kept in the metadata log), plus a few planted orphans.
const (
	benchOrphanAppends    = 50
	benchOrphanPerAppend  = 200
	benchOrphanMetaFiles  = 1_000
	benchOrphanPlanted    = 10
	benchOrphanFileLength = 16
)

// orphanBenchTable builds the table. The data files are real files of a
// few bytes registered with DataFileBuilder + AddDataFiles: planning lists
// and compares paths and never opens a data file, so writing 10,000
// parquet files would only cost setup time. The metadata files are the
// product of real commits (appends, then property-only commits with
// write.metadata.previous-versions-max raised so the log keeps them all);
// every file gets an old mtime so that both planners compare all of them.
func orphanBenchTable(b *testing.B) (*table.Table, string) {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	cat, err := catalogs.OpenLocal(ctx, dir, true)
	require.NoError(b, err)
	require.NoError(b, cat.CreateNamespace(ctx, table.Identifier{"bench"}, nil))
	tbl, err := cat.CreateTable(ctx, table.Identifier{"bench", "orphans"}, testdata.Schema(),
		catalog.WithProperties(iceberg.Properties{table.MetadataPreviousVersionsMaxKey: strconv.Itoa(2 * benchOrphanMetaFiles)}))
	require.NoError(b, err)
	root := localPath(tbl.Location())
	require.NoError(b, os.MkdirAll(filepath.Join(root, "data"), 0o755))
	content := make([]byte, benchOrphanFileLength)
	for a := range benchOrphanAppends {
		dfs := make([]iceberg.DataFile, benchOrphanPerAppend)
		for i := range dfs {
			p := filepath.Join(root, "data", fmt.Sprintf("%05d-%d-7e570000-0000-4000-8000-%012d-00001.parquet", i, a, a*benchOrphanPerAppend+i))
			require.NoError(b, os.WriteFile(p, content, 0o644))
			bld, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData, "file://"+p,
				iceberg.ParquetFile, nil, nil, nil, 1, benchOrphanFileLength)
			require.NoError(b, err)
			dfs[i] = bld.Build()
		}
		tx := tbl.NewTransaction()
		require.NoError(b, tx.AddDataFiles(ctx, dfs, nil, table.WithoutDuplicateCheck()))
		tbl, err = tx.Commit(ctx)
		require.NoError(b, err)
	}
	countMeta := func() int {
		n := 0
		require.NoError(b, filepath.WalkDir(filepath.Join(root, "metadata"), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return err
		}))
		return n
	}
	for i := countMeta(); i < benchOrphanMetaFiles; i++ {
		tx := tbl.NewTransaction()
		require.NoError(b, tx.SetProperties(iceberg.Properties{"tms.bench.commit": strconv.Itoa(i)}))
		tbl, err = tx.Commit(ctx)
		require.NoError(b, err)
	}
	require.Equal(b, benchOrphanMetaFiles, countMeta())
	for i := range benchOrphanPlanted {
		sub := "data"
		if i%2 == 1 {
			sub = "metadata"
		}
		p := filepath.Join(root, sub, fmt.Sprintf("7e570000-0000-4000-8000-%012d-orphan.avro", i))
		require.NoError(b, os.WriteFile(p, content, 0o644))
	}
	old := time.Now().Add(-testdata.OrphanAge)
	require.NoError(b, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, old, old)
	}))
	return tbl, dir
}

// BenchmarkOrphanPlanning times TMS's orphan planning (plan and guard)
// against iceberg-go's PlanOrphanFiles on the same table in the same run,
// alternating which goes first. Both must plan exactly the planted orphans.
func BenchmarkOrphanPlanning(b *testing.B) {
	tbl, _ := orphanBenchTable(b)
	ctx := context.Background()
	fsys, err := tbl.FS(ctx)
	require.NoError(b, err)
	pl := orphanPlanner{canon: testCanon(b, nil, nil, ""), olderThan: policy.DefaultOrphanOlderThan}
	var oursT, theirsT time.Duration
	ours := func() {
		start := time.Now()
		plan, err := pl.plan(ctx, tbl, fsys)
		require.NoError(b, err)
		require.NoError(b, plan.guard())
		oursT += time.Since(start)
		require.Len(b, plan.files, benchOrphanPlanted)
	}
	theirs := func() {
		start := time.Now()
		plan, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(policy.DefaultOrphanOlderThan))
		theirsT += time.Since(start)
		require.NoError(b, err)
		require.Len(b, plan.Files(), benchOrphanPlanted)
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		alternate(i, ours, theirs)
		i++
	}
	n := float64(i)
	b.ReportMetric(float64(oursT.Milliseconds())/n, "tms-ms/op")
	b.ReportMetric(float64(theirsT.Milliseconds())/n, "iceberg-go-ms/op")
	b.ReportMetric(oursT.Seconds()/theirsT.Seconds(), "tms/iceberg-go")
}
