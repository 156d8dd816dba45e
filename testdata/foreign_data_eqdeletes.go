package testdata

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// Field ids of foreign.cross-partition-eq-deletes.
const (
	eqID     = 1
	eqRegion = 2
	eqAmount = 3
	eqTS     = 4
	eqNote   = 5
)

// eqSchema is the schema of foreign.cross-partition-eq-deletes; id is the
// upsert key.
func eqSchema() *iceberg.Schema {
	return iceberg.NewSchemaWithIdentifiers(0, []int{eqID},
		iceberg.NestedField{ID: eqID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: eqRegion, Name: "region", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: eqAmount, Name: "amount", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: eqTS, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: eqNote, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
}

// eqRegions are the region values (and partitions) of the table.
var eqRegions = []string{"eu", "us", "ap"}

// Shape of foreign.cross-partition-eq-deletes: rows per initial append,
// ids per equality-delete commit, and how many of the deleted ids are
// re-inserted afterwards.
var (
	eqAppends      = []int{150, 120}
	eqDeletes      = []int{20, 15}
	eqReinsertEach = 2 // every second deleted id comes back
)

// buildCrossPartitionEqDeletes builds foreign.cross-partition-eq-deletes:
// a v2 table partitioned by identity(region) (spec 0) gets two appends (one
// file per region each), then its spec is changed to unpartitioned (spec 1,
// region removed) and two equality-delete files keyed on id are written with
// Transaction.WriteEqualityDeletes and committed with RowDelta: being in a
// spec without partition fields they apply to data files of every partition
// (the spec's "global" equality deletes, as Flink upserts on a key that is
// not the partition key leave them). Then the spec goes back to
// identity(region) (iceberg-go reuses spec 0) and every second deleted id is
// re-inserted, mostly in another region: those rows have a higher sequence
// number than the deletes and stay live.
//
// The deleted ids are spread over all regions, so each delete file removes
// rows from several partitions. iceberg-go refuses nothing here.
func buildCrossPartitionEqDeletes(ctx context.Context, env foreignEnv) (ForeignTable, error) {
	cat, ft, err := env.open(ctx, "cross_partition_eq_deletes")
	if err != nil {
		return ForeignTable{}, err
	}
	defer closeCatalog(cat)
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{eqRegion}, FieldID: 1000, Name: "region", Transform: iceberg.IdentityTransform{},
	})
	tbl, err := cat.CreateTable(ctx, ft.Ident, eqSchema(),
		catalog.WithPartitionSpec(&spec), catalog.WithProperties(foreignTableProps("foreign.cross-partition-eq-deletes", 2, true)))
	if err != nil {
		return ForeignTable{}, fmt.Errorf("create table: %w", err)
	}
	rng := seed("foreign.cross-partition-eq-deletes", 1)
	newRow := func(id int64) foreignRow {
		return foreignRow{
			eqID: id, eqRegion: eqRegions[rng.IntN(len(eqRegions))], eqAmount: foreignAmount(rng),
			eqTS: foreignTS(rng, rng.IntN(7)), eqNote: foreignNote(rng),
		}
	}
	live := map[int64]foreignRow{}
	nextID := int64(0)
	for a, n := range eqAppends {
		rows := make([]foreignRow, n)
		for r := range rows {
			rows[r] = newRow(nextID)
			live[nextID] = rows[r]
			nextID++
		}
		props := iceberg.Properties{"tms.testdata.recipe": "foreign.cross-partition-eq-deletes", "tms.testdata.append": strconv.Itoa(a)}
		if tbl, err = appendForeignRows(ctx, tbl, rows, props); err != nil {
			return ForeignTable{}, fmt.Errorf("append %d: %w", a, err)
		}
	}

	tx := tbl.NewTransaction()
	if err := tx.UpdateSpec(true).RemoveField("region").Commit(); err != nil {
		return ForeignTable{}, fmt.Errorf("unpartition: %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return ForeignTable{}, fmt.Errorf("commit unpartitioned spec: %w", err)
	}
	if cur := tbl.Spec(); !cur.IsUnpartitioned() {
		return ForeignTable{}, fmt.Errorf("spec %d after removing region is not unpartitioned", cur.ID())
	}
	var deleted []int64
	for i, n := range eqDeletes {
		ids := make([]int64, 0, n)
		hit := map[any]bool{}
		for len(ids) < n {
			id := rng.Int64N(nextID)
			row, ok := live[id]
			if !ok {
				continue
			}
			hit[row[eqRegion]] = true
			delete(live, id)
			ids = append(ids, id)
		}
		if len(hit) < 2 {
			return ForeignTable{}, fmt.Errorf("equality delete %d removes rows of %d region(s) only", i, len(hit))
		}
		slices.Sort(ids)
		if tbl, err = commitEqDeletes(ctx, tbl, ids, i); err != nil {
			return ForeignTable{}, err
		}
		deleted = append(deleted, ids...)
	}

	tx = tbl.NewTransaction()
	if err := tx.UpdateSpec(true).AddIdentity("region").Commit(); err != nil {
		return ForeignTable{}, fmt.Errorf("repartition: %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return ForeignTable{}, fmt.Errorf("commit repartitioned spec: %w", err)
	}
	var again []foreignRow
	for i, id := range deleted {
		if i%eqReinsertEach == 0 {
			row := newRow(id)
			again = append(again, row)
			live[id] = row
		}
	}
	props := iceberg.Properties{"tms.testdata.recipe": "foreign.cross-partition-eq-deletes", "tms.testdata.append": "reinsert"}
	if tbl, err = appendForeignRows(ctx, tbl, again, props); err != nil {
		return ForeignTable{}, fmt.Errorf("re-insert: %w", err)
	}

	expected := make([]foreignRow, 0, len(live))
	for id := range nextID {
		if row, ok := live[id]; ok {
			expected = append(expected, row)
		}
	}
	return finishForeign(ctx, env, ft, tbl, expected, "region=eu")
}

// commitEqDeletes writes ids as one equality-delete file keyed on id in
// tbl's current spec and commits it with a RowDelta.
func commitEqDeletes(ctx context.Context, tbl *table.Table, ids []int64, n int) (*table.Table, error) {
	idField, ok := tbl.Schema().FindFieldByID(eqID)
	if !ok {
		return nil, fmt.Errorf("schema has no field %d", eqID)
	}
	keySchema, err := table.SchemaToArrowSchema(iceberg.NewSchema(0, idField), nil, true, false)
	if err != nil {
		return nil, err
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues(ids, nil)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(keySchema, []arrow.Array{col}, int64(len(ids)))
	col.Release()
	defer rec.Release()
	records := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }

	tx := tbl.NewTransaction()
	files, err := tx.WriteEqualityDeletes(ctx, []int{eqID}, records)
	if err != nil {
		return nil, fmt.Errorf("equality delete %d: write: %w", n, err)
	}
	props := iceberg.Properties{"tms.testdata.recipe": "foreign.cross-partition-eq-deletes", "tms.testdata.delete": "equality-" + strconv.Itoa(n)}
	if err := tx.NewRowDelta(props).AddDeletes(files...).Commit(ctx); err != nil {
		return nil, fmt.Errorf("equality delete %d: stage: %w", n, err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("equality delete %d: commit: %w", n, err)
	}
	return tbl, nil
}
