package testdata

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
)

// TestBench10kShape builds a three-commit cut of tms.bench_10k through the
// same code path (100 files per append, several appends per catalog commit)
// and checks each append became one manifest of exactly 100 data files.
func TestBench10kShape(t *testing.T) {
	t.Parallel()
	r := mustLookup(t, "tms.bench_10k")
	r.Appends = 3
	r.AppendsPerCommit = 2 // one commit with two snapshots, one with one
	dir := t.TempDir()
	cat, err := catalogs.OpenLocal(t.Context(), dir, true)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.(io.Closer).Close() })
	tr, err := buildTable(t.Context(), cat, r, 1)
	require.NoError(t, err)

	l := load(t, dir, r.Name)
	c := l.current(t)
	require.Len(t, c.data, 300)
	require.Len(t, c.manifests, 3)
	for _, m := range c.manifests {
		require.EqualValues(t, 100, m.AddedDataFiles(), m.FilePath())
	}
	require.Len(t, l.tbl.Metadata().Snapshots(), 3)
	rows := l.scan(t)
	require.Len(t, rows, 3000)
	requireReport(t, tr, l, c, len(rows))
}
