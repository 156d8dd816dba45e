package sampler_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/sampler"
	"github.com/tms-dev/tms/testdata"
)

// benchRecipe is the testdata recipe of the benchmark table, and
// benchDataFiles its number of data files.
const (
	benchRecipe    = "tms.bench_10k"
	benchDataFiles = 10_000
)

var bench struct {
	once sync.Once
	dir  string
	tbl  *table.Table
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.dir != "" {
		os.RemoveAll(bench.dir)
	}
	os.Exit(code)
}

// benchTable returns testdata's tms.bench_10k table: 10,000 real parquet data
// files (with the column statistics iceberg-go writes) in exactly 100
// manifests. It is built once per test binary (about 40 s on two cores), only
// when a benchmark asks for it.
func benchTable(tb testing.TB) *table.Table {
	tb.Helper()
	bench.once.Do(func() {
		bench.dir, bench.err = os.MkdirTemp("", "tms-sampler-bench-")
		if bench.err != nil {
			return
		}
		ctx := context.Background()
		if _, bench.err = testdata.Build(ctx, bench.dir, testdata.BuildOptions{
			Recipes: []string{benchRecipe}, Scale: testdata.DefaultScale,
		}); bench.err != nil {
			return
		}
		var cat catalog.Catalog
		if cat, bench.err = catalogs.OpenLocal(ctx, bench.dir, false); bench.err != nil {
			return
		}
		ident, _ := catalogs.ParseIdent(benchRecipe)
		bench.tbl, bench.err = cat.LoadTable(ctx, ident)
	})
	require.NoError(tb, bench.err)
	return bench.tbl
}

func BenchmarkSample(b *testing.B) {
	tbl := benchTable(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := sampler.Sample(ctx, tbl, 0, sampler.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if res.Metrics.DataFileNumber != benchDataFiles {
			b.Fatalf("sampled %d data files", res.Metrics.DataFileNumber)
		}
	}
}

func BenchmarkPlanFiles(b *testing.B) {
	tbl := benchTable(b)
	ctx := context.Background()
	id := tbl.CurrentSnapshot().SnapshotID
	b.ReportAllocs()
	for b.Loop() {
		tasks, err := tbl.Scan(table.WithSnapshotID(id)).PlanFiles(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(tasks) != benchDataFiles {
			b.Fatalf("planned %d tasks", len(tasks))
		}
	}
}

// BenchmarkSampleVsPlanFiles reports Sample's time as a ratio of PlanFiles'
// on the same snapshot (metric "sample/plan"; the design goal is ≤ 1.2).
func BenchmarkSampleVsPlanFiles(b *testing.B) {
	tbl := benchTable(b)
	ctx := context.Background()
	var ratio float64
	for b.Loop() {
		c, err := compareWithPlanFiles(ctx, tbl, 5)
		if err != nil {
			b.Fatal(err)
		}
		ratio = c.Ratio()
		b.Log(c)
	}
	b.ReportMetric(ratio, "sample/plan")
}

func TestCompareWithPlanFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "compare", nil)
	_, err := compareWithPlanFiles(b.ctx, tbl, 1)
	require.ErrorIs(t, err, sampler.ErrInvalidArgument, "an empty table has nothing to compare")

	tbl = b.addFakeFiles(t, tbl, 1, 2, 3)
	tbl = b.addFakeFiles(t, tbl, 4)
	c, err := compareWithPlanFiles(b.ctx, tbl, 2)
	require.NoError(t, err)
	require.EqualValues(t, 4, c.DataFiles)
	require.EqualValues(t, 2, c.Manifests)
	require.Equal(t, tbl.CurrentSnapshot().SnapshotID, c.SnapshotID)
	require.Positive(t, c.Sample)
	require.Positive(t, c.PlanFiles)
	require.Contains(t, c.String(), "ratio")
}
