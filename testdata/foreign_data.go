package testdata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
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
	{
		Name: "foreign.uuid-fixed",
		Description: "v2 table identity-partitioned on a uuid column, half of its files storing uuids as plain " +
			"FIXED_LEN_BYTE_ARRAY(16) without the UUID logical type, as PyIceberg and plain Parquet writers do",
		build: buildUUIDFixed,
	},
	{
		Name: "foreign.decimal-partitions",
		Description: "v2 table identity-partitioned on a decimal(9,2) column, with files that store " +
			"decimals as INT32 and INT64, as Spark writes them",
		build: buildDecimalPartitions,
	},
}

// foreignNamespace is the namespace of every foreign recipe table of a
// local build.
const foreignNamespace = "foreign"

// foreignEnv is where a foreign recipe is built: under a local folder
// (dir, BuildForeign) or in the catalog of a target (BuildForeignOn). The
// data builders reach their catalog, write their files and age the files
// they plant only through it, so that one builder serves both.
type foreignEnv struct {
	// dir is the folder of a local build: an empty, absolute directory the
	// build owns, holding a fresh SQL catalog. "" on a target.
	dir string
	// target is the catalog of a build on a target, nil for a local build.
	target *ForeignTarget
}

// open opens (creating) the catalog of env, creates its namespace and
// returns the catalog with the ForeignTable fields that reach the table
// name in it. The caller closes the catalog with closeCatalog.
func (e foreignEnv) open(ctx context.Context, name string) (catalog.Catalog, ForeignTable, error) {
	if e.target == nil {
		return foreignCatalog(ctx, e.dir, name)
	}
	t := e.target
	cat, err := catalogs.Open(ctx, t.CatalogName, t.CatalogProps)
	if err != nil {
		return nil, ForeignTable{}, err
	}
	err = cat.CreateNamespace(ctx, table.Identifier{t.Namespace}, nil)
	if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		closeCatalog(cat)
		return nil, ForeignTable{}, fmt.Errorf("create namespace %s: %w", t.Namespace, err)
	}
	ft := ForeignTable{
		CatalogName:  t.CatalogName,
		CatalogProps: maps.Clone(t.CatalogProps),
		Ident:        table.Identifier{t.Namespace, name},
	}
	return cat, ft, nil
}

// age sets the modification time of the files at locations to when:
// os.Chtimes locally, the target's SetModTime on a target.
func (e foreignEnv) age(when time.Time, locations ...string) error {
	if e.target != nil {
		if err := e.target.SetModTime(when, locations...); err != nil {
			return fmt.Errorf("set the modification time of %d files: %w", len(locations), err)
		}
		return nil
	}
	for _, loc := range locations {
		p, err := localPath(loc)
		if err != nil {
			return err
		}
		if err := os.Chtimes(p, when, when); err != nil {
			return err
		}
	}
	return nil
}

// keptBeside returns the hidden file a foreign table keeps beside its data
// file at rel (slash-separated, under the table location). Locally it is
// the .crc sidecar Hadoop's ChecksumFileSystem writes beside every file. On
// a target it is the _SUCCESS marker a Spark or Hadoop job commit leaves in
// the folder it wrote: object stores never get .crc sidecars (S3A writes
// none), and table buckets refuse keys outside the Iceberg layout —
// SeaweedFS's answers 403 to a .crc under data/, where it takes only
// .parquet, .orc, .avro, .puffin, .lance and folder-shaped names such as
// _SUCCESS.
func (e foreignEnv) keptBeside(rel string) foreignPlant {
	if e.target != nil {
		return foreignPlant{path.Join(path.Dir(rel), "_SUCCESS"), nil}
	}
	return foreignPlant{path.Join(path.Dir(rel), "."+path.Base(rel)+".crc"), []byte("crc\x00\x00\x00\x00")}
}

// recorded spells the location of a planted file the way ForeignTable's
// Orphans and Kept hold it: an OS path locally, the location on a target.
func (e foreignEnv) recorded(location string) (string, error) {
	if e.target != nil {
		return location, nil
	}
	return localPath(location)
}

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

// tableLocation returns tbl's location without a trailing slash: the
// prefix of every file a foreign builder writes, tableLocation(tbl)+"/rel".
func tableLocation(tbl *table.Table) string { return strings.TrimSuffix(tbl.Location(), "/") }

// writeTableFile writes content at rel (slash-separated) under tbl's
// location through tbl's FileIO and returns its location.
func writeTableFile(ctx context.Context, tbl *table.Table, rel string, content []byte) (string, error) {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return "", err
	}
	w, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return "", fmt.Errorf("file IO %T of %s cannot write files", fsys, tbl.Location())
	}
	loc := tableLocation(tbl) + "/" + rel
	if err := w.WriteFile(loc, content); err != nil {
		return "", fmt.Errorf("write %s: %w", loc, err)
	}
	return loc, nil
}

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
		return nil, fmt.Errorf("read footer of %s: %w", f.Location, err)
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

// finishForeign completes ft once its table is built in env: Expected
// from the rows the builder wrote, then the planted orphans and kept files
// (partDir as for plantForeign).
func finishForeign(ctx context.Context, env foreignEnv, ft ForeignTable, tbl *table.Table, expected []foreignRow, partDir string) (ForeignTable, error) {
	var err error
	if ft.Expected, err = expectedBatches(tbl.Schema(), expected); err != nil {
		return ForeignTable{}, err
	}
	beside, err := anyDataFile(ctx, tbl)
	if err != nil {
		return ForeignTable{}, err
	}
	if err := plantForeign(ctx, env, &ft, tbl, partDir, beside); err != nil {
		return ForeignTable{}, err
	}
	return ft, nil
}

// plantForeign writes the orphans and the kept (hidden) files of a foreign
// table under its location through its FileIO, ages them all to an mtime
// OrphanAge in the past (env.age) and records them in ft (env.recorded).
// The orphans are writer-shaped names no metadata references: a data file
// directly in data/, one in partDir (a partition folder under data/, or ""
// for none), a manifest in metadata/. The kept file is a Hadoop .crc
// sidecar of the real data file at location beside, or on a target the
// _SUCCESS marker in its folder (foreignEnv.keptBeside).
func plantForeign(ctx context.Context, env foreignEnv, ft *ForeignTable, tbl *table.Table, partDir, beside string) error {
	rng := seed(ft.Ident[len(ft.Ident)-1], 3)
	hex := func() string { return fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()) }
	orphans := []foreignPlant{
		{fmt.Sprintf("data/00000-0-%s-00001.parquet", hex()), parquetBytes},
		{fmt.Sprintf("metadata/%s-m0.avro", hex()), avroBytes},
	}
	if partDir != "" {
		orphans = append(orphans, foreignPlant{fmt.Sprintf("data/%s/00001-1-%s-00001.parquet", partDir, hex()), parquetBytes})
	}
	besideRel, ok := strings.CutPrefix(beside, tableLocation(tbl)+"/")
	if !ok {
		return fmt.Errorf("data file %s is not under the table location %s", beside, tbl.Location())
	}
	kept := []foreignPlant{env.keptBeside(besideRel)}
	mtime := time.Now().Truncate(time.Second).Add(-OrphanAge)
	plant := func(plants []foreignPlant, into *[]string) error {
		locs := make([]string, 0, len(plants))
		for _, p := range plants {
			loc, err := writeTableFile(ctx, tbl, p.rel, p.content)
			if err != nil {
				return err
			}
			locs = append(locs, loc)
		}
		if err := env.age(mtime, locs...); err != nil {
			return err
		}
		for _, loc := range locs {
			rec, err := env.recorded(loc)
			if err != nil {
				return err
			}
			*into = append(*into, rec)
		}
		return nil
	}
	if err := plant(orphans, &ft.Orphans); err != nil {
		return fmt.Errorf("plant orphan: %w", err)
	}
	if err := plant(kept, &ft.Kept); err != nil {
		return fmt.Errorf("plant kept file: %w", err)
	}
	return nil
}

// anyDataFile returns the location of one live data file of tbl, for a
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
				return e.DataFile().FilePath(), nil
			}
		}
	}
	return "", errors.New("table has no live data file")
}
