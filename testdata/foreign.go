package testdata

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/catalogs"
)

// Foreign recipes are tables laid out the way other engines leave them:
// Spark's migrate/add_files (identity-partition columns only in the
// partition tuple), files without field ids read through a name mapping,
// hadoop-catalog tables with relative or file: locations, Hadoop sidecar
// files, evolved schemas and specs, format v3 initial defaults, equality
// deletes that apply across partitions. They are built with real writes
// (arrow-go parquet files, iceberg-go commits), never by hand-editing
// metadata unless a recipe says so and why.
//
// Unlike Recipe they are not declarative: each has its own builder. Build
// them with BuildForeign (or BuildForeignT in tests) under a local folder,
// or the data layouts (every recipe but the LocalOnly path layouts) with
// BuildForeignOn in a catalog on object storage; they are not part of
// Build, `tms-runner testdata` or the demo.

// ForeignRecipe is one foreign-layout table.
type ForeignRecipe struct {
	// Name is "foreign.<layout>", e.g. "foreign.migrated".
	Name string
	// Description says in one sentence what the layout is and which engine
	// leaves it.
	Description string
	// LocalOnly marks a recipe about local path forms (relative and file:
	// locations, Hadoop sidecars on a local file system): it is built only
	// under a local folder (BuildForeign); BuildForeignOn refuses it.
	LocalOnly bool
	// build materialises the table in env and reports it.
	build func(ctx context.Context, env foreignEnv) (ForeignTable, error)
}

// ForeignTable is a built foreign-layout table: how to reach it and what a
// test must find in it.
type ForeignTable struct {
	// Recipe is the recipe name.
	Recipe string
	// CatalogName and CatalogProps open the catalog holding the table
	// (catalogs.Open); use Open.
	CatalogName  string
	CatalogProps iceberg.Properties
	// Workdir, when set, is the directory the catalog's relative paths are
	// resolved from: a test must run with it as the working directory
	// (t.Chdir) while it opens and uses the catalog.
	Workdir string
	// Ident is the table identifier.
	Ident table.Identifier
	// Expected holds the table's live rows as the Iceberg spec says a
	// reader returns them, in the current schema (Iceberg field ids in the
	// Arrow field metadata, as table.SchemaToArrowSchema writes them),
	// produced by the builder from the rows it wrote, not read back from the
	// table: the oracle a faithful reader must match. Rows are in no
	// particular order. The batches are owned by the ForeignTable; callers
	// must not release them.
	Expected []arrow.RecordBatch
	// Orphans are files planted under the table location with an mtime
	// OrphanAge in the past that no metadata references: exactly what
	// orphan cleanup older than 72 h must delete. A local build
	// (BuildForeign) records them as absolute OS paths; a build on a
	// ForeignTarget (BuildForeignOn) as locations (s3://bucket/key), as the
	// table's FileIO spells them.
	Orphans []string
	// Kept are files under the table location that orphan cleanup must
	// never delete although no metadata references them, e.g. hidden files
	// (.crc sidecars, _SUCCESS, _temporary/…), all with an mtime OrphanAge
	// in the past. Absolute OS paths or locations, as for Orphans.
	Kept []string
}

// Open opens the catalog of f. Callers of a table with a Workdir must have
// changed into it first.
func (f ForeignTable) Open(ctx context.Context) (catalog.Catalog, error) {
	return catalogs.Open(ctx, f.CatalogName, f.CatalogProps)
}

// LoadTable opens the catalog of f and loads its table.
func (f ForeignTable) LoadTable(ctx context.Context) (catalog.Catalog, *table.Table, error) {
	cat, err := f.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	tbl, err := catalogs.LoadTable(ctx, cat, f.Ident)
	return cat, tbl, err
}

// foreignRecipes is every foreign recipe, data layouts first.
func foreignRecipes() []ForeignRecipe {
	return slices.Concat(foreignDataRecipes, foreignPathRecipes)
}

// ForeignRecipes returns every foreign-layout recipe.
func ForeignRecipes() []ForeignRecipe { return foreignRecipes() }

// ForeignNames returns the names of every foreign-layout recipe.
func ForeignNames() []string {
	var out []string
	for _, r := range foreignRecipes() {
		out = append(out, r.Name)
	}
	return out
}

// foreignRecipe returns the foreign recipe name.
func foreignRecipe(name string) (ForeignRecipe, error) {
	i := slices.IndexFunc(foreignRecipes(), func(r ForeignRecipe) bool { return r.Name == name })
	if i < 0 {
		return ForeignRecipe{}, fmt.Errorf("%w %q (want one of %s)", ErrUnknownRecipe, name, strings.Join(ForeignNames(), ", "))
	}
	return foreignRecipes()[i], nil
}

// BuildForeign builds the foreign recipe name under dir, which must not
// exist or be empty. dir is made absolute.
func BuildForeign(ctx context.Context, dir, name string) (ForeignTable, error) {
	r, err := foreignRecipe(name)
	if err != nil {
		return ForeignTable{}, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ForeignTable{}, fmt.Errorf("testdata: %w", err)
	}
	if entries, err := os.ReadDir(abs); err == nil && len(entries) > 0 {
		return ForeignTable{}, fmt.Errorf("testdata: build dir %s is not empty", abs)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return ForeignTable{}, fmt.Errorf("testdata: %w", err)
	}
	f, err := r.build(ctx, foreignEnv{dir: abs})
	if err != nil {
		return ForeignTable{}, fmt.Errorf("testdata: build %s: %w", name, err)
	}
	f.Recipe = name
	return f, nil
}

// ForeignTarget is a catalog a foreign data recipe is built in by
// BuildForeignOn instead of a fresh local folder: typically a REST catalog
// whose tables live on object storage.
type ForeignTarget struct {
	// CatalogName and CatalogProps open the catalog (catalogs.Open). The
	// built ForeignTable carries them as given, secrets included.
	CatalogName  string
	CatalogProps iceberg.Properties
	// Namespace holds the table; it is created if it does not exist. Each
	// recipe's table name is fixed, so give every build a fresh namespace.
	Namespace string
	// SetModTime sets the modification time of the files at locations. The
	// builder ages the orphans and kept files it plants with it, as
	// os.Chtimes does locally: an object store's write API cannot backdate
	// an object, so only the store (e.g. SeaweedFS's filer) can.
	SetModTime func(when time.Time, locations ...string) error
}

// BuildForeignOn builds the foreign recipe name in target's catalog, in
// target.Namespace: the same table, rows, oracle and planted orphans as
// BuildForeign. Every file the builder writes goes through the table's
// FileIO at the table location (so the catalog's FileIO properties, e.g.
// s3.*, must reach the store), ForeignTable.Orphans and Kept are locations,
// and the kept hidden file is the _SUCCESS marker of a job commit rather
// than a Hadoop .crc sidecar, which object stores never hold and table
// buckets refuse. It refuses a LocalOnly recipe.
func BuildForeignOn(ctx context.Context, name string, target ForeignTarget) (ForeignTable, error) {
	r, err := foreignRecipe(name)
	if err != nil {
		return ForeignTable{}, err
	}
	if r.LocalOnly {
		return ForeignTable{}, fmt.Errorf("testdata: %s is a layout of local paths: it is built only under a local folder (BuildForeign), not in catalog %q",
			name, target.CatalogName)
	}
	switch {
	case target.CatalogName == "":
		return ForeignTable{}, fmt.Errorf("testdata: build %s: the target has no catalog name", name)
	case target.Namespace == "":
		return ForeignTable{}, fmt.Errorf("testdata: build %s in catalog %q: the target has no namespace", name, target.CatalogName)
	case target.SetModTime == nil:
		return ForeignTable{}, fmt.Errorf("testdata: build %s in catalog %q: the target has no SetModTime to age the planted files with", name, target.CatalogName)
	}
	f, err := r.build(ctx, foreignEnv{target: &target})
	if err != nil {
		return ForeignTable{}, fmt.Errorf("testdata: build %s in catalog %q: %w", name, target.CatalogName, err)
	}
	f.Recipe = name
	return f, nil
}

// BuildForeignT builds the foreign recipe name into a fresh t.TempDir(); a
// build error fails the test at once. For a table with a Workdir it also
// changes the test's working directory there (t.Chdir).
func BuildForeignT(t testing.TB, name string) ForeignTable {
	t.Helper()
	f, err := BuildForeign(t.Context(), t.TempDir(), name)
	if err != nil {
		t.Fatalf("testdata.BuildForeignT(%s): %v", name, err)
	}
	if f.Workdir != "" {
		t.Chdir(f.Workdir)
	}
	t.Cleanup(func() {
		for _, b := range f.Expected {
			b.Release()
		}
	})
	return f
}
