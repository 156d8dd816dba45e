package testdata

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/catalogs"
)

// BuildOptions says which recipes to build and how big.
type BuildOptions struct {
	// Recipes names the recipes to build, in order. Empty builds the
	// default set (Recipes()); recipes marked OnlyWhenNamed are built only
	// when listed here.
	Recipes []string
	// Scale multiplies each recipe's commit and orphan counts (Appends,
	// PositionDeletes, EqualityDeletes, Orphans); rows per append, files per
	// append and days stay fixed, so file, snapshot and manifest counts grow
	// linearly while every file stays small. It must be at least 1; callers
	// that have no opinion pass 1 (DefaultScale). Zero is rejected rather
	// than defaulted so that a scale computed as 0 is reported, not silently
	// changed.
	Scale int
	// Replace drops a recipe table that already exists (and deletes the
	// files under its location, which must lie inside the build directory)
	// before building it again. Without it an existing table is an error
	// and nothing is built.
	Replace bool
	// Log receives one line per built table. Nil discards.
	Log *zap.Logger
	// Adjust, when set, may shrink or reshape each selected recipe before it
	// is validated and built — tests use it to build a lighter variant of a
	// recipe (fewer appends) where the full size only costs time. The
	// adjusted recipe is validated like any other.
	Adjust func(r *Recipe)
}

// DefaultScale is the scale the command line uses when none is given.
const DefaultScale = 1

// Report says what Build materialised.
type Report struct {
	// Dir is the absolute build directory (catalog.db and warehouse/).
	Dir string
	// Tables has one entry per built recipe, in build order.
	Tables []TableReport
	// Took is the wall time of the whole build.
	Took time.Duration
}

// Table returns the report of the table built from recipe name.
func (r Report) Table(name string) (TableReport, bool) {
	for _, t := range r.Tables {
		if t.Name == name {
			return t, true
		}
	}
	return TableReport{}, false
}

// TableReport describes one built table as its current snapshot shows it,
// counted by reading the snapshot's manifests back.
type TableReport struct {
	// Name is the recipe (and table) name, e.g. "tms.small_files".
	Name string
	// Location is the table location (a file:// URL).
	Location string
	// DataFiles is the number of live data files.
	DataFiles int
	// PositionDeleteFiles and EqualityDeleteFiles count live delete files.
	PositionDeleteFiles, EqualityDeleteFiles int
	// Partitions is the number of distinct partition tuples among live data
	// files (1 for an unpartitioned table).
	Partitions int
	// Manifests is the number of manifests in the current snapshot's list.
	Manifests int
	// Snapshots is the number of snapshots in the table metadata.
	Snapshots int
	// Rows is the number of live rows a full scan returns.
	Rows int64
	// DeletedRows is the number of rows removed by delete files.
	DeletedRows int64
	// Orphans are the files planted for orphan cleanup; also recorded in
	// OrphansFile in the build directory.
	Orphans []OrphanFile
	// Took is the wall time spent building this table.
	Took time.Duration
}

// Build creates (or reuses) the local catalog in dir, the namespace of each
// recipe, and one table per recipe. All requested tables are checked first: an
// existing table is an error naming it, and nothing is built, unless
// opts.Replace is set. A failure in the middle leaves the tables built so far
// (and the half-built one, which a Replace build rebuilds) and returns a report
// of those built.
func Build(ctx context.Context, dir string, opts BuildOptions) (Report, error) {
	start := time.Now()
	if opts.Scale < 1 {
		return Report{}, fmt.Errorf("testdata: scale %d: must be at least 1", opts.Scale)
	}
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	recipes, err := selectRecipes(opts.Recipes, opts.Adjust)
	if err != nil {
		return Report{}, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Report{}, fmt.Errorf("testdata: build dir %q: %w", dir, err)
	}
	cat, err := catalogs.OpenLocal(ctx, abs, true)
	if err != nil {
		return Report{}, err
	}
	if closer, ok := cat.(interface{ Close() error }); ok {
		defer func() { _ = closer.Close() }()
	}

	for _, r := range recipes {
		ident := table.Identifier{r.Namespace(), r.Table()}
		exists, err := cat.CheckTableExists(ctx, ident)
		if err != nil && !errors.Is(err, catalog.ErrNoSuchNamespace) {
			return Report{}, fmt.Errorf("testdata: check table %s: %w", r.Name, err)
		}
		if !exists {
			continue
		}
		if !opts.Replace {
			return Report{}, fmt.Errorf("testdata: table %s already exists in %s (rebuild it with --replace, or BuildOptions.Replace)", r.Name, abs)
		}
		if err := dropTable(ctx, cat, ident, abs); err != nil {
			return Report{}, err
		}
	}

	rep := Report{Dir: abs}
	for _, r := range recipes {
		t0 := time.Now()
		tr, err := buildTable(ctx, cat, r, opts.Scale)
		if err != nil {
			// Keep orphans.json true to the tables that were built.
			return rep, errors.Join(fmt.Errorf("testdata: build %s: %w", r.Name, err), recordOrphans(abs, rep.Tables))
		}
		tr.Took = time.Since(t0)
		log.Info("built testdata table",
			zap.String("table", tr.Name), zap.Int("scale", opts.Scale),
			zap.Int("data_files", tr.DataFiles), zap.Int("delete_files", tr.PositionDeleteFiles+tr.EqualityDeleteFiles),
			zap.Int("manifests", tr.Manifests), zap.Int("snapshots", tr.Snapshots),
			zap.Int64("rows", tr.Rows), zap.Int("orphans", len(tr.Orphans)), zap.Duration("took", tr.Took))
		rep.Tables = append(rep.Tables, tr)
	}
	if err := recordOrphans(abs, rep.Tables); err != nil {
		return rep, err
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// selectRecipes resolves names (empty: the defaults), rejecting unknown,
// repeated and invalid recipes.
func selectRecipes(names []string, adjust func(*Recipe)) ([]Recipe, error) {
	var out []Recipe
	if len(names) == 0 {
		out = Recipes()
	}
	seen := map[string]bool{}
	for _, n := range names {
		r, err := Lookup(n)
		if err != nil {
			return nil, fmt.Errorf("testdata: %w", err)
		}
		if seen[n] {
			return nil, fmt.Errorf("testdata: recipe %q named twice", n)
		}
		seen[n] = true
		out = append(out, r)
	}
	for i := range out {
		if adjust != nil {
			adjust(&out[i])
		}
	}
	for _, r := range out {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("testdata: %w", err)
		}
	}
	return out, nil
}

// dropTable removes ident from the catalog and deletes its files, refusing a
// location outside dir so that Replace can never delete foreign data.
func dropTable(ctx context.Context, cat catalog.Catalog, ident table.Identifier, dir string) error {
	name := strings.Join(ident, ".")
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return fmt.Errorf("testdata: load %s to replace it: %w", name, err)
	}
	path, err := localPath(tbl.Location())
	if err != nil {
		return fmt.Errorf("testdata: replace %s: %w", name, err)
	}
	if rel, err := filepath.Rel(dir, path); err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("testdata: replace %s: location %s is outside %s; not deleting it", name, path, dir)
	}
	if err := cat.DropTable(ctx, ident); err != nil {
		return fmt.Errorf("testdata: drop %s: %w", name, err)
	}
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("testdata: delete files of %s: %w", name, err)
	}
	return nil
}

// localPath turns a file:// location (or a plain path) into an OS path.
func localPath(location string) (string, error) {
	u, err := url.Parse(location)
	if err != nil {
		return "", fmt.Errorf("location %q: %w", location, err)
	}
	switch u.Scheme {
	case "file":
		return filepath.FromSlash(u.Path), nil
	case "":
		return filepath.Clean(location), nil
	default:
		return "", fmt.Errorf("location %q is not local", location)
	}
}

// tableProperties returns the properties a recipe table is created with.
func tableProperties(r Recipe) iceberg.Properties {
	props := iceberg.Properties{
		"format-version":                  strconv.Itoa(r.FormatVersion),
		table.WriteTargetFileSizeBytesKey: strconv.Itoa(DefaultTargetFileSize),
		"tms.testdata.recipe":             r.Name,
	}
	if r.PositionDeletes > 0 || r.EqualityDeletes > 0 {
		props[table.WriteDeleteModeKey] = table.WriteModeMergeOnRead
		props["write.update.mode"] = table.WriteModeMergeOnRead
		props["write.merge.mode"] = table.WriteModeMergeOnRead
	}
	return props
}

// createTable creates the namespace if needed and the recipe's empty table.
func createTable(ctx context.Context, cat catalog.Catalog, r Recipe) (*table.Table, error) {
	ns := table.Identifier{r.Namespace()}
	err := cat.CreateNamespace(ctx, ns, nil)
	if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, fmt.Errorf("create namespace %s: %w", r.Namespace(), err)
	}
	sc := Schema()
	opts := []catalog.CreateTableOpt{catalog.WithProperties(tableProperties(r))}
	if r.PartitionByDay {
		spec := iceberg.NewPartitionSpec(iceberg.PartitionField{
			SourceIDs: []int{fieldTS}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{},
		})
		opts = append(opts, catalog.WithPartitionSpec(&spec))
	}
	tbl, err := cat.CreateTable(ctx, table.Identifier{r.Namespace(), r.Table()}, sc, opts...)
	if err != nil {
		return nil, fmt.Errorf("create table: %w", err)
	}
	return tbl, nil
}

// buildTable creates r's table, runs its commits, plants its orphans and
// reports what the current snapshot holds.
func buildTable(ctx context.Context, cat catalog.Catalog, r Recipe, scale int) (TableReport, error) {
	tbl, err := createTable(ctx, cat, r)
	if err != nil {
		return TableReport{}, err
	}
	if tbl, err = appendAll(ctx, tbl, r, scale); err != nil {
		return TableReport{}, err
	}
	plan := planDeletes(r, scale)
	if tbl, err = deleteAll(ctx, tbl, plan); err != nil {
		return TableReport{}, err
	}
	tr, err := inspect(ctx, tbl)
	if err != nil {
		return TableReport{}, err
	}
	tr.Name = r.Name
	tr.DeletedRows = int64(len(plan.removed()))
	tr.Rows -= tr.DeletedRows
	if tr.Orphans, err = plantOrphans(tbl, r, scale, time.Now()); err != nil {
		return TableReport{}, err
	}
	return tr, nil
}

// inspect counts the files, partitions and rows in tbl's current snapshot by
// reading its manifests. Rows is the record count of live data files, before
// delete files are applied.
func inspect(ctx context.Context, tbl *table.Table) (TableReport, error) {
	tr := TableReport{Location: tbl.Location(), Snapshots: len(tbl.Metadata().Snapshots())}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return tr, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return tr, err
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return tr, fmt.Errorf("read manifest list: %w", err)
	}
	tr.Manifests = len(manifests)
	partitions := map[string]struct{}{}
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return tr, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
			}
			df := e.DataFile()
			switch df.ContentType() {
			case iceberg.EntryContentData:
				tr.DataFiles++
				tr.Rows += df.Count()
				partitions[partitionKey(df.Partition())] = struct{}{}
			case iceberg.EntryContentPosDeletes:
				tr.PositionDeleteFiles++
			case iceberg.EntryContentEqDeletes:
				tr.EqualityDeleteFiles++
			}
		}
	}
	tr.Partitions = len(partitions)
	return tr, nil
}

// partitionKey renders a partition tuple as a stable map key.
func partitionKey(p map[int]any) string {
	ids := make([]int, 0, len(p))
	for id := range p {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d=%v;", id, p[id])
	}
	return b.String()
}
