package testdata

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// foreignRow is one row of a foreign data recipe keyed by Iceberg field id;
// a missing key or a nil value is NULL. Values are int32, int64, float64,
// string, bool, time.Time (UTC, microsecond precision, for timestamptz),
// iceberg.Decimal (of the column's scale) or uuid.UUID.
type foreignRow map[int]any

// foreignAmount, foreignNote and foreignTS draw the values of the columns
// most foreign recipes share.
func foreignAmount(rng *rand.Rand) float64 { return float64(rng.IntN(100_000)) / 100 }

func foreignNote(rng *rand.Rand) any {
	if rng.IntN(10) == 0 {
		return nil
	}
	return fmt.Sprintf("note-%08x", rng.Uint32())
}

// foreignTS returns a time on day (days after epoch), at microsecond
// precision.
func foreignTS(rng *rand.Rand, day int) time.Time {
	return epoch.AddDate(0, 0, day).Add(time.Duration(rng.Int64N(int64(24*time.Hour/time.Microsecond))) * time.Microsecond)
}

// foreignBatch turns rows into one record batch of sc whose i-th top-level
// column holds field ids[i] of each row. The caller releases it.
func foreignBatch(sc *arrow.Schema, ids []int, rows []foreignRow) (arrow.RecordBatch, error) {
	if len(ids) != sc.NumFields() {
		return nil, fmt.Errorf("%d field ids for %d columns", len(ids), sc.NumFields())
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for _, row := range rows {
		for i, id := range ids {
			if err := appendForeignValue(b.Field(i), row[id]); err != nil {
				return nil, fmt.Errorf("column %s: %w", sc.Field(i).Name, err)
			}
		}
	}
	return b.NewRecordBatch(), nil
}

// appendForeignValue appends v to b; nil appends NULL.
func appendForeignValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	ok := true
	switch b := b.(type) {
	case *array.Int32Builder:
		var x int32
		if x, ok = v.(int32); ok {
			b.Append(x)
		}
	case *array.Int64Builder:
		var x int64
		if x, ok = v.(int64); ok {
			b.Append(x)
		}
	case *array.Float64Builder:
		var x float64
		if x, ok = v.(float64); ok {
			b.Append(x)
		}
	case *array.StringBuilder:
		var x string
		if x, ok = v.(string); ok {
			b.Append(x)
		}
	case *array.BooleanBuilder:
		var x bool
		if x, ok = v.(bool); ok {
			b.Append(x)
		}
	case *array.TimestampBuilder:
		var x time.Time
		if x, ok = v.(time.Time); ok {
			b.Append(arrow.Timestamp(x.UnixMicro()))
		}
	case *array.Decimal128Builder:
		var x iceberg.Decimal
		if x, ok = v.(iceberg.Decimal); ok {
			if scale := b.Type().(*arrow.Decimal128Type).Scale; int32(x.Scale) != scale {
				return fmt.Errorf("decimal %s has scale %d, the column %d", x.Val.ToString(int32(x.Scale)), x.Scale, scale)
			}
			b.Append(x.Val)
		}
	case *extensions.UUIDBuilder:
		var x uuid.UUID
		if x, ok = v.(uuid.UUID); ok {
			b.Append(x)
		}
	case *array.FixedSizeBinaryBuilder:
		// A uuid stored as a plain FIXED_LEN_BYTE_ARRAY(16).
		var x uuid.UUID
		if x, ok = v.(uuid.UUID); ok {
			b.Append(x[:])
		}
	default:
		return fmt.Errorf("unsupported builder %T", b)
	}
	if !ok {
		return fmt.Errorf("value %#v (%T) does not fit %T", v, v, b)
	}
	return nil
}

// topLevelIDs returns the field ids of sc's top-level fields in order.
func topLevelIDs(sc *iceberg.Schema) []int {
	ids := make([]int, 0, len(sc.Fields()))
	for _, f := range sc.Fields() {
		ids = append(ids, f.ID)
	}
	return ids
}

// expectedBatches renders the oracle rows in the Arrow form of sc with field
// ids, as table.SchemaToArrowSchema writes it: one batch per 256 rows, so
// that a consumer cannot rely on a single batch.
func expectedBatches(sc *iceberg.Schema, rows []foreignRow) ([]arrow.RecordBatch, error) {
	asc, err := table.SchemaToArrowSchema(sc, nil, true, false)
	if err != nil {
		return nil, err
	}
	ids := topLevelIDs(sc)
	var out []arrow.RecordBatch
	for lo := 0; lo < len(rows); lo += 256 {
		rec, err := foreignBatch(asc, ids, rows[lo:min(lo+256, len(rows))])
		if err != nil {
			for _, b := range out {
				b.Release()
			}
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// parquetFile is a parquet file a foreign writer (not iceberg-go) put
// under a table location.
type parquetFile struct {
	// Location is where the file is, as metadata references it: the table
	// location followed by the file's path under it.
	Location string
	// Rows is the number of rows written; Size the file size in bytes.
	Rows, Size int64
}

// writeForeignParquet writes rows as one parquet file at rel (a
// slash-separated path under tbl's location) with arrow-go's pqarrow, the
// way Spark or Hive leave files: snappy-compressed, no ARROW:schema key in
// the footer, and field ids in the parquet schema only if the fields of sc
// carry PARQUET:field_id metadata. ids[i] is the row key of the i-th column
// of sc. The file is written whole through tbl's FileIO (writeTableFile),
// so the same builder writes to a local folder and to object storage.
func writeForeignParquet(ctx context.Context, tbl *table.Table, rel string, sc *arrow.Schema, ids []int, rows []foreignRow) (parquetFile, error) {
	return writeForeignParquetAs(ctx, tbl, rel, sc, ids, rows)
}

// sparkDecimals stores decimals as Spark does by default: INT32 up to 9
// digits, INT64 up to 18, FIXED_LEN_BYTE_ARRAY beyond (arrow-go's own
// default is FIXED_LEN_BYTE_ARRAY for all).
var sparkDecimals = parquet.WithStoreDecimalAsInteger(true)

// writeForeignParquetAs is writeForeignParquet with more writer properties.
func writeForeignParquetAs(ctx context.Context, tbl *table.Table, rel string, sc *arrow.Schema, ids []int, rows []foreignRow, opts ...parquet.WriterProperty) (parquetFile, error) {
	rec, err := foreignBatch(sc, ids, rows)
	if err != nil {
		return parquetFile{}, err
	}
	defer rec.Release()
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Snappy)}, opts...)...)
	w, err := pqarrow.NewFileWriter(sc, &buf, props, pqarrow.NewArrowWriterProperties())
	if err != nil {
		return parquetFile{}, err
	}
	if err := w.Write(rec); err != nil {
		_ = w.Close()
		return parquetFile{}, err
	}
	if err := w.Close(); err != nil {
		return parquetFile{}, err
	}
	loc, err := writeTableFile(ctx, tbl, rel, buf.Bytes())
	if err != nil {
		return parquetFile{}, err
	}
	return parquetFile{Location: loc, Rows: rec.NumRows(), Size: int64(buf.Len())}, nil
}

// fileSchema returns the Arrow schema of a foreign file storing fields of
// sc: with PARQUET:field_id metadata when withIDs, as plain names otherwise.
func fileSchema(sc *iceberg.Schema, withIDs bool) (*arrow.Schema, error) {
	return table.SchemaToArrowSchema(sc, nil, withIDs, false)
}

// appendForeignRows appends rows (in the Arrow form of the table's current
// schema) as one iceberg-go append: one snapshot, one data file per
// partition the rows touch.
func appendForeignRows(ctx context.Context, tbl *table.Table, rows []foreignRow, props iceberg.Properties) (*table.Table, error) {
	sc := tbl.Schema()
	asc, err := table.SchemaToArrowSchema(sc, nil, true, false)
	if err != nil {
		return nil, err
	}
	rec, err := foreignBatch(asc, topLevelIDs(sc), rows)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	rdr, err := array.NewRecordReader(asc, []arrow.RecordBatch{rec})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	tx := tbl.NewTransaction()
	if err := tx.Append(ctx, rdr, props); err != nil {
		return nil, err
	}
	return tx.Commit(ctx)
}
