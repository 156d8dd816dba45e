package checksum_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/checksum"
)

func TestSameRowsDifferentLayoutsAgree(t *testing.T) {
	t.Parallel()
	b := setup(t)
	one := b.appendJSON(t, b.create(t, "one", richSchema),
		rowsJSON(richRow(1), richRow(2), richRow(3), richRow(4), richRow(5), richRow(6)))

	// Same rows in three files, in another order within and across files.
	three := b.create(t, "three", richSchema)
	three = b.appendJSON(t, three, rowsJSON(richRow(6), richRow(5)))
	three = b.appendJSON(t, three, rowsJSON(richRow(3)))
	three = b.appendJSON(t, three, rowsJSON(richRow(4), richRow(1), richRow(2)))

	got1, got3 := b.sum(t, one, 0), b.sum(t, three, 0)
	require.EqualValues(t, 6, got1.Rows)
	require.Equal(t, got1, got3)
	require.Len(t, got1.Checksum, 32)
	require.NotEqual(t, checksum.EmptyChecksum, got1.Checksum)
}

func TestChangedMissingOrDuplicatedRowDiffers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := []string{richRow(1), richRow(2), richRow(3)}
	want := b.sum(t, b.appendJSON(t, b.create(t, "base", richSchema), rowsJSON(base...)), 0)

	changedRow := strings.Replace(richRow(2), `"score": 2.5`, `"score": 2.75`, 1)
	require.NotEqual(t, richRow(2), changedRow)
	nested := strings.Replace(richRow(2), `"value": 2}`, `"value": 3}`, 1)
	require.NotEqual(t, richRow(2), nested)
	for name, rows := range map[string][]string{
		"changed":    {richRow(1), changedRow, richRow(3)},
		"nested":     {richRow(1), nested, richRow(3)},
		"missing":    {richRow(1), richRow(3)},
		"duplicated": {richRow(1), richRow(2), richRow(2), richRow(3)},
		"swapped":    {richRow(1), richRow(3), richRow(3)},
	} {
		got := b.sum(t, b.appendJSON(t, b.create(t, name, richSchema), rowsJSON(rows...)), 0)
		require.NotEqual(t, want.Checksum, got.Checksum, name)
		require.EqualValues(t, len(rows), got.Rows, name)
	}
}

// TestDuplicatesDoNotCancel guards against an XOR-style combination, where a
// row present twice contributes nothing.
func TestDuplicatesDoNotCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	single := b.sum(t, b.appendJSON(t, b.create(t, "single", richSchema), rowsJSON(richRow(1))), 0)
	triple := b.sum(t, b.appendJSON(t, b.create(t, "triple", richSchema),
		rowsJSON(richRow(1), richRow(2), richRow(2))), 0)
	require.NotEqual(t, single.Checksum, triple.Checksum)
}

func TestDeletesAreApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "deleted", richSchema)
	tbl = b.appendJSON(t, tbl, rowsJSON(richRow(1), richRow(2), richRow(3), richRow(4), richRow(5)))
	var err error
	tbl, err = tbl.Delete(b.ctx, iceberg.EqualTo(iceberg.Reference("id"), int64(2)), nil)
	require.NoError(t, err)
	tbl = b.equalityDelete(t, tbl, 4)

	// The table really has both kinds of delete file.
	summary := tbl.CurrentSnapshot().Summary.Properties
	require.Equal(t, "1", summary["total-position-deletes"])
	require.Equal(t, "1", summary["total-equality-deletes"])

	survivors := b.appendJSON(t, b.create(t, "survivors", richSchema), rowsJSON(richRow(5), richRow(3), richRow(1)))
	got, want := b.sum(t, tbl, 0), b.sum(t, survivors, 0)
	require.EqualValues(t, 3, got.Rows)
	require.Equal(t, want, got)
}

func TestEmptyTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "empty", richSchema)
	require.Equal(t, checksum.Result{Rows: 0, Checksum: checksum.EmptyChecksum}, b.sum(t, tbl, 0))

	// A snapshot whose rows are all deleted is empty too.
	tbl = b.appendJSON(t, tbl, rowsJSON(richRow(1)))
	tbl = b.equalityDelete(t, tbl, 1)
	require.Equal(t, checksum.Result{Rows: 0, Checksum: checksum.EmptyChecksum}, b.sum(t, tbl, 0))
}

func TestOlderSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.appendJSON(t, b.create(t, "history", richSchema), rowsJSON(richRow(1), richRow(2)))
	first := tbl.CurrentSnapshot().SnapshotID
	tbl = b.appendJSON(t, tbl, rowsJSON(richRow(3)))

	twoRows := b.appendJSON(t, b.create(t, "two", richSchema), rowsJSON(richRow(2), richRow(1)))
	require.Equal(t, b.sum(t, twoRows, 0), b.sum(t, tbl, first))
	require.EqualValues(t, 3, b.sum(t, tbl, 0).Rows)
	require.Equal(t, b.sum(t, tbl, 0), b.sum(t, tbl, tbl.CurrentSnapshot().SnapshotID))

	_, err := checksum.Table(b.ctx, tbl, 42)
	require.ErrorIs(t, err, checksum.ErrNoSuchSnapshot)
	require.ErrorContains(t, err, "42")
}

func TestNullsDifferFromZeroValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sums := map[string]string{}
	for name, row := range map[string]string{
		"nulls":  `{"id": 1, "name": null, "n": null, "score": null, "flag": null, "blob": null, "tags": null, "point": null}`,
		"zeros":  `{"id": 1, "name": "", "n": 0, "score": 0, "flag": false, "blob": "", "tags": [], "point": {"x": 0}}`,
		"nulls2": `{"id": 1, "name": null, "n": null, "score": null, "flag": null, "blob": null, "tags": [null], "point": null}`,
	} {
		res := b.sum(t, b.appendJSON(t, b.create(t, name, richSchema), rowsJSON(row)), 0)
		require.EqualValues(t, 1, res.Rows)
		sums[name] = res.Checksum
	}
	require.NotEqual(t, sums["nulls"], sums["zeros"])
	require.NotEqual(t, sums["nulls"], sums["nulls2"], "a null list differs from a list holding one null")
}

// TestSchemaEvolution rewrites the same rows after the schema evolved in
// every way Iceberg allows without rewriting data — add an optional column,
// rename a column, int → long, float → double — and expects the rewritten
// snapshot to match the original one, read with its own older schema.
func TestSchemaEvolution(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rows := []string{richRow(1), richRow(2), richRow(3)}
	tbl := b.appendJSON(t, b.create(t, "evolving", richSchema), rowsJSON(rows...))
	before := b.sum(t, tbl, 0)

	tx := tbl.NewTransaction()
	require.NoError(t, tx.UpdateSchema(true, false).
		AddColumn([]string{"extra"}, iceberg.PrimitiveTypes.String, "", false, nil).
		RenameColumn([]string{"name"}, "label").
		UpdateColumn([]string{"n"}, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Val: iceberg.PrimitiveTypes.Int64, Valid: true}}).
		UpdateColumn([]string{"ratio"}, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Val: iceberg.PrimitiveTypes.Float64, Valid: true}}).
		Commit())
	tbl, err := tx.Commit(b.ctx)
	require.NoError(t, err)
	require.Equal(t, before, b.sum(t, tbl, 0), "a schema change alone changes no snapshot")

	// Rewrite the same rows under the new schema (as compaction would).
	renamed := make([]string, len(rows))
	for i, r := range rows {
		renamed[i] = strings.Replace(r, `"name":`, `"label":`, 1)
	}
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	require.NoError(t, err)
	at, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{rowsJSON(renamed...)})
	require.NoError(t, err)
	defer at.Release()
	tbl, err = tbl.OverwriteTable(b.ctx, at, 1<<20, nil)
	require.NoError(t, err)
	require.Equal(t, 1, *tbl.CurrentSnapshot().SchemaID)

	after := b.sum(t, tbl, 0)
	require.Equal(t, before, after)

	// A value in the new column is a change.
	withExtra := strings.Replace(renamed[0], `"label":`, `"extra": "x", "label":`, 1)
	at2, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{rowsJSON(withExtra, renamed[1], renamed[2])})
	require.NoError(t, err)
	defer at2.Release()
	tbl, err = tbl.OverwriteTable(b.ctx, at2, 1<<20, nil)
	require.NoError(t, err)
	require.NotEqual(t, before.Checksum, b.sum(t, tbl, 0).Checksum)
}
