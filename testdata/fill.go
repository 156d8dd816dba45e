package testdata

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// The fills are the benchmarks' tables, in any catalog (local or REST on
// object storage): written by iceberg-go, in one commit each, with
// deterministic content.

// FillTable creates ident (and its namespace) in cat with Schema() and
// appends files data files of rows rows each, in one commit. With days > 0
// the table is partitioned by day(ts) and file i holds day i%days only.
func FillTable(ctx context.Context, cat catalog.Catalog, ident table.Identifier, files, rows, days int) error {
	if err := cat.CreateNamespace(ctx, table.Identifier{ident[0]}, nil); err != nil {
		return fmt.Errorf("testdata: create namespace: %w", err)
	}
	sc := Schema()
	opts := []catalog.CreateTableOpt{catalog.WithProperties(iceberg.Properties{
		table.WriteTargetFileSizeBytesKey: strconv.Itoa(512 << 20),
	})}
	if days > 0 {
		ts, _ := sc.FindFieldByName("ts")
		spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
			SourceIDs: []int{ts.ID}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{},
		})
		opts = append(opts, catalog.WithPartitionSpec(&spec))
	}
	tbl, err := cat.CreateTable(ctx, ident, sc, opts...)
	if err != nil {
		return fmt.Errorf("testdata: create table: %w", err)
	}
	asc, err := table.SchemaToArrowSchema(sc, nil, false, false)
	if err != nil {
		return err
	}
	txn := tbl.NewTransaction()
	rng := rand.New(rand.NewPCG(1, 2))
	cats := []string{"books", "games", "garden", "music", "outdoor", "pets", "tools", "toys"}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for f := range files {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, asc)
		for r := range rows {
			rb.Field(0).(*array.Int64Builder).Append(int64(f*rows + r))
			rb.Field(1).(*array.StringBuilder).Append(cats[rng.IntN(len(cats))])
			rb.Field(2).(*array.Float64Builder).Append(rng.Float64() * 1000)
			day := rng.IntN(7)
			if days > 0 {
				day = f % days
			}
			ts := base.Add(time.Duration(day)*24*time.Hour + time.Duration(rng.Int64N(int64(24*time.Hour))))
			rb.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
			if rng.IntN(10) == 0 {
				rb.Field(4).(*array.StringBuilder).AppendNull()
			} else {
				rb.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("note-%016x%016x%016x", rng.Uint64(), rng.Uint64(), rng.Uint64()))
			}
		}
		rec := rb.NewRecordBatch()
		at := array.NewTableFromRecords(asc, []arrow.RecordBatch{rec})
		err := txn.AppendTable(ctx, at, int64(rows), nil)
		at.Release()
		rec.Release()
		rb.Release()
		if err != nil {
			return fmt.Errorf("testdata: append file %d: %w", f, err)
		}
	}
	if _, err := txn.Commit(ctx); err != nil {
		return fmt.Errorf("testdata: commit: %w", err)
	}
	return nil
}

// FillSmallFiles appends n files of rows rows each (about 10 KB at 60
// rows) to tbl in one commit, written as iceberg-go writes them (one
// WriteRecords stream per file), and returns the table after the commit.
func FillSmallFiles(ctx context.Context, tbl *table.Table, n, rows int) (*table.Table, error) {
	asc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(3, 4))
	txn := tbl.NewTransaction()
	var dfs []iceberg.DataFile
	for f := range n {
		var js []string
		for r := range rows {
			id := f*rows + r
			js = append(js, fmt.Sprintf(`{"id": %d, "category": "c%d", "amount": %d.5, "ts": "2024-01-01T00:00:%02dZ", "note": "note-%016x%016x"}`,
				id, id%8, id, r%60, rng.Uint64(), rng.Uint64()))
		}
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, asc, strings.NewReader("["+strings.Join(js, ",")+"]"))
		if err != nil {
			return nil, err
		}
		seq := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
		for df, err := range table.WriteRecords(ctx, tbl, asc, seq) {
			if err != nil {
				rec.Release()
				return nil, fmt.Errorf("testdata: write file %d: %w", f, err)
			}
			dfs = append(dfs, df)
		}
		rec.Release()
	}
	if err := txn.AddDataFiles(ctx, dfs, nil); err != nil {
		return nil, err
	}
	return txn.Commit(ctx)
}

// AppendJSON appends rows, JSON objects in the Arrow form of tbl's schema
// (e.g. `{"id": 1, "ts": "2024-01-01T00:00:00Z"}`), as one iceberg-go
// append, and returns the table after the commit.
func AppendJSON(ctx context.Context, tbl *table.Table, rows []string) (*table.Table, error) {
	asc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return nil, err
	}
	at, err := array.TableFromJSON(memory.DefaultAllocator, asc, []string{"[" + strings.Join(rows, ",") + "]"})
	if err != nil {
		return nil, fmt.Errorf("testdata: rows: %w", err)
	}
	defer at.Release()
	return tbl.AppendTable(ctx, at, int64(len(rows)), nil)
}

// EqualityDeleteIDs commits one equality-delete file on field id 1 (an
// int64 column, as in the test schemas) removing rows with the given ids,
// as iceberg-go's CommitEqualityDeletes writes it, and returns the table
// after the commit.
func EqualityDeleteIDs(ctx context.Context, tbl *table.Table, ids ...int64) (*table.Table, error) {
	keySchema, err := table.SchemaToArrowSchema(
		iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true}),
		nil, true, false)
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf(`{"id": %d}`, id)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, keySchema, strings.NewReader("["+strings.Join(parts, ",")+"]"))
	if err != nil {
		return nil, fmt.Errorf("testdata: equality delete keys: %w", err)
	}
	defer rec.Release()
	records := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	tx := tbl.NewTransaction()
	if err := tx.CommitEqualityDeletes(ctx, []int{1}, records, nil); err != nil {
		return nil, err
	}
	return tx.Commit(ctx)
}
