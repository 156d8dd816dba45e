package faithful_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/faithful"
	"github.com/tms-dev/tms/testdata"
)

// On the migrated layout (files without their identity-partition columns)
// the faithful read fills every such column from the partition tuple and
// returns exactly the rows the builder wrote; iceberg-go's scan alone reads
// them as NULL.
func TestReadFillsIdentityColumns(t *testing.T) {
	t.Parallel()
	f := testdata.BuildForeignT(t, "foreign.migrated")
	ctx := t.Context()
	_, tbl, err := f.LoadTable(ctx)
	require.NoError(t, err)
	tasks, err := tbl.Scan().PlanFiles(ctx)
	require.NoError(t, err)
	fs, err := tbl.FS(ctx)
	require.NoError(t, err)
	plan, err := faithful.Prepare(ctx, tbl.Metadata(), fs, tbl.Schema(), tasks)
	require.NoError(t, err)
	require.Equal(t, len(tasks), plan.Filled(), "no file of the layout stores its identity columns")
	require.Contains(t, plan.FilledColumns(0), "region")

	sc, recs, err := faithful.Read(ctx, tbl, plan)
	require.NoError(t, err)
	var got []arrow.RecordBatch
	nulls := 0
	for b, err := range recs {
		require.NoError(t, err)
		require.True(t, sc.Equal(b.Schema()))
		nulls += b.Column(b.Schema().FieldIndices("region")[0]).NullN()
		got = append(got, b)
	}
	require.Zero(t, nulls)
	want, err := checksum.Batches(tbl.Schema(), f.Expected)
	require.NoError(t, err)
	have, err := checksum.Batches(tbl.Schema(), got)
	require.NoError(t, err)
	require.Equal(t, want, have)
	for _, b := range got {
		b.Release()
	}
}

// fixture is a table with identity(region) and identity(kind) in a local
// catalog, for data files written by the test.
type fixture struct {
	ctx  context.Context
	dir  string
	tbl  *table.Table
	spec iceberg.PartitionSpec
}

func newFixture(t *testing.T, props iceberg.Properties) fixture {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	cat, err := catalogs.OpenLocal(ctx, dir, true)
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"f"}, nil))
	sc := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "region", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "kind", Type: iceberg.PrimitiveTypes.Int32},
		iceberg.NestedField{ID: 4, Name: "amount", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: 5, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
	)
	spec := iceberg.NewPartitionSpec(
		iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "region", Transform: iceberg.IdentityTransform{}},
		iceberg.PartitionField{SourceIDs: []int{3}, FieldID: 1001, Name: "kind", Transform: iceberg.IdentityTransform{}},
	)
	tbl, err := cat.CreateTable(ctx, table.Identifier{"f", "t"}, sc, catalog.WithPartitionSpec(&spec), catalog.WithProperties(props))
	require.NoError(t, err)
	return fixture{ctx: ctx, dir: dir, tbl: tbl, spec: tbl.Spec()}
}

// column is one column of a test parquet file: its Arrow field (a field id
// in the metadata unless id is -1) and its values.
type column struct {
	name string
	id   int
	typ  arrow.DataType
	vals any // []int64, []int32, []string, []float64 or []arrow.Timestamp
}

// write writes a parquet file with cols and returns a task for it with the
// given partition tuple.
func (f fixture) write(t *testing.T, name string, part map[int]any, cols ...column) table.FileScanTask {
	t.Helper()
	return f.writeWith(t, pqarrow.DefaultWriterProps(), name, part, cols...)
}

// writeWith is write with Arrow writer properties (e.g. INT96 timestamps).
func (f fixture) writeWith(t *testing.T, props pqarrow.ArrowWriterProperties, name string, part map[int]any, cols ...column) table.FileScanTask {
	t.Helper()
	var fields []arrow.Field
	for _, c := range cols {
		md := arrow.Metadata{}
		if c.id >= 0 {
			md = arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(c.id)})
		}
		fields = append(fields, arrow.Field{Name: c.name, Type: c.typ, Nullable: true, Metadata: md})
	}
	sc := arrow.NewSchema(fields, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer rb.Release()
	n := 0
	for i, c := range cols {
		switch v := c.vals.(type) {
		case []int64:
			rb.Field(i).(*array.Int64Builder).AppendValues(v, nil)
			n = len(v)
		case []int32:
			rb.Field(i).(*array.Int32Builder).AppendValues(v, nil)
			n = len(v)
		case []string:
			rb.Field(i).(*array.StringBuilder).AppendValues(v, nil)
			n = len(v)
		case []float64:
			rb.Field(i).(*array.Float64Builder).AppendValues(v, nil)
			n = len(v)
		case []arrow.Timestamp:
			rb.Field(i).(*array.TimestampBuilder).AppendValues(v, nil)
			n = len(v)
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	path := filepath.Join(f.dir, name)
	out, err := os.Create(path)
	require.NoError(t, err)
	w, err := pqarrow.NewFileWriter(sc, out, nil, props)
	require.NoError(t, err)
	require.NoError(t, w.Write(rec))
	require.NoError(t, w.Close())
	st, err := os.Stat(path)
	require.NoError(t, err)
	return table.FileScanTask{File: f.dataFile(t, iceberg.EntryContentData, "file://"+path, iceberg.ParquetFile, part, int64(n), st.Size())}
}

func (f fixture) dataFile(t *testing.T, content iceberg.ManifestEntryContent, path string, format iceberg.FileFormat, part map[int]any, n, size int64) iceberg.DataFile {
	t.Helper()
	b, err := iceberg.NewDataFileBuilder(f.spec, content, path, format, part, nil, nil, n, size)
	require.NoError(t, err)
	if content == iceberg.EntryContentEqDeletes {
		b.EqualityFieldIDs([]int{2})
	}
	return b.Build()
}

func (f fixture) prepare(t *testing.T, schema *iceberg.Schema, tasks ...table.FileScanTask) (*faithful.Plan, error) {
	t.Helper()
	fs, err := f.tbl.FS(f.ctx)
	require.NoError(t, err)
	return faithful.Prepare(f.ctx, f.tbl.Metadata(), fs, schema, tasks)
}

var (
	idCol     = column{"id", 1, arrow.PrimitiveTypes.Int64, []int64{1, 2, 3}}
	amountCol = column{"amount", 4, arrow.PrimitiveTypes.Float64, []float64{1.5, 2.5, 3.5}}
	euKind7   = map[int]any{1000: "eu", 1001: int32(7)}
)

func TestPrepareDecides(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	schema := f.tbl.Schema()
	withRequired := func(name string) *iceberg.Schema {
		fields := schema.Fields()
		for i := range fields {
			if fields[i].Name == name {
				fields[i].Required = true
			}
		}
		return iceberg.NewSchema(schema.ID, fields...)
	}
	cases := []struct {
		name   string
		schema *iceberg.Schema
		task   func() table.FileScanTask
		fills  []string
		refuse string // substring of the refusal; "" = readable
	}{
		{"all columns stored", schema, func() table.FileScanTask {
			return f.write(t, "a.parquet", euKind7, idCol,
				column{"region", 2, arrow.BinaryTypes.String, []string{"eu", "eu", "eu"}},
				column{"kind", 3, arrow.PrimitiveTypes.Int32, []int32{7, 7, 7}}, amountCol)
		}, nil, ""},
		{"identity columns not stored", schema, func() table.FileScanTask {
			return f.write(t, "b.parquet", euKind7, idCol, amountCol)
		}, []string{"region", "kind"}, ""},
		{"int read as long", schema, func() table.FileScanTask {
			return f.write(t, "c.parquet", euKind7, column{"id", 1, arrow.PrimitiveTypes.Int32, []int32{1, 2, 3}}, amountCol)
		}, []string{"region", "kind"}, ""},
		{"optional non-partition column missing", schema, func() table.FileScanTask {
			return f.write(t, "d.parquet", euKind7, idCol)
		}, []string{"region", "kind"}, ""},
		{"required column missing", withRequired("amount"), func() table.FileScanTask {
			return f.write(t, "e.parquet", euKind7, idCol)
		}, nil, "column amount (field id 4): required, not in the file, with no identity partition value and no initial-default"},
		{"required identity column with null value", withRequired("region"), func() table.FileScanTask {
			return f.write(t, "f.parquet", map[int]any{1000: nil, 1001: int32(7)}, idCol)
		}, nil, "column region (field id 2): required, not in the file, and its identity partition value is null"},
		{"type that does not read exactly", schema, func() table.FileScanTask {
			return f.write(t, "g.parquet", euKind7, column{"id", 1, arrow.BinaryTypes.String, []string{"1", "2", "3"}})
		}, nil, "column id (field id 1): the file stores it as string, which does not read exactly as the table type long"},
		{"no field ids and no name mapping", schema, func() table.FileScanTask {
			return f.write(t, "h.parquet", euKind7, column{"id", -1, arrow.PrimitiveTypes.Int64, []int64{1}})
		}, nil, "the file has no field ids and the table has no name mapping (schema.name-mapping.default)"},
		{"INT96 timestamps (Spark's and Hive's legacy layout)", schema, func() table.FileScanTask {
			ts := column{"ts", 5, &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, []arrow.Timestamp{1_700_000_000_000_000_000, 0, 5}}
			return f.writeWith(t, pqarrow.NewArrowWriterProperties(pqarrow.WithDeprecatedInt96Timestamps(true)), "l.parquet", euKind7, idCol, ts)
		}, nil, "column ts (field id 5): the file stores it as timestamptz_ns, which does not read exactly as the table type timestamptz"},
		{"ORC data file", schema, func() table.FileScanTask {
			return table.FileScanTask{File: f.dataFile(t, iceberg.EntryContentData, "file:///x/part-0.orc", iceberg.OrcFile, euKind7, 3, 100)}
		}, nil, "data file format ORC: only Parquet data files are read"},
		{"equality delete keyed on a filled column", schema, func() table.FileScanTask {
			task := f.write(t, "i.parquet", euKind7, idCol)
			task.EqualityDeleteFiles = []iceberg.DataFile{f.dataFile(t, iceberg.EntryContentEqDeletes, "file:///x/eq.parquet", iceberg.ParquetFile, euKind7, 1, 10)}
			return task
		}, nil, "column region (field id 2): equality delete file file:///x/eq.parquet is keyed on it and the data file does not store it"},
		{"deletion vector on a v2 table", schema, func() table.FileScanTask {
			task := f.write(t, "j.parquet", euKind7, idCol)
			task.DeletionVectorFiles = []iceberg.DataFile{f.dataFile(t, iceberg.EntryContentPosDeletes, "file:///x/dv.puffin", iceberg.PuffinFile, euKind7, 1, 10)}
			return task
		}, nil, "deletion vector (applies to "},
		{"not a parquet file", schema, func() table.FileScanTask {
			path := filepath.Join(f.dir, "k.parquet")
			require.NoError(t, os.WriteFile(path, []byte("not parquet at all"), 0o644))
			return table.FileScanTask{File: f.dataFile(t, iceberg.EntryContentData, "file://"+path, iceberg.ParquetFile, euKind7, 3, 18)}
		}, nil, "not a readable Parquet file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task := c.task()
			plan, err := f.prepare(t, c.schema, task)
			if c.refuse != "" {
				require.ErrorIs(t, err, faithful.ErrUnfaithful)
				require.ErrorContains(t, err, c.refuse)
				require.ErrorContains(t, err, task.File.FilePath())
				var r *faithful.Refusal
				require.ErrorAs(t, err, &r)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.fills, plan.FilledColumns(0))
		})
	}
}

// A file without field ids is matched through the name mapping.
func TestPrepareUsesNameMapping(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	mapping, err := json.Marshal(f.tbl.Schema().NameMapping())
	require.NoError(t, err)
	txn := f.tbl.NewTransaction()
	require.NoError(t, txn.SetProperties(iceberg.Properties{table.DefaultNameMappingKey: string(mapping)}))
	f.tbl, err = txn.Commit(f.ctx)
	require.NoError(t, err)
	task := f.write(t, "m.parquet", euKind7, column{"id", -1, arrow.PrimitiveTypes.Int64, []int64{1}},
		column{"amount", -1, arrow.PrimitiveTypes.Float64, []float64{1}})
	plan, err := f.prepare(t, f.tbl.Schema(), task)
	require.NoError(t, err)
	require.Equal(t, []string{"region", "kind"}, plan.FilledColumns(0))
}
