package testdata

import (
	"context"
	"fmt"
	"path"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// Field ids of the foreign.name-mapped schema.
const (
	nameMappedID       = 1
	nameMappedRegion   = 2
	nameMappedCustomer = 3 // renamed to buyer after the first files were added
	nameMappedAmount   = 4
	nameMappedTS       = 5
	nameMappedNote     = 6
)

// nameMappedSchema is the schema foreign.name-mapped is created with.
func nameMappedSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: nameMappedID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: nameMappedRegion, Name: "region", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: nameMappedCustomer, Name: "customer", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: nameMappedAmount, Name: "amount", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: nameMappedTS, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: nameMappedNote, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
}

// nameMappedFile is one file of foreign.name-mapped: its region and rows.
type nameMappedFile struct {
	region string
	rows   int
}

// The files added before the rename (column "customer") and after it
// (column "buyer").
var (
	nameMappedBefore = []nameMappedFile{{"eu", 70}, {"eu", 50}, {"us", 60}}
	nameMappedAfter  = []nameMappedFile{{"eu", 40}, {"us", 45}, {"us", 35}}
)

// buildNameMapped builds foreign.name-mapped: an identity(region) table
// whose parquet files carry no field ids at all (plain Arrow schemas, as
// pandas, DuckDB or Hive write them), so every read goes through the table's
// schema.name-mapping.default. Three files are added with iceberg-go's
// Transaction.AddFiles, which sets the mapping from the then-current schema
// and infers each file's region from its column statistics (each file holds
// one region, stored in the file). Then customer is renamed to buyer with
// the mapping passed along (table.WithNameMapping), so the mapping lists
// both names for field 3 — what Iceberg Java does on every rename of a
// mapped table; iceberg-go's UpdateSchema only does it when given the
// mapping. Three more files, written with the new name, are added after.
// Reading the first three needs the mapping's alias "customer".
func buildNameMapped(ctx context.Context, env foreignEnv) (ForeignTable, error) {
	cat, ft, err := env.open(ctx, "name_mapped")
	if err != nil {
		return ForeignTable{}, err
	}
	defer closeCatalog(cat)
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{nameMappedRegion}, FieldID: 1000, Name: "region", Transform: iceberg.IdentityTransform{},
	})
	tbl, err := cat.CreateTable(ctx, ft.Ident, nameMappedSchema(),
		catalog.WithPartitionSpec(&spec), catalog.WithProperties(foreignTableProps("foreign.name-mapped", 2, false)))
	if err != nil {
		return ForeignTable{}, fmt.Errorf("create table: %w", err)
	}
	rng := seed("foreign.name-mapped", 1)
	var expected []foreignRow
	nextID := int64(0)

	add := func(tbl *table.Table, files []nameMappedFile, phase int) (*table.Table, error) {
		// The file schema is the current table schema without field ids:
		// the columns are found by name only.
		sc := tbl.Schema()
		fsc, err := fileSchema(sc, false)
		if err != nil {
			return nil, err
		}
		paths := make([]string, 0, len(files))
		for i, nf := range files {
			rows := make([]foreignRow, nf.rows)
			for r := range rows {
				rows[r] = foreignRow{
					nameMappedID: nextID, nameMappedRegion: nf.region,
					nameMappedCustomer: fmt.Sprintf("customer-%03d", rng.IntN(200)),
					nameMappedAmount:   foreignAmount(rng), nameMappedTS: foreignTS(rng, rng.IntN(7)),
					nameMappedNote: foreignNote(rng),
				}
				nextID++
			}
			name := fmt.Sprintf("%d-%d-%016x.parquet", phase, i, rng.Uint64())
			pf, err := writeForeignParquet(ctx, tbl, path.Join("data", "region="+nf.region, name), fsc, topLevelIDs(sc), rows)
			if err != nil {
				return nil, fmt.Errorf("write %s: %w", name, err)
			}
			paths = append(paths, pf.Location)
			expected = append(expected, rows...)
		}
		tx := tbl.NewTransaction()
		props := iceberg.Properties{"tms.testdata.recipe": "foreign.name-mapped", "tms.testdata.phase": fmt.Sprint(phase)}
		if err := tx.AddFiles(ctx, paths, props, false); err != nil {
			return nil, fmt.Errorf("add files of phase %d: %w", phase, err)
		}
		return tx.Commit(ctx)
	}

	if tbl, err = add(tbl, nameMappedBefore, 1); err != nil {
		return ForeignTable{}, err
	}
	if tbl.NameMapping() == nil {
		return ForeignTable{}, fmt.Errorf("AddFiles set no %s", table.DefaultNameMappingKey)
	}
	tx := tbl.NewTransaction()
	if err := tx.UpdateSchema(true, false, table.WithNameMapping(tbl.NameMapping())).
		RenameColumn([]string{"customer"}, "buyer").Commit(); err != nil {
		return ForeignTable{}, fmt.Errorf("rename customer: %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return ForeignTable{}, fmt.Errorf("commit rename: %w", err)
	}
	if tbl, err = add(tbl, nameMappedAfter, 2); err != nil {
		return ForeignTable{}, err
	}

	return finishForeign(ctx, env, ft, tbl, expected, "region=us")
}
