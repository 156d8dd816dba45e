package testdata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/catalogs"
)

// foreignPathRecipes are the foreign layouts of paths and files: relative
// and file: locations, Hadoop sidecars.
var foreignPathRecipes = []ForeignRecipe{
	{
		Name: "foreign.relative",
		Description: "a hadoop-catalog table whose location is relative (as Java's HadoopCatalog writes it when " +
			"its warehouse is a relative path): data and manifest paths are relative, the metadata log absolute",
		LocalOnly: true,
		build:     inDir(buildRelative),
	},
	{
		Name: "foreign.file-uri",
		Description: "a table whose location is a Hadoop-style file:/abs URI and whose later data files are " +
			"file:///abs URIs (write.data.path), while the FileIO lists bare OS paths",
		LocalOnly: true,
		build:     inDir(buildFileURI),
	},
	{
		Name: "foreign.hadoop-sidecars",
		Description: "a hadoop-catalog table as Hadoop writers leave it: a .crc beside every file, _SUCCESS, a " +
			"_temporary/ folder of an aborted job, and a partition field whose name starts with _",
		LocalOnly: true,
		build:     inDir(buildSidecars),
	},
}

// inDir adapts the builder of a path recipe, which builds under a local
// folder only (its layouts are local path forms), to a ForeignRecipe's
// build.
func inDir(build func(ctx context.Context, dir string) (ForeignTable, error)) func(context.Context, foreignEnv) (ForeignTable, error) {
	return func(ctx context.Context, env foreignEnv) (ForeignTable, error) {
		if env.target != nil || env.dir == "" {
			return ForeignTable{}, errors.New("a layout of local paths is built only under a local folder")
		}
		return build(ctx, env.dir)
	}
}

// pathRows is the number of rows of each of the two appends of a path recipe.
const pathRows = 40

// pathSpec is the partition spec of the path recipes: identity(category)
// named name, so that data files land in folders name=value.
func pathSpec(name string) iceberg.PartitionSpec {
	return iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{fieldCategory}, FieldID: 1000, Name: name, Transform: iceberg.IdentityTransform{},
	})
}

// pathBuild is what every path recipe shares: the rows it wrote and the
// files it planted.
type pathBuild struct {
	name  string
	root  string // table location as an absolute OS path
	now   time.Time
	rows  []Row
	gen   *generator
	f     ForeignTable
	token int
}

func newPathBuild(name string) *pathBuild {
	return &pathBuild{name: name, now: time.Now().Truncate(time.Second), gen: newGenerator(Recipe{Name: name, Days: 7})}
}

// appendRows commits pathRows new rows to tbl in one append (one data file
// per category touched) and returns the table after the commit.
func (b *pathBuild) appendRows(ctx context.Context, tbl *table.Table) (*table.Table, error) {
	sc, err := arrowSchema()
	if err != nil {
		return nil, err
	}
	rows := b.gen.rows(pathRows)
	tx := tbl.NewTransaction()
	if err := appendBatch(ctx, tx, sc, rows, iceberg.Properties{"tms.testdata.recipe": b.name}); err != nil {
		return nil, err
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		return nil, err
	}
	b.rows = append(b.rows, rows...)
	return tbl, nil
}

// old is the mtime of everything a path recipe leaves: the table was written
// days ago, so only its references keep a file from being an orphan.
func (b *pathBuild) old() time.Time { return b.now.Add(-OrphanAge) }

// hex returns a fresh deterministic token for planted file names.
func (b *pathBuild) hex() string {
	b.token++
	return fmt.Sprintf("%08x-%04x-4000-8000-%012x", 0x7e57_0000+b.token, b.token, b.token)
}

// plant writes content at rel under the table root with an old mtime and
// records it as an orphan (kept false) or a file that must be kept.
func (b *pathBuild) plant(rel string, content []byte, kept bool) error {
	p := filepath.Join(b.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, content, 0o644); err != nil {
		return err
	}
	if err := os.Chtimes(p, b.old(), b.old()); err != nil {
		return err
	}
	if kept {
		b.f.Kept = append(b.f.Kept, p)
	} else {
		b.f.Orphans = append(b.f.Orphans, p)
	}
	return nil
}

// plantOrphans plants the real orphans every path recipe has: a data file
// in data/ and one in a partition folder, a manifest and a metadata.json of
// a failed commit in metadata/.
func (b *pathBuild) plantOrphans(partition string) error {
	for _, o := range []struct {
		rel     string
		content []byte
	}{
		{fmt.Sprintf("data/00099-0-%s-00001.parquet", b.hex()), parquetBytes},
		{fmt.Sprintf("data/%s=books/00099-1-%s-00001.parquet", partition, b.hex()), parquetBytes},
		{fmt.Sprintf("metadata/%s-m0.avro", b.hex()), avroBytes},
		{fmt.Sprintf("metadata/%s.metadata.json", b.hex()), []byte("{")},
	} {
		if err := b.plant(o.rel, o.content, false); err != nil {
			return fmt.Errorf("plant orphan: %w", err)
		}
	}
	return nil
}

// finish ages every file under the table root, plants the orphans and the
// kept hidden files given, and fills Expected from the rows written.
func (b *pathBuild) finish(partition string, kept map[string][]byte) (ForeignTable, error) {
	if err := ageTree(b.root, b.old()); err != nil {
		return ForeignTable{}, err
	}
	if err := b.plantOrphans(partition); err != nil {
		return ForeignTable{}, err
	}
	for rel, content := range kept {
		if err := b.plant(rel, content, true); err != nil {
			return ForeignTable{}, fmt.Errorf("plant kept file: %w", err)
		}
	}
	sc, err := arrowSchema()
	if err != nil {
		return ForeignTable{}, err
	}
	b.f.Expected = []arrow.RecordBatch{record(memory.DefaultAllocator, sc, b.rows)}
	slices.Sort(b.f.Orphans)
	slices.Sort(b.f.Kept)
	return b.f, nil
}

// ageTree sets the mtime of every file under root to t.
func ageTree(root string, t time.Time) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, t, t)
	})
}

// buildRelative builds foreign.relative. iceberg-go's hadoop catalog makes
// its warehouse absolute and always creates tables at an absolute location,
// so the table is created the way Java's HadoopCatalog with a relative
// warehouse creates it: v1.metadata.json (iceberg-go's own NewMetadata,
// serialised) with location "warehouse/foreign/relative", and
// version-hint.text. Everything after that is iceberg-go: the hadoop
// catalog loads and commits it (writing v2, v3 … at absolute paths, so the
// metadata log is absolute), while data files, manifests and manifest lists
// are written at the relative location by a Table whose FileIO resolves
// relative paths against dir, as a writer started in dir would. A test
// must run in Workdir (dir) for the relative paths to resolve.
func buildRelative(ctx context.Context, dir string) (ForeignTable, error) {
	const rel = "warehouse/foreign/relative"
	b := newPathBuild("foreign.relative")
	b.root = filepath.Join(dir, filepath.FromSlash(rel))
	ident := table.Identifier{"foreign", "relative"}
	b.f = ForeignTable{
		CatalogName:  "foreign",
		CatalogProps: iceberg.Properties{"type": "hadoop", "warehouse": "warehouse"},
		Workdir:      dir,
		Ident:        ident,
	}
	// The builder must not chdir (tests run in parallel): the same catalog
	// opened with the absolute warehouse is what the relative one resolves to.
	cat, err := catalogs.Open(ctx, "foreign", iceberg.Properties{"type": "hadoop", "warehouse": filepath.Join(dir, "warehouse")})
	if err != nil {
		return ForeignTable{}, err
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"foreign"}, nil); err != nil {
		return ForeignTable{}, err
	}
	spec := pathSpec("category")
	meta, err := table.NewMetadata(Schema(), &spec, table.UnsortedSortOrder, rel, iceberg.Properties{"format-version": "2"})
	if err != nil {
		return ForeignTable{}, err
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return ForeignTable{}, err
	}
	metaDir := filepath.Join(b.root, "metadata")
	if err := os.MkdirAll(metaDir, 0o755); err != nil {
		return ForeignTable{}, err
	}
	if err := os.WriteFile(filepath.Join(metaDir, "v1.metadata.json"), js, 0o644); err != nil {
		return ForeignTable{}, err
	}
	if err := os.WriteFile(filepath.Join(metaDir, "version-hint.text"), []byte("1"), 0o644); err != nil {
		return ForeignTable{}, err
	}
	loaded, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return ForeignTable{}, err
	}
	if loaded.Location() != rel {
		return ForeignTable{}, fmt.Errorf("hadoop catalog reports location %q, want the relative %q", loaded.Location(), rel)
	}
	tbl := table.New(ident, loaded.Metadata(), loaded.MetadataLocation(),
		func(context.Context) (iceio.IO, error) { return dirIO{dir: dir}, nil }, cat)
	for range 2 {
		if tbl, err = b.appendRows(ctx, tbl); err != nil {
			return ForeignTable{}, err
		}
	}
	cur := filepath.Base(tbl.MetadataLocation())
	return b.finish("category", map[string][]byte{
		"data/_SUCCESS":                nil,
		"metadata/." + cur + ".crc":    []byte("crc"),
		"data/.part-00000.parquet.crc": []byte("crc"),
	})
}

// buildFileURI builds foreign.file-uri in a testdata-style SQL catalog: the
// table location is "file:/abs/…" (Hadoop's Path.toString spelling), so the
// metadata files and the first append's data files are spelled that way.
// The second append's files are written by iceberg-go too, then committed
// (DataFileBuilder + AddDataFiles, every field copied from what the writer
// returned) under other spellings of the same files: "file:///abs/…" and
// bare "/abs/…". iceberg-go's local FileIO lists bare paths. (The table
// property write.data.path would have been the natural way, but
// iceberg-go's partitioned writer ignores it.)
func buildFileURI(ctx context.Context, dir string) (ForeignTable, error) {
	b := newPathBuild("foreign.file-uri")
	b.root = filepath.Join(dir, "warehouse", "foreign", "file_uri")
	ident := table.Identifier{"foreign", "file_uri"}
	props, err := catalogs.LocalProps(dir)
	if err != nil {
		return ForeignTable{}, err
	}
	b.f = ForeignTable{CatalogName: "foreign", CatalogProps: props, Ident: ident}
	if err := os.MkdirAll(filepath.Join(dir, "warehouse"), 0o755); err != nil {
		return ForeignTable{}, err
	}
	cat, err := b.f.Open(ctx)
	if err != nil {
		return ForeignTable{}, err
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"foreign"}, nil); err != nil {
		return ForeignTable{}, err
	}
	spec := pathSpec("category")
	tbl, err := cat.CreateTable(ctx, ident, Schema(), catalog.WithPartitionSpec(&spec),
		catalog.WithLocation("file:"+filepath.ToSlash(b.root)),
		catalog.WithProperties(iceberg.Properties{"format-version": "2"}))
	if err != nil {
		return ForeignTable{}, err
	}
	if tbl, err = b.appendRows(ctx, tbl); err != nil {
		return ForeignTable{}, err
	}

	sc, err := arrowSchema()
	if err != nil {
		return ForeignTable{}, err
	}
	rows := b.gen.rows(pathRows)
	rec := record(memory.DefaultAllocator, sc, rows)
	one := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, sc, one) {
		if err != nil {
			return ForeignTable{}, fmt.Errorf("write data file: %w", err)
		}
		local, err := localPath(df.FilePath())
		if err != nil {
			return ForeignTable{}, err
		}
		spelled := local // bare
		if len(files)%2 == 0 {
			spelled = "file://" + filepath.ToSlash(local)
		}
		respelled, err := respell(tbl.Spec(), df, spelled)
		if err != nil {
			return ForeignTable{}, err
		}
		files = append(files, respelled)
	}
	tx := tbl.NewTransaction()
	if err := tx.AddDataFiles(ctx, files, iceberg.Properties{"tms.testdata.recipe": b.name}); err != nil {
		return ForeignTable{}, err
	}
	if _, err := tx.Commit(ctx); err != nil {
		return ForeignTable{}, err
	}
	b.rows = append(b.rows, rows...)
	return b.finish("category", map[string][]byte{
		"data/_SUCCESS":                       nil,
		"metadata/.version-hint.text.crc":     []byte("crc"),
		"data/category=books/.stray.parquet":  parquetBytes,
		"data/_temporary/0/part-0000.parquet": parquetBytes,
	})
}

// respell returns df with its path spelled path, every other field copied.
func respell(spec iceberg.PartitionSpec, df iceberg.DataFile, path string) (iceberg.DataFile, error) {
	b, err := iceberg.NewDataFileBuilder(spec, df.ContentType(), path, df.FileFormat(), df.Partition(), nil, nil,
		df.Count(), df.FileSizeBytes())
	if err != nil {
		return nil, err
	}
	b.ColumnSizes(df.ColumnSizes()).ValueCounts(df.ValueCounts()).NullValueCounts(df.NullValueCounts()).
		NaNValueCounts(df.NaNValueCounts()).LowerBoundValues(df.LowerBoundValues()).
		UpperBoundValues(df.UpperBoundValues()).SplitOffsets(df.SplitOffsets())
	if id := df.SortOrderID(); id != nil {
		b.SortOrderID(*id)
	}
	return b.Build(), nil
}

// buildSidecars builds foreign.hadoop-sidecars: a hadoop-catalog table
// partitioned by identity(category) under the partition name "_category"
// (so its partition folders "_category=…" start with "_" but are not
// hidden), two appends, then what Hadoop's ChecksumFileSystem and
// FileOutputCommitter leave: ".<name>.crc" beside every file of the table,
// data/_SUCCESS, and data/_temporary/0/… of an aborted job attempt holding
// copies of real parquet files.
func buildSidecars(ctx context.Context, dir string) (ForeignTable, error) {
	b := newPathBuild("foreign.hadoop-sidecars")
	warehouse := filepath.Join(dir, "warehouse")
	b.root = filepath.Join(warehouse, "foreign", "hadoop_sidecars")
	ident := table.Identifier{"foreign", "hadoop_sidecars"}
	b.f = ForeignTable{
		CatalogName:  "foreign",
		CatalogProps: iceberg.Properties{"type": "hadoop", "warehouse": "file://" + filepath.ToSlash(warehouse)},
		Ident:        ident,
	}
	cat, err := b.f.Open(ctx)
	if err != nil {
		return ForeignTable{}, err
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{"foreign"}, nil); err != nil {
		return ForeignTable{}, err
	}
	spec := pathSpec("_category")
	tbl, err := cat.CreateTable(ctx, ident, Schema(), catalog.WithPartitionSpec(&spec),
		catalog.WithProperties(iceberg.Properties{"format-version": "2"}))
	if err != nil {
		return ForeignTable{}, err
	}
	for range 2 {
		if tbl, err = b.appendRows(ctx, tbl); err != nil {
			return ForeignTable{}, err
		}
	}
	kept := map[string][]byte{"data/_SUCCESS": nil}
	var aParquet []byte
	if err := filepath.WalkDir(b.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(b.root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		crc := strings.TrimPrefix(pathDir(rel)+"/."+filepath.Base(p)+".crc", "./")
		kept[crc] = []byte("crc\x00" + rel)
		if aParquet == nil && strings.HasSuffix(p, ".parquet") {
			aParquet, err = os.ReadFile(p)
		}
		return err
	}); err != nil {
		return ForeignTable{}, err
	}
	job := "_temporary/0/_temporary/attempt_202401010000_0001_m_000000_0"
	kept["data/"+job+"/_category=books/part-00000-"+b.hex()+".c000.parquet"] = aParquet
	kept["data/"+job+"/part-00001-"+b.hex()+".c000.parquet"] = aParquet
	kept["data/_temporary/0/task_202401010000_0001_m_000001/_SUCCESS"] = nil
	kept["data/_category=books/._SUCCESS.crc"] = []byte("crc")
	return b.finish("_category", kept)
}

// pathDir is path.Dir for slash paths without importing path next to
// path/filepath.
func pathDir(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

// dirIO is iceberg-go's local FileIO with relative paths resolved against
// dir instead of the process working directory: the FileIO of a writer
// started in dir.
type dirIO struct {
	iceio.LocalFS
	dir string
}

func (d dirIO) abs(name string) string {
	if strings.Contains(name, ":") || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(d.dir, name)
}

func (d dirIO) Open(name string) (iceio.File, error)         { return d.LocalFS.Open(d.abs(name)) }
func (d dirIO) ReadFile(name string) ([]byte, error)         { return d.LocalFS.ReadFile(d.abs(name)) }
func (d dirIO) Create(name string) (iceio.FileWriter, error) { return d.LocalFS.Create(d.abs(name)) }
func (d dirIO) WriteFile(name string, p []byte) error        { return d.LocalFS.WriteFile(d.abs(name), p) }
func (d dirIO) Remove(name string) error                     { return d.LocalFS.Remove(d.abs(name)) }
func (d dirIO) RemoveAll(name string) error                  { return d.LocalFS.RemoveAll(d.abs(name)) }
func (d dirIO) Stat(name string) (fs.FileInfo, error)        { return d.LocalFS.Stat(d.abs(name)) }
func (d dirIO) MkdirAll(name string) error                   { return d.LocalFS.MkdirAll(d.abs(name)) }
func (d dirIO) WalkDir(root string, fn fs.WalkDirFunc) error {
	return d.LocalFS.WalkDir(d.abs(root), fn)
}
