package checksum_test

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/testdata"
)

// TestRecipeWithDeletesMatchesSurvivors compares testdata's tms.deletes (ten
// appends, then position and equality delete commits) with a table written in
// one commit, in reverse order, with only the rows the recipe says survive.
func TestRecipeWithDeletesMatchesSurvivors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := testdata.BuildT(t, "tms.deletes")
	cat, err := catalogs.OpenLocal(ctx, dir, false)
	require.NoError(t, err)
	tbl, err := cat.LoadTable(ctx, table.Identifier{"tms", "deletes"})
	require.NoError(t, err)
	got, err := checksum.Table(ctx, tbl, 0)
	require.NoError(t, err)

	rows, err := testdata.ExpectedRows("tms.deletes", testdata.DefaultScale)
	require.NoError(t, err)
	slices.Reverse(rows)
	survivors, err := cat.CreateTable(ctx, table.Identifier{"tms", "survivors"}, testdata.Schema())
	require.NoError(t, err)
	survivors = appendRows(t, survivors, rows)
	want, err := checksum.Table(ctx, survivors, 0)
	require.NoError(t, err)

	require.EqualValues(t, len(rows), got.Rows)
	require.Equal(t, want, got)

	// An older snapshot reads its own rows: the first append's.
	recipe, err := testdata.Lookup("tms.deletes")
	require.NoError(t, err)
	first := tbl.Metadata().Snapshots()[0].SnapshotID
	before, err := checksum.Table(ctx, tbl, first)
	require.NoError(t, err)
	require.EqualValues(t, recipe.RowsPerAppend, before.Rows)
	require.NotEqual(t, got.Checksum, before.Checksum)
}

// appendRows writes testdata rows to tbl in one commit.
func appendRows(t *testing.T, tbl *table.Table, rows []testdata.Row) *table.Table {
	t.Helper()
	rec, err := testdata.RecordBatch(rows)
	require.NoError(t, err)
	defer rec.Release()
	at := array.NewTableFromRecords(rec.Schema(), []arrow.RecordBatch{rec})
	defer at.Release()
	tbl, err = tbl.AppendTable(context.Background(), at, 1<<20, iceberg.Properties{})
	require.NoError(t, err)
	return tbl
}
