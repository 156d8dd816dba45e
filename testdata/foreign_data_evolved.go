package testdata

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// Field ids of foreign.evolved. 1–5 are the schema it is created with
// (id, category, amount double, ts, note); category is renamed to segment,
// amount (3) dropped, then amount (6, a new long column reusing the dropped
// name) and score (7) added.
const (
	evolvedID        = 1
	evolvedSegment   = 2
	evolvedOldAmount = 3
	evolvedTS        = 4
	evolvedNote      = 5
	evolvedAmount    = 6
	evolvedScore     = 7
)

// evolvedSchema is the schema foreign.evolved is created with.
func evolvedSchema() *iceberg.Schema {
	return iceberg.NewSchemaWithIdentifiers(0, []int{evolvedID},
		iceberg.NestedField{ID: evolvedID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: evolvedSegment, Name: "category", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: evolvedOldAmount, Name: "amount", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: evolvedTS, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: evolvedNote, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
}

// evolvedDays is how many days the ts values of foreign.evolved span, so
// each append after the spec change writes one file per day.
const evolvedDays = 3

// evolvedPhases are the rows per append of each phase: 1 before any change
// (schema 0, unpartitioned), 2 after the schema change (schema 1,
// unpartitioned), 3 after the spec change (schema 1, day(ts)).
var evolvedPhases = [][]int{{100, 80}, {60}, {90, 75}}

// buildEvolved builds foreign.evolved with iceberg-go appends only: phase 1
// appends into the original schema and an unpartitioned spec; one schema
// update renames category to segment, drops amount (double, id 3) and adds
// optional amount (long, id 6: the dropped name with a new id, which a
// name-based reader confuses) and optional score (int); phase 2 appends;
// the spec becomes day(ts); phase 3 appends, one file per day per append.
//
// Expected is in the final schema: no old amount, segment holds the
// category values, and amount and score are NULL for rows of phase 1 (their
// files do not have ids 6 and 7; the old amount column has id 3).
func buildEvolved(ctx context.Context, env foreignEnv) (ForeignTable, error) {
	cat, ft, err := env.open(ctx, "evolved")
	if err != nil {
		return ForeignTable{}, err
	}
	defer closeCatalog(cat)
	tbl, err := cat.CreateTable(ctx, ft.Ident, evolvedSchema(),
		catalog.WithProperties(foreignTableProps("foreign.evolved", 2, false)))
	if err != nil {
		return ForeignTable{}, fmt.Errorf("create table: %w", err)
	}
	rng := seed("foreign.evolved", 1)
	var expected []foreignRow
	nextID := int64(0)
	appendPhase := func(tbl *table.Table, phase int) (*table.Table, error) {
		for a, n := range evolvedPhases[phase-1] {
			rows := make([]foreignRow, n)
			for r := range rows {
				row := foreignRow{
					evolvedID: nextID, evolvedSegment: categories[rng.IntN(len(categories))],
					evolvedTS: foreignTS(rng, int(nextID)%evolvedDays), evolvedNote: foreignNote(rng),
				}
				if phase == 1 {
					row[evolvedOldAmount] = foreignAmount(rng)
				} else {
					row[evolvedAmount] = rng.Int64N(1_000_000)
					if rng.IntN(4) != 0 {
						row[evolvedScore] = int32(rng.IntN(100))
					}
				}
				rows[r] = row
				nextID++
			}
			props := iceberg.Properties{
				"tms.testdata.recipe": "foreign.evolved", "tms.testdata.phase": strconv.Itoa(phase), "tms.testdata.append": strconv.Itoa(a),
			}
			var err error
			if tbl, err = appendForeignRows(ctx, tbl, rows, props); err != nil {
				return nil, fmt.Errorf("phase %d append %d: %w", phase, a, err)
			}
			expected = append(expected, rows...)
		}
		return tbl, nil
	}

	if tbl, err = appendPhase(tbl, 1); err != nil {
		return ForeignTable{}, err
	}
	tx := tbl.NewTransaction()
	err = tx.UpdateSchema(true, false).
		RenameColumn([]string{"category"}, "segment").
		DeleteColumn([]string{"amount"}).
		AddColumn([]string{"amount"}, iceberg.PrimitiveTypes.Int64, "amount in cents", false, nil).
		AddColumn([]string{"score"}, iceberg.PrimitiveTypes.Int32, "", false, nil).
		Commit()
	if err != nil {
		return ForeignTable{}, fmt.Errorf("evolve schema: %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return ForeignTable{}, fmt.Errorf("commit schema: %w", err)
	}
	if f, ok := tbl.Schema().FindFieldByName("amount"); !ok || f.ID != evolvedAmount {
		return ForeignTable{}, fmt.Errorf("new amount column got id %d, want %d", f.ID, evolvedAmount)
	}
	if tbl, err = appendPhase(tbl, 2); err != nil {
		return ForeignTable{}, err
	}
	tx = tbl.NewTransaction()
	if err := tx.UpdateSpec(true).AddField("ts", iceberg.DayTransform{}, "ts_day").Commit(); err != nil {
		return ForeignTable{}, fmt.Errorf("partition by day(ts): %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return ForeignTable{}, fmt.Errorf("commit spec: %w", err)
	}
	if tbl, err = appendPhase(tbl, 3); err != nil {
		return ForeignTable{}, err
	}

	return finishForeign(ctx, env, ft, tbl, expected, "ts_day=2024-01-02")
}
