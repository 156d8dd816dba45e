package checksum_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/testdata"
)

// richSchema has a column of most Iceberg types, nested ones included.
var richSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String},
	iceberg.NestedField{ID: 3, Name: "n", Type: iceberg.PrimitiveTypes.Int32},
	iceberg.NestedField{ID: 4, Name: "score", Type: iceberg.PrimitiveTypes.Float64},
	iceberg.NestedField{ID: 5, Name: "ratio", Type: iceberg.PrimitiveTypes.Float32},
	iceberg.NestedField{ID: 6, Name: "flag", Type: iceberg.PrimitiveTypes.Bool},
	iceberg.NestedField{ID: 7, Name: "day", Type: iceberg.PrimitiveTypes.Date},
	iceberg.NestedField{ID: 8, Name: "at", Type: iceberg.PrimitiveTypes.TimestampTz},
	iceberg.NestedField{ID: 9, Name: "amount", Type: iceberg.DecimalTypeOf(10, 2)},
	iceberg.NestedField{ID: 10, Name: "blob", Type: iceberg.PrimitiveTypes.Binary},
	iceberg.NestedField{ID: 11, Name: "tags", Type: &iceberg.ListType{
		ElementID: 20, Element: iceberg.PrimitiveTypes.String, ElementRequired: false}},
	iceberg.NestedField{ID: 12, Name: "attrs", Type: &iceberg.MapType{
		KeyID: 21, KeyType: iceberg.PrimitiveTypes.String, ValueID: 22, ValueType: iceberg.PrimitiveTypes.Int32}},
	iceberg.NestedField{ID: 13, Name: "point", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
		{ID: 23, Name: "x", Type: iceberg.PrimitiveTypes.Float64, Required: true},
		{ID: 24, Name: "y", Type: iceberg.PrimitiveTypes.Float64},
	}}},
)

// richRow returns the JSON of row i of the rich test data set.
func richRow(i int) string {
	return fmt.Sprintf(`{"id": %d, "name": "name-%d", "n": %d, "score": %d.5, "ratio": 0.25, "flag": %t,
		"day": "2024-01-%02d", "at": "2024-01-01T00:00:%02dZ", "amount": "%d.25", "blob": "AAEC",
		"tags": ["a", null, "c%d"], "attrs": [{"key": "k1", "value": %d}, {"key": "k2", "value": null}],
		"point": {"x": %d.0, "y": null}}`, i, i, i, i, i%2 == 0, i%28+1, i%60, i, i, i, i)
}

// rowsJSON joins rows into a JSON array.
func rowsJSON(rows ...string) string { return "[" + strings.Join(rows, ",") + "]" }

type bundle struct {
	ctx context.Context
	cat catalog.Catalog
}

func setup(t testing.TB) bundle {
	t.Helper()
	ctx := context.Background()
	cat, err := catalogs.OpenLocal(ctx, t.TempDir(), true)
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	return bundle{ctx: ctx, cat: cat}
}

// create makes a v2 merge-on-read table ns.name.
func (b bundle) create(t testing.TB, name string, schema *iceberg.Schema) *table.Table {
	t.Helper()
	tbl, err := b.cat.CreateTable(b.ctx, table.Identifier{"ns", name}, schema,
		catalog.WithProperties(iceberg.Properties{
			"format-version":         "2",
			table.WriteDeleteModeKey: table.WriteModeMergeOnRead,
		}))
	require.NoError(t, err)
	return tbl
}

// appendJSON appends rows (a JSON array) as one commit.
func (b bundle) appendJSON(t testing.TB, tbl *table.Table, rows string) *table.Table {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	require.NoError(t, err)
	at, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{rows})
	require.NoError(t, err)
	defer at.Release()
	tbl, err = tbl.AppendTable(b.ctx, at, 1<<20, nil)
	require.NoError(t, err)
	return tbl
}

// equalityDelete commits one equality delete file removing the given ids.
func (b bundle) equalityDelete(t testing.TB, tbl *table.Table, ids ...int64) *table.Table {
	t.Helper()
	tbl, err := testdata.EqualityDeleteIDs(b.ctx, tbl, ids...)
	require.NoError(t, err)
	return tbl
}

func (b bundle) sum(t testing.TB, tbl *table.Table, snapshotID int64) checksum.Result {
	t.Helper()
	res, err := checksum.Table(b.ctx, tbl, snapshotID)
	require.NoError(t, err)
	return res
}
