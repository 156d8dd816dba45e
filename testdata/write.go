package testdata

import (
	"context"
	"fmt"
	"runtime"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"
)

// appendAll makes r's Appends×scale appends, one snapshot each, staged in
// transactions of r.AppendsPerCommit appends, and returns the table after the
// last commit. The Table each commit returns is used for the next, so the
// catalog is not reloaded between commits.
func appendAll(ctx context.Context, tbl *table.Table, r Recipe, scale int) (*table.Table, error) {
	sc, err := arrowSchema()
	if err != nil {
		return nil, err
	}
	gen := newGenerator(r)
	files := r.filesPerAppend()
	perCommit := max(r.AppendsPerCommit, 1)
	total := r.Appends * scale
	tx := tbl.NewTransaction()
	for a := range total {
		props := iceberg.Properties{"tms.testdata.recipe": r.Name, "tms.testdata.append": strconv.Itoa(a)}
		rows := gen.rows(r.RowsPerAppend)
		if r.PartitionByDay || files == 1 {
			err = appendBatch(ctx, tx, sc, rows, props)
		} else {
			err = appendFiles(ctx, tx, sc, rows, files, props)
		}
		if err != nil {
			return nil, fmt.Errorf("append %d: %w", a, err)
		}
		if (a+1)%perCommit == 0 || a+1 == total {
			if tbl, err = tx.Commit(ctx); err != nil {
				return nil, fmt.Errorf("commit appends up to %d: %w", a, err)
			}
			tx = tbl.NewTransaction()
		}
	}
	return tbl, nil
}

// appendBatch stages one append of rows as a single record batch: the
// unpartitioned writer rolls to a new file only past the target size and the
// partitioned fanout writer keeps one file per partition, so this writes one
// data file, or one per day touched.
func appendBatch(ctx context.Context, tx *table.Transaction, sc *arrow.Schema, rows []Row, props iceberg.Properties) error {
	rec := record(memory.DefaultAllocator, sc, rows)
	defer rec.Release()
	rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	if err != nil {
		return err
	}
	defer rdr.Release()
	return tx.Append(ctx, rdr, props)
}

// appendFiles writes rows as exactly n parquet data files (one
// table.WriteRecords call per file, GOMAXPROCS at a time) and stages them as
// one fast-append snapshot, which puts them in one new manifest.
func appendFiles(ctx context.Context, tx *table.Transaction, sc *arrow.Schema, rows []Row, n int, props iceberg.Properties) error {
	staged, err := tx.StagedTable()
	if err != nil {
		return err
	}
	dfs := make([]iceberg.DataFile, n)
	per := len(rows) / n
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for f := range n {
		lo, hi := f*per, (f+1)*per
		if f == n-1 {
			hi = len(rows)
		}
		g.Go(func() error {
			rec := record(memory.DefaultAllocator, sc, rows[lo:hi])
			one := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
			// WriteRecords releases the batches it consumes.
			for df, err := range table.WriteRecords(gctx, staged.Table, sc, one) {
				if err != nil {
					return fmt.Errorf("write data file %d: %w", f, err)
				}
				if dfs[f] != nil {
					return fmt.Errorf("data file %d: rows went to more than one file", f)
				}
				dfs[f] = df
			}
			if dfs[f] == nil {
				return fmt.Errorf("data file %d: nothing written", f)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// The files were just written under fresh UUID names, so the duplicate
	// check (a read of every manifest per append) cannot find anything.
	return tx.AddDataFiles(ctx, dfs, props, table.WithoutDuplicateCheck())
}

// deleteAll commits the planned deletes: each position-delete set through
// Table.Delete, which on a merge-on-read v2 table writes parquet
// position-delete files for the data files it hits partially, then each
// equality-delete set as an equality-delete file keyed on id, committed with
// a RowDelta.
func deleteAll(ctx context.Context, tbl *table.Table, plan deletePlan) (*table.Table, error) {
	var err error
	for i, ids := range plan.position {
		props := iceberg.Properties{"tms.testdata.delete": "position-" + strconv.Itoa(i)}
		if tbl, err = tbl.Delete(ctx, iceberg.IsIn(iceberg.Reference("id"), ids...), props); err != nil {
			return nil, fmt.Errorf("position delete %d: %w", i, err)
		}
	}
	if len(plan.equality) == 0 {
		return tbl, nil
	}
	idField, ok := Schema().FindFieldByID(fieldID)
	if !ok {
		return nil, fmt.Errorf("schema has no field %d", fieldID)
	}
	keySchema, err := table.SchemaToArrowSchema(iceberg.NewSchema(0, idField), nil, true, false)
	if err != nil {
		return nil, err
	}
	for i, ids := range plan.equality {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		b.AppendValues(ids, nil)
		col := b.NewArray()
		b.Release()
		rec := array.NewRecordBatch(keySchema, []arrow.Array{col}, int64(len(ids)))
		col.Release()
		records := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }

		tx := tbl.NewTransaction()
		files, err := tx.WriteEqualityDeletes(ctx, []int{fieldID}, records)
		rec.Release()
		if err != nil {
			return nil, fmt.Errorf("equality delete %d: write: %w", i, err)
		}
		props := iceberg.Properties{"tms.testdata.delete": "equality-" + strconv.Itoa(i)}
		if err := tx.NewRowDelta(props).AddDeletes(files...).Commit(ctx); err != nil {
			return nil, fmt.Errorf("equality delete %d: stage: %w", i, err)
		}
		if tbl, err = tx.Commit(ctx); err != nil {
			return nil, fmt.Errorf("equality delete %d: commit: %w", i, err)
		}
	}
	return tbl, nil
}
