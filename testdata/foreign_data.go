package testdata

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/catalogs"
)

// foreignDataRecipes are the foreign layouts of rows and schemas: migrated,
// name-mapped, evolved, defaults, cross-partition equality deletes.
var foreignDataRecipes = []ForeignRecipe{
	{
		Name: "foreign.migrated",
		Description: "identity-partitioned table whose parquet files lack their partition columns (only in the path " +
			"and the partition tuple), added with one spec evolution, as Spark migrate/add_files and Hive leave it",
		build: buildMigrated,
	},
	{
		Name: "foreign.name-mapped",
		Description: "parquet files without field ids, read through schema.name-mapping.default, one column renamed " +
			"after files were added, as PyIceberg/Spark add_files of plain parquet leaves it",
		build: buildNameMapped,
	},
	{
		Name: "foreign.evolved",
		Description: "table appended to before and after a column rename, a drop, two adds (one reusing the dropped " +
			"name) and a spec change from unpartitioned to day(ts), as long-lived Spark tables are",
		build: buildEvolved,
	},
	{
		Name: "foreign.defaults",
		Description: "format v3 table with columns added with an initial-default (and a different write-default) " +
			"after files were written, as Spark 4 / Iceberg 1.8+ leave it",
		build: buildDefaults,
	},
	{
		Name: "foreign.cross-partition-eq-deletes",
		Description: "v2 identity(region) table with equality deletes on id written in an unpartitioned spec, so " +
			"they apply to every partition, followed by re-inserts of deleted ids, as Flink upserts leave it",
		build: buildCrossPartitionEqDeletes,
	},
}

// foreignNamespace is the namespace of every foreign recipe table.
const foreignNamespace = "foreign"

// foreignCatalog opens (creating) the local catalog in dir, creates the
// foreign namespace and returns the catalog with the ForeignTable fields
// that reach it. The caller closes the catalog with closeCatalog.
func foreignCatalog(ctx context.Context, dir, name string) (catalog.Catalog, ForeignTable, error) {
	cat, err := catalogs.OpenLocal(ctx, dir, true)
	if err != nil {
		return nil, ForeignTable{}, err
	}
	props, err := catalogs.LocalProps(dir)
	if err != nil {
		closeCatalog(cat)
		return nil, ForeignTable{}, err
	}
	err = cat.CreateNamespace(ctx, table.Identifier{foreignNamespace}, nil)
	if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		closeCatalog(cat)
		return nil, ForeignTable{}, fmt.Errorf("create namespace %s: %w", foreignNamespace, err)
	}
	ft := ForeignTable{
		CatalogName:  catalogs.LocalName,
		CatalogProps: props,
		Ident:        table.Identifier{foreignNamespace, name},
	}
	return cat, ft, nil
}

// closeCatalog closes cat if it holds resources (the SQL catalog's database).
func closeCatalog(cat catalog.Catalog) {
	if closer, ok := cat.(interface{ Close() error }); ok {
		_ = closer.Close()
	}
}

// foreignTableProps returns the properties a foreign recipe table is created
// with: the format version, the target file size every recipe writes out,
// and, with mergeOnRead, merge-on-read row-level operations.
func foreignTableProps(recipe string, formatVersion int, mergeOnRead bool) iceberg.Properties {
	props := iceberg.Properties{
		"format-version":                  strconv.Itoa(formatVersion),
		table.WriteTargetFileSizeBytesKey: strconv.Itoa(DefaultTargetFileSize),
		"tms.testdata.recipe":             recipe,
	}
	if mergeOnRead {
		props[table.WriteDeleteModeKey] = table.WriteModeMergeOnRead
		props["write.update.mode"] = table.WriteModeMergeOnRead
		props["write.merge.mode"] = table.WriteModeMergeOnRead
	}
	return props
}

// tableRoot returns the OS path of tbl's location.
func tableRoot(tbl *table.Table) (string, error) { return localPath(tbl.Location()) }

// foreignDataFile builds the DataFile of a parquet file a foreign writer
// put under the table, the way Spark's add_files does: column statistics
// (sizes, value and null counts, bounds) come from the file's footer for the
// columns it stores, the partition tuple from the partition path, not from
// the data. It reads the footer with table.FileToDataFile against an
// unpartitioned spec (so that iceberg-go infers no partition value) and
// copies the result into a DataFile of spec with partition.
func foreignDataFile(ctx context.Context, tbl *table.Table, spec iceberg.PartitionSpec, f parquetFile, partition map[int]any) (iceberg.DataFile, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	stats, err := table.FileToDataFile(ctx, fs, f.Location, tbl.Schema(), *iceberg.UnpartitionedSpec, 0, tbl.Properties())
	if err != nil {
		return nil, fmt.Errorf("read footer of %s: %w", f.Path, err)
	}
	b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentData, f.Location, iceberg.ParquetFile,
		partition, nil, nil, stats.Count(), stats.FileSizeBytes())
	if err != nil {
		return nil, err
	}
	b.ColumnSizes(stats.ColumnSizes()).
		ValueCounts(stats.ValueCounts()).
		NullValueCounts(stats.NullValueCounts()).
		NaNValueCounts(stats.NaNValueCounts()).
		LowerBoundValues(stats.LowerBoundValues()).
		UpperBoundValues(stats.UpperBoundValues()).
		SplitOffsets(stats.SplitOffsets())
	return b.Build(), nil
}

// foreignPlant is a file planted beside a table: its path relative to the
// table location and its content.
type foreignPlant struct {
	rel     string
	content []byte
}

// finishForeign completes ft once its table is built: Expected from the
// rows the builder wrote, then the planted orphans and kept files (partDir
// as for plantForeign).
func finishForeign(ctx context.Context, ft ForeignTable, tbl *table.Table, expected []foreignRow, partDir string) (ForeignTable, error) {
	var err error
	if ft.Expected, err = expectedBatches(tbl.Schema(), expected); err != nil {
		return ForeignTable{}, err
	}
	beside, err := anyDataFile(ctx, tbl)
	if err != nil {
		return ForeignTable{}, err
	}
	if err := plantForeign(&ft, tbl, partDir, beside); err != nil {
		return ForeignTable{}, err
	}
	return ft, nil
}

// plantForeign writes the orphans and the kept (hidden) files of a foreign
// table under its location, all with an mtime OrphanAge in the past, and
// records their absolute paths in ft. The orphans are writer-shaped names
// no metadata references: a data file directly in data/, one in partDir (a
// partition folder under data/, or "" for none), a manifest in metadata/.
// The kept file is a Hadoop .crc sidecar of the real data file beside.
func plantForeign(ft *ForeignTable, tbl *table.Table, partDir, beside string) error {
	root, err := tableRoot(tbl)
	if err != nil {
		return err
	}
	rng := seed(ft.Ident[len(ft.Ident)-1], 3)
	hex := func() string { return fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()) }
	orphans := []foreignPlant{
		{fmt.Sprintf("data/00000-0-%s-00001.parquet", hex()), parquetBytes},
		{fmt.Sprintf("metadata/%s-m0.avro", hex()), avroBytes},
	}
	if partDir != "" {
		orphans = append(orphans, foreignPlant{fmt.Sprintf("data/%s/00001-1-%s-00001.parquet", partDir, hex()), parquetBytes})
	}
	besideRel, err := filepath.Rel(root, beside)
	if err != nil {
		return err
	}
	kept := []foreignPlant{{
		filepath.ToSlash(filepath.Join(filepath.Dir(besideRel), "."+filepath.Base(besideRel)+".crc")),
		[]byte("crc\x00\x00\x00\x00"),
	}}
	mtime := time.Now().Truncate(time.Second).Add(-OrphanAge)
	plant := func(p foreignPlant) (string, error) {
		path := filepath.Join(root, filepath.FromSlash(p.rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, p.content, 0o644); err != nil {
			return "", err
		}
		return path, os.Chtimes(path, mtime, mtime)
	}
	for _, p := range orphans {
		path, err := plant(p)
		if err != nil {
			return fmt.Errorf("plant orphan: %w", err)
		}
		ft.Orphans = append(ft.Orphans, path)
	}
	for _, p := range kept {
		path, err := plant(p)
		if err != nil {
			return fmt.Errorf("plant kept file: %w", err)
		}
		ft.Kept = append(ft.Kept, path)
	}
	return nil
}

// anyDataFile returns the OS path of one live data file of tbl, for a
// sidecar to sit beside.
func anyDataFile(ctx context.Context, tbl *table.Table) (string, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return "", err
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return "", errors.New("table has no snapshot")
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return "", err
	}
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return "", err
			}
			if e.DataFile().ContentType() == iceberg.EntryContentData {
				return localPath(e.DataFile().FilePath())
			}
		}
	}
	return "", errors.New("table has no live data file")
}
