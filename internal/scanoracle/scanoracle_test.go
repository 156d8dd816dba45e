package scanoracle_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/scanoracle"
)

// The oracle on a v2 merge-on-read table written by iceberg-go alone: Rows
// leaves out the rows a position delete removed, Diff names a lost and an
// extra row, and MissingFiles and Missing report a data file removed from
// disk behind the table's back.
func TestOracle(t *testing.T) {
	ctx := t.Context()
	cat, err := catalogs.OpenLocal(ctx, t.TempDir(), true)
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"tms"}, nil))
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "payload", Type: iceberg.PrimitiveTypes.String})
	tbl, err := cat.CreateTable(ctx, table.Identifier{"tms", "mor"}, schema, catalog.WithProperties(iceberg.Properties{
		"format-version": "2", table.WriteDeleteModeKey: table.WriteModeMergeOnRead,
	}))
	require.NoError(t, err)
	rows, err := scanoracle.Rows(ctx, tbl)
	require.NoError(t, err)
	require.Empty(t, rows, "a table without a snapshot has no rows")

	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	require.NoError(t, err)
	for _, js := range []string{
		`[{"id": 1, "payload": "one"}, {"id": 2, "payload": null}, {"id": 3, "payload": "NULL"}]`,
		`[{"id": 4, "payload": "a | b"}]`,
	} {
		at, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{js})
		require.NoError(t, err)
		tbl, err = tbl.AppendTable(ctx, at, at.NumRows(), nil)
		at.Release()
		require.NoError(t, err)
	}
	tbl, err = tbl.Delete(ctx, iceberg.EqualTo(iceberg.Reference("id"), int64(1)), nil)
	require.NoError(t, err)
	data, deletes, err := scanoracle.LiveFiles(ctx, tbl)
	require.NoError(t, err)
	require.Len(t, data, 2, "merge-on-read: no data file rewritten")
	require.Len(t, deletes, 1)
	require.Equal(t, iceberg.EntryContentPosDeletes, deletes[0].ContentType())

	rows, err = scanoracle.Rows(ctx, tbl)
	require.NoError(t, err)
	require.Equal(t, []string{
		`id=2 | payload=NULL`,
		`id=3 | payload="NULL"`,
		`id=4 | payload="a | b"`,
	}, rows, "the deleted row is left out, NULL and the string NULL differ")

	require.Empty(t, scanoracle.Diff(rows, []string{rows[2], rows[0], rows[1]}, 5), "order does not matter")
	diff := scanoracle.Diff(rows, []string{rows[0], rows[1], rows[1]}, 5)
	require.Contains(t, diff, "want 3 rows, got 3: 1 rows lost, 1 rows extra")
	require.Contains(t, diff, `lost: id=4 | payload="a | b"`)
	require.Contains(t, diff, `extra: id=3 | payload="NULL"`, "a duplicate is an extra row")
	require.Contains(t, scanoracle.Diff(append(rows, "x", "y"), nil, 1), "… 4 more lost")

	refs, err := scanoracle.ReferencedFiles(ctx, tbl, false)
	require.NoError(t, err)
	all, err := scanoracle.ReferencedFiles(ctx, tbl, true)
	require.NoError(t, err)
	for _, f := range append(data, deletes...) {
		require.Contains(t, refs, f.FilePath())
	}
	require.Contains(t, refs, tbl.MetadataLocation())
	require.Greater(t, len(all), len(refs), "older snapshots have their own manifest lists")
	missing, err := scanoracle.MissingFiles(ctx, tbl, true)
	require.NoError(t, err)
	require.Empty(t, missing)

	gone := data[0].FilePath()
	path, ok := strings.CutPrefix(gone, "file://")
	require.True(t, ok, gone)
	require.NoError(t, os.Remove(path))
	missing, err = scanoracle.MissingFiles(ctx, tbl, false)
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("current snapshot %d Data file %s", tbl.CurrentSnapshot().SnapshotID, gone)}, missing)
	missing, err = scanoracle.Missing(ctx, tbl, data[1].FilePath(), gone, "file:"+path)
	require.NoError(t, err)
	require.Equal(t, []string{gone, "file:" + path}, missing, "every spelling is opened through the FileIO")
}
