package testdata

import (
	"context"
	"fmt"
	"path"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/google/uuid"
)

// The physical layouts of one Iceberg type that the spec allows and other
// writers use: a uuid stored as a plain FIXED_LEN_BYTE_ARRAY(16), decimals
// stored as INT32/INT64 (Spark's default) and identity partitions on
// decimal and uuid columns.

// Field ids of foreign.uuid-fixed.
const (
	uuidID     = 1
	uuidRegion = 2
	uuidKey    = 3
	uuidOther  = 4
)

// Partition field ids of foreign.uuid-fixed: identity(region),
// identity(other).
const (
	uuidRegionPart = 1000
	uuidOtherPart  = 1001
)

func uuidSchema() *iceberg.Schema {
	return iceberg.NewSchemaWithIdentifiers(0, []int{uuidID},
		iceberg.NestedField{ID: uuidID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: uuidRegion, Name: "region", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: uuidKey, Name: "key", Type: iceberg.PrimitiveTypes.UUID},
		iceberg.NestedField{ID: uuidOther, Name: "other", Type: iceberg.PrimitiveTypes.UUID},
	)
}

// uuidOthers are the values of the identity-partitioned uuid column.
var uuidOthers = []any{
	uuid.MustParse("00000000-0000-0000-0000-000000000001"),
	uuid.MustParse("f81d4fae-7dec-11d0-a765-00a0c91e6bf6"),
	nil,
}

// buildUUIDFixed builds foreign.uuid-fixed, a v2 table partitioned by
// identity(region) and identity(other), other being a uuid column. Half of
// its files come from iceberg-go appends (uuid columns as Parquet
// FIXED_LEN_BYTE_ARRAY(16) with the UUID logical type, as the spec says);
// the other half were written the way PyIceberg (before its uuid
// extension type) and plain Parquet writers store a UUID: a
// FIXED_LEN_BYTE_ARRAY(16) with no logical type, added with their
// footer's statistics and the partition tuple from the path.
func buildUUIDFixed(ctx context.Context, env foreignEnv) (ForeignTable, error) {
	cat, ft, err := env.open(ctx, "uuid_fixed")
	if err != nil {
		return ForeignTable{}, err
	}
	defer closeCatalog(cat)
	spec := iceberg.NewPartitionSpec(
		iceberg.PartitionField{SourceIDs: []int{uuidRegion}, FieldID: uuidRegionPart, Name: "region", Transform: iceberg.IdentityTransform{}},
		iceberg.PartitionField{SourceIDs: []int{uuidOther}, FieldID: uuidOtherPart, Name: "other", Transform: iceberg.IdentityTransform{}},
	)
	tbl, err := cat.CreateTable(ctx, ft.Ident, uuidSchema(),
		catalog.WithPartitionSpec(&spec), catalog.WithProperties(foreignTableProps("foreign.uuid-fixed", 2, false)))
	if err != nil {
		return ForeignTable{}, fmt.Errorf("create table: %w", err)
	}
	rng := seed("foreign.uuid-fixed", 1)
	var expected []foreignRow
	nextID := int64(0)
	row := func(region string, other any) foreignRow {
		r := foreignRow{uuidID: nextID, uuidRegion: region, uuidOther: other}
		if rng.IntN(8) != 0 {
			var u uuid.UUID
			for i := range u {
				u[i] = byte(rng.UintN(256))
			}
			r[uuidKey] = u
		}
		nextID++
		return r
	}
	// iceberg-go appends: every (region, other) partition.
	for a := range 2 {
		var rows []foreignRow
		for _, region := range []string{"eu", "us"} {
			for _, other := range uuidOthers {
				for range 20 + rng.IntN(20) {
					rows = append(rows, row(region, other))
				}
			}
		}
		props := iceberg.Properties{"tms.testdata.recipe": "foreign.uuid-fixed", "tms.testdata.append": strconv.Itoa(a)}
		if tbl, err = appendForeignRows(ctx, tbl, rows, props); err != nil {
			return ForeignTable{}, fmt.Errorf("append: %w", err)
		}
		expected = append(expected, rows...)
	}
	// Plain-Parquet files: the uuid columns as fixed_size_binary(16).
	fsc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Metadata: idMeta(uuidID)},
		{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true, Metadata: idMeta(uuidRegion)},
		{Name: "key", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}, Nullable: true, Metadata: idMeta(uuidKey)},
		{Name: "other", Type: &arrow.FixedSizeBinaryType{ByteWidth: 16}, Nullable: true, Metadata: idMeta(uuidOther)},
	}, nil)
	var dfs []iceberg.DataFile
	for i, region := range []string{"eu", "us", "eu"} {
		other := uuidOthers[i%2]
		rows := make([]foreignRow, 30+rng.IntN(30))
		for r := range rows {
			rows[r] = row(region, other)
		}
		rel := path.Join("data", "region="+region, fmt.Sprintf("other=%v", other),
			fmt.Sprintf("%05d-0-%016x.parquet", i, rng.Uint64()))
		pf, err := writeForeignParquet(ctx, tbl, rel, fsc, []int{uuidID, uuidRegion, uuidKey, uuidOther}, rows)
		if err != nil {
			return ForeignTable{}, fmt.Errorf("write %s: %w", rel, err)
		}
		df, err := foreignDataFile(ctx, tbl, tbl.Spec(), pf, map[int]any{uuidRegionPart: region, uuidOtherPart: other})
		if err != nil {
			return ForeignTable{}, err
		}
		dfs = append(dfs, df)
		expected = append(expected, rows...)
	}
	tx := tbl.NewTransaction()
	if err := tx.AddDataFiles(ctx, dfs, iceberg.Properties{"tms.testdata.recipe": "foreign.uuid-fixed"}); err != nil {
		return ForeignTable{}, fmt.Errorf("add plain-parquet files: %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return ForeignTable{}, fmt.Errorf("commit plain-parquet files: %w", err)
	}
	return finishForeign(ctx, env, ft, tbl, expected, "region=eu/other=00000000-0000-0000-0000-000000000001")
}

// Field ids of foreign.decimal-partitions.
const (
	decimalID    = 1
	decimalPrice = 2 // decimal(9,2): INT32 in Spark's files
	decimalRate  = 3 // decimal(18,6): INT64 in Spark's files
	decimalBig   = 4 // decimal(30,4): FIXED_LEN_BYTE_ARRAY everywhere
	decimalNote  = 5
)

// decimalPricePart is the partition field id of identity(price) in
// foreign.decimal-partitions. The table has one decimal partition field:
// iceberg-go v0.7.0 names the Avro fixed type of every decimal partition
// value "fixed", so it cannot write the manifests of a spec with two
// decimal fields of different sizes ("conflicting definitions for named
// type").
const decimalPricePart = 1000

func decimalSchema() *iceberg.Schema {
	return iceberg.NewSchemaWithIdentifiers(0, []int{decimalID},
		iceberg.NestedField{ID: decimalID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: decimalPrice, Name: "price", Type: iceberg.DecimalTypeOf(9, 2)},
		iceberg.NestedField{ID: decimalRate, Name: "rate", Type: iceberg.DecimalTypeOf(18, 6)},
		iceberg.NestedField{ID: decimalBig, Name: "big", Type: iceberg.DecimalTypeOf(30, 4)},
		iceberg.NestedField{ID: decimalNote, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
}

// decimalOf is v as a decimal of scale.
func decimalOf(unscaled int64, scale int) iceberg.Decimal {
	return iceberg.Decimal{Val: decimal128.FromI64(unscaled), Scale: scale}
}

// The values of foreign.decimal-partitions: partition prices with a
// trailing zero, a negative one, a zero and NULL; big values beyond int64.
var (
	decimalPrices = []any{decimalOf(123, 2), decimalOf(450, 2), decimalOf(-5, 2), decimalOf(0, 2), nil}
	decimalBigs   = []any{
		iceberg.Decimal{Val: decimal128.FromI64(1).Mul(decimal128.FromI64(1_000_000_000_000)).Mul(decimal128.FromI64(1_000_000_000_000)), Scale: 4},
		decimalOf(-12345, 4),
	}
)

// buildDecimalPartitions builds foreign.decimal-partitions, a v2 table
// partitioned by identity(price) (decimal(9,2)), with decimal(18,6) and
// decimal(30,4) data columns. Its first files come from iceberg-go appends (every
// decimal as FIXED_LEN_BYTE_ARRAY); then files written as Spark writes them
// (decimal(9,2) as INT32, decimal(18,6) as INT64, the 30-digit one as
// FIXED_LEN_BYTE_ARRAY), added with the partition tuple from the path.
func buildDecimalPartitions(ctx context.Context, env foreignEnv) (ForeignTable, error) {
	cat, ft, err := env.open(ctx, "decimal_partitions")
	if err != nil {
		return ForeignTable{}, err
	}
	defer closeCatalog(cat)
	spec := iceberg.NewPartitionSpec(
		iceberg.PartitionField{SourceIDs: []int{decimalPrice}, FieldID: decimalPricePart, Name: "price", Transform: iceberg.IdentityTransform{}},
	)
	tbl, err := cat.CreateTable(ctx, ft.Ident, decimalSchema(),
		catalog.WithPartitionSpec(&spec), catalog.WithProperties(foreignTableProps("foreign.decimal-partitions", 2, false)))
	if err != nil {
		return ForeignTable{}, fmt.Errorf("create table: %w", err)
	}
	rng := seed("foreign.decimal-partitions", 1)
	var expected []foreignRow
	nextID := int64(0)
	row := func(price, big any) foreignRow {
		r := foreignRow{decimalID: nextID, decimalPrice: price, decimalBig: big, decimalNote: foreignNote(rng)}
		if rng.IntN(6) != 0 {
			r[decimalRate] = decimalOf(rng.Int64N(2_000_000_000_000)-1_000_000_000_000, 6)
		}
		nextID++
		return r
	}
	for a := range 2 {
		var rows []foreignRow
		for _, price := range decimalPrices {
			for _, big := range decimalBigs {
				for range 10 + rng.IntN(15) {
					rows = append(rows, row(price, big))
				}
			}
		}
		props := iceberg.Properties{"tms.testdata.recipe": "foreign.decimal-partitions", "tms.testdata.append": strconv.Itoa(a)}
		if tbl, err = appendForeignRows(ctx, tbl, rows, props); err != nil {
			return ForeignTable{}, fmt.Errorf("append: %w", err)
		}
		expected = append(expected, rows...)
	}
	fsc, err := fileSchema(tbl.Schema(), true)
	if err != nil {
		return ForeignTable{}, err
	}
	var dfs []iceberg.DataFile
	for i, price := range decimalPrices {
		big := decimalBigs[i%len(decimalBigs)]
		rows := make([]foreignRow, 25+rng.IntN(25))
		for r := range rows {
			rows[r] = row(price, big)
		}
		rel := path.Join("data", "price="+decimalText(price),
			fmt.Sprintf("part-%05d-%016x-c000.snappy.parquet", i, rng.Uint64()))
		pf, err := writeForeignParquetAs(ctx, tbl, rel, fsc, topLevelIDs(tbl.Schema()), rows, sparkDecimals)
		if err != nil {
			return ForeignTable{}, fmt.Errorf("write %s: %w", rel, err)
		}
		df, err := foreignDataFile(ctx, tbl, tbl.Spec(), pf, map[int]any{decimalPricePart: price})
		if err != nil {
			return ForeignTable{}, err
		}
		dfs = append(dfs, df)
		expected = append(expected, rows...)
	}
	tx := tbl.NewTransaction()
	if err := tx.AddDataFiles(ctx, dfs, iceberg.Properties{"tms.testdata.recipe": "foreign.decimal-partitions"}); err != nil {
		return ForeignTable{}, fmt.Errorf("add Spark-style files: %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return ForeignTable{}, fmt.Errorf("commit Spark-style files: %w", err)
	}
	return finishForeign(ctx, env, ft, tbl, expected, "price=1.23")
}

// decimalText spells a partition value as a path segment.
func decimalText(v any) string {
	if v == nil {
		return "null"
	}
	d := v.(iceberg.Decimal)
	return d.Val.ToString(int32(d.Scale))
}

// idMeta is the Arrow field metadata carrying an Iceberg field id.
func idMeta(id int) arrow.Metadata {
	return arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(id)})
}
