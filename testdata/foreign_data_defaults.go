package testdata

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// Field ids of foreign.defaults: 1–4 exist from the start, priority and
// channel are added with defaults after the first files were written.
const (
	defaultsID       = 1
	defaultsCategory = 2
	defaultsAmount   = 3
	defaultsTS       = 4
	defaultsPriority = 5
	defaultsChannel  = 6
)

// Defaults of the columns foreign.defaults adds. The initial-default is
// what a reader returns for rows of files written before the column
// existed; the write-default, changed afterwards, only tells writers what to
// write when a row has no value, so no old row may show it.
var (
	defaultsPriorityInitial = int32(3)
	defaultsPriorityWrite   = int32(1)
	defaultsChannelInitial  = "web"
	defaultsChannelWrite    = "app"
)

// defaultsSchema is the schema foreign.defaults is created with.
func defaultsSchema() *iceberg.Schema {
	return iceberg.NewSchemaWithIdentifiers(0, []int{defaultsID},
		iceberg.NestedField{ID: defaultsID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: defaultsCategory, Name: "category", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: defaultsAmount, Name: "amount", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: defaultsTS, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
	)
}

// defaultsDays is how many days the ts values span (day(ts) partitions).
const defaultsDays = 2

// defaultsBefore and defaultsAfter are the rows per append before and
// after the columns are added.
var (
	defaultsBefore = []int{150, 120}
	defaultsAfter  = []int{100}
)

// buildDefaults builds foreign.defaults, a format v3 table partitioned by
// day(ts): two iceberg-go appends, then one schema update adding
// priority (int, required, initial-default 3) and channel (string, optional,
// initial-default "web"), then a second update changing their
// write-defaults to 1 and "app" (ALTER COLUMN … SET DEFAULT), then one more
// append whose rows set both columns (channel NULL on some rows: an
// explicit NULL stays NULL).
//
// iceberg-go v0.7.0 does this through its public API: UpdateSchema.AddColumn
// with a default literal sets initial-default and write-default to it, and
// UpdateColumn with WriteDefault changes the write-default alone; nothing in
// the metadata is written by hand.
//
// Expected: rows of the first two appends have priority 3 and channel "web"
// (the initial-defaults; their files lack both columns), never the
// write-defaults.
func buildDefaults(ctx context.Context, env foreignEnv) (ForeignTable, error) {
	cat, ft, err := env.open(ctx, "defaults")
	if err != nil {
		return ForeignTable{}, err
	}
	defer closeCatalog(cat)
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{defaultsTS}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{},
	})
	tbl, err := cat.CreateTable(ctx, ft.Ident, defaultsSchema(),
		catalog.WithPartitionSpec(&spec), catalog.WithProperties(foreignTableProps("foreign.defaults", 3, false)))
	if err != nil {
		return ForeignTable{}, fmt.Errorf("create table: %w", err)
	}
	rng := seed("foreign.defaults", 1)
	var expected []foreignRow
	nextID := int64(0)
	appendRows := func(tbl *table.Table, sizes []int, after bool) (*table.Table, error) {
		for a, n := range sizes {
			rows := make([]foreignRow, n)
			for r := range rows {
				rows[r] = foreignRow{
					defaultsID: nextID, defaultsCategory: categories[rng.IntN(len(categories))],
					defaultsAmount: foreignAmount(rng), defaultsTS: foreignTS(rng, int(nextID)%defaultsDays),
				}
				if after {
					rows[r][defaultsPriority] = int32(rng.IntN(5))
					if rng.IntN(5) != 0 {
						rows[r][defaultsChannel] = []string{"web", "app", "store"}[rng.IntN(3)]
					}
				}
				nextID++
			}
			props := iceberg.Properties{"tms.testdata.recipe": "foreign.defaults", "tms.testdata.append": strconv.Itoa(a)}
			var err error
			if tbl, err = appendForeignRows(ctx, tbl, rows, props); err != nil {
				return nil, fmt.Errorf("append: %w", err)
			}
			if !after {
				for _, row := range rows {
					row[defaultsPriority] = defaultsPriorityInitial
					row[defaultsChannel] = defaultsChannelInitial
				}
			}
			expected = append(expected, rows...)
		}
		return tbl, nil
	}

	if tbl, err = appendRows(tbl, defaultsBefore, false); err != nil {
		return ForeignTable{}, err
	}
	tx := tbl.NewTransaction()
	err = tx.UpdateSchema(true, false).
		AddColumn([]string{"priority"}, iceberg.PrimitiveTypes.Int32, "", true, iceberg.NewLiteral(defaultsPriorityInitial)).
		AddColumn([]string{"channel"}, iceberg.PrimitiveTypes.String, "", false, iceberg.NewLiteral(defaultsChannelInitial)).
		Commit()
	if err != nil {
		return ForeignTable{}, fmt.Errorf("add columns with defaults: %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return ForeignTable{}, fmt.Errorf("commit add columns: %w", err)
	}
	tx = tbl.NewTransaction()
	err = tx.UpdateSchema(true, false).
		UpdateColumn([]string{"priority"}, table.ColumnUpdate{
			WriteDefault: iceberg.Optional[iceberg.Literal]{Valid: true, Val: iceberg.NewLiteral(defaultsPriorityWrite)},
		}).
		UpdateColumn([]string{"channel"}, table.ColumnUpdate{
			WriteDefault: iceberg.Optional[iceberg.Literal]{Valid: true, Val: iceberg.NewLiteral(defaultsChannelWrite)},
		}).
		Commit()
	if err != nil {
		return ForeignTable{}, fmt.Errorf("set write-defaults: %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return ForeignTable{}, fmt.Errorf("commit write-defaults: %w", err)
	}
	if tbl, err = appendRows(tbl, defaultsAfter, true); err != nil {
		return ForeignTable{}, err
	}

	return finishForeign(ctx, env, ft, tbl, expected, "ts_day=2024-01-02")
}
