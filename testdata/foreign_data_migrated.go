package testdata

import (
	"context"
	"fmt"
	"path"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// Field ids of the foreign.migrated schema.
const (
	migratedID     = 1
	migratedRegion = 2
	migratedKind   = 3
	migratedAmount = 4
	migratedNote   = 5
)

// migratedRegionPart is the partition field id of region (spec 0 and 1).
const migratedRegionPart = 1000

// migratedSchema is the table schema of foreign.migrated. Every column but
// id is optional, as Spark's migrate makes the columns of a Hive table.
func migratedSchema() *iceberg.Schema {
	return iceberg.NewSchemaWithIdentifiers(0, []int{migratedID},
		iceberg.NestedField{ID: migratedID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: migratedRegion, Name: "region", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: migratedKind, Name: "kind", Type: iceberg.PrimitiveTypes.Int32},
		iceberg.NestedField{ID: migratedAmount, Name: "amount", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: migratedNote, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
}

// migratedFile is one file of foreign.migrated: its partition and how many
// rows it holds.
type migratedFile struct {
	region string
	kind   int32 // 0 in spec 0, where kind is a data column
	rows   int
}

// Phase 1 files (spec 0, identity(region)) and phase 2 files (spec 1,
// identity(region), identity(kind)): two or three files per partition.
var (
	migratedPhase1 = []migratedFile{{"eu", 0, 60}, {"eu", 0, 45}, {"us", 0, 50}, {"us", 0, 40}, {"us", 0, 35}}
	migratedPhase2 = []migratedFile{
		{"eu", 1, 30}, {"eu", 1, 25}, {"eu", 2, 40}, {"eu", 2, 20},
		{"us", 1, 35}, {"us", 1, 30}, {"ap", 2, 45}, {"ap", 2, 25},
	}
)

// buildMigrated builds foreign.migrated: a Hive-style table partitioned by
// region whose files were added into Iceberg (spec 0: identity(region)),
// then repartitioned by region and kind (spec 1) and more Hive-style files
// added. No data file stores a column that is an identity source in its own
// spec: spec-0 files store id, kind, amount, note (kind is a plain data
// column there, with values 1 and 2 mixed in each file, so a reader must
// take it from the file); spec-1 files store id, amount, note. Every file
// carries Iceberg field ids (PARQUET:field_id).
//
// iceberg-go's Transaction.AddFiles cannot add these files: it infers the
// partition tuple from the column statistics of the source column, and a
// file without the column gets a null partition value without complaint
// (the file lands in partition region=null). So the DataFiles are built as
// Spark's add_files builds them — partition values from the path, record
// count, size and column statistics from the footer for the columns the
// file stores (foreignDataFile) — and committed with
// Transaction.AddDataFiles, one snapshot per phase.
//
// The spec says a reader fills region (and kind, in spec 1) from the file's
// partition tuple, so Expected has them set on every row.
func buildMigrated(ctx context.Context, env foreignEnv) (ForeignTable, error) {
	cat, ft, err := env.open(ctx, "migrated")
	if err != nil {
		return ForeignTable{}, err
	}
	defer closeCatalog(cat)
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{migratedRegion}, FieldID: migratedRegionPart, Name: "region", Transform: iceberg.IdentityTransform{},
	})
	tbl, err := cat.CreateTable(ctx, ft.Ident, migratedSchema(),
		catalog.WithPartitionSpec(&spec), catalog.WithProperties(foreignTableProps("foreign.migrated", 2, false)))
	if err != nil {
		return ForeignTable{}, fmt.Errorf("create table: %w", err)
	}
	rng := seed("foreign.migrated", 1)
	var expected []foreignRow
	nextID := int64(0)

	addPhase := func(tbl *table.Table, files []migratedFile, phase int) (*table.Table, error) {
		cur := tbl.Spec()
		stored := []iceberg.NestedField{}
		for _, f := range tbl.Schema().Fields() {
			if f.ID == migratedRegion || (phase == 2 && f.ID == migratedKind) {
				continue
			}
			stored = append(stored, f)
		}
		storedSchema := iceberg.NewSchema(0, stored...)
		fsc, err := fileSchema(storedSchema, true)
		if err != nil {
			return nil, err
		}
		dfs := make([]iceberg.DataFile, 0, len(files))
		for i, mf := range files {
			rows := make([]foreignRow, mf.rows)
			for r := range rows {
				kind := mf.kind
				if phase == 1 {
					kind = int32(1 + rng.IntN(2))
				}
				rows[r] = foreignRow{
					migratedID: nextID, migratedRegion: mf.region, migratedKind: kind,
					migratedAmount: foreignAmount(rng), migratedNote: foreignNote(rng),
				}
				nextID++
			}
			part := map[int]any{}
			for _, pf := range cur.Fields() {
				switch pf.Name {
				case "region":
					part[pf.FieldID] = mf.region
				case "kind":
					part[pf.FieldID] = mf.kind
				}
			}
			rel := "region=" + mf.region
			if phase == 2 {
				rel = path.Join(rel, fmt.Sprintf("kind=%d", mf.kind))
			}
			name := fmt.Sprintf("part-%05d-%016x-c000.snappy.parquet", i, rng.Uint64())
			pf, err := writeForeignParquet(ctx, tbl, path.Join("data", rel, name), fsc, topLevelIDs(storedSchema), rows)
			if err != nil {
				return nil, fmt.Errorf("write %s: %w", name, err)
			}
			df, err := foreignDataFile(ctx, tbl, cur, pf, part)
			if err != nil {
				return nil, err
			}
			dfs = append(dfs, df)
			expected = append(expected, rows...)
		}
		tx := tbl.NewTransaction()
		props := iceberg.Properties{"tms.testdata.recipe": "foreign.migrated", "tms.testdata.phase": fmt.Sprint(phase)}
		if err := tx.AddDataFiles(ctx, dfs, props); err != nil {
			return nil, fmt.Errorf("add files of phase %d: %w", phase, err)
		}
		return tx.Commit(ctx)
	}

	if tbl, err = addPhase(tbl, migratedPhase1, 1); err != nil {
		return ForeignTable{}, err
	}
	tx := tbl.NewTransaction()
	if err := tx.UpdateSpec(true).AddIdentity("kind").Commit(); err != nil {
		return ForeignTable{}, fmt.Errorf("add identity(kind): %w", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return ForeignTable{}, fmt.Errorf("commit spec: %w", err)
	}
	if tbl, err = addPhase(tbl, migratedPhase2, 2); err != nil {
		return ForeignTable{}, err
	}

	return finishForeign(ctx, env, ft, tbl, expected, "region=eu/kind=1")
}
