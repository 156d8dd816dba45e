//go:build !race

package testdata

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBench10k builds the full recipe. Under the race detector (make test)
// it would take minutes, so it is built only without it (`go test
// ./testdata/`); TestBench10kShape covers the same code path under -race, and
// make bench builds the full table for the sampler benchmark.
func TestBench10k(t *testing.T) {
	t.Parallel()
	dir, tr := build(t, "tms.bench_10k", 1)
	l := load(t, dir, "tms.bench_10k")
	c := l.current(t)
	require.Len(t, c.data, 10_000)
	require.Len(t, c.manifests, 100)
	for _, m := range c.manifests {
		require.EqualValues(t, 100, m.AddedDataFiles(), m.FilePath())
	}
	require.Len(t, l.tbl.Metadata().Snapshots(), 100)
	requireSmallFiles(t, l, c.data)
	var records int64
	for _, df := range c.data {
		records += df.Count()
	}
	require.EqualValues(t, 100_000, records)
	requireReport(t, tr, l, c, 100_000) // no full scan: 10,000 files take long to read

}
