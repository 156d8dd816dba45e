package testdata

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
)

// BuildForeignOn builds every data recipe through the target path (catalog
// opened from properties, every file through the table's FileIO, planted
// files aged by the target's SetModTime and recorded as locations) into a
// catalog that is not a testdata folder: a SQL catalog named "elsewhere"
// here, so that no object store is needed. The table holds the same rows
// and the same planted orphans as the local build; the kept file is a
// _SUCCESS marker. cmd/tms-runner's TestForeignLayoutsOnS3 builds them on
// S3.
func TestBuildForeignOnCatalog(t *testing.T) {
	for _, r := range ForeignRecipes() {
		if r.LocalOnly {
			continue
		}
		t.Run(r.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "warehouse"), 0o755))
			props, err := catalogs.LocalProps(dir)
			require.NoError(t, err)
			var mu sync.Mutex
			var aged []string
			var agedTo time.Time
			f, err := BuildForeignOn(t.Context(), r.Name, ForeignTarget{
				CatalogName:  "elsewhere",
				CatalogProps: props,
				Namespace:    "on_target",
				SetModTime: func(when time.Time, locations ...string) error {
					mu.Lock()
					defer mu.Unlock()
					agedTo = when
					for _, loc := range locations {
						p, err := localPath(loc)
						if err != nil {
							return err
						}
						if err := os.Chtimes(p, when, when); err != nil {
							return err
						}
						aged = append(aged, loc)
					}
					return nil
				},
			})
			require.NoError(t, err)
			t.Cleanup(func() {
				for _, b := range f.Expected {
					b.Release()
				}
			})
			require.Equal(t, r.Name, f.Recipe)
			require.Equal(t, "elsewhere", f.CatalogName)
			require.Equal(t, props, f.CatalogProps)
			require.Equal(t, "on_target", f.Ident[0])
			require.Empty(t, f.Workdir)
			cat, tbl, err := f.LoadTable(t.Context())
			require.NoError(t, err)
			closeCatalog(cat)
			requireExpectedSchema(t, f, tbl)

			loc := tableLocation(tbl) + "/"
			live := liveFiles(t, tbl)
			referenced := map[string]bool{}
			for _, df := range slices.Concat(live.data, live.eqDeletes, live.posDeletes) {
				require.True(t, strings.HasPrefix(df.FilePath(), loc), "file %s is under the table location %s", df.FilePath(), loc)
				referenced[df.FilePath()] = true
			}
			require.GreaterOrEqual(t, len(f.Orphans), 2)
			require.Len(t, f.Kept, 1)
			require.Equal(t, "_SUCCESS", path.Base(f.Kept[0]), "a job commit's marker, not a .crc sidecar")
			require.ElementsMatch(t, slices.Concat(f.Orphans, f.Kept), aged, "every planted file is aged by the target")
			require.WithinDuration(t, time.Now().Add(-OrphanAge), agedTo, time.Minute)
			for _, p := range slices.Concat(f.Orphans, f.Kept) {
				require.True(t, strings.HasPrefix(p, loc), "planted file %s is a location under %s", p, loc)
				require.False(t, referenced[p], "planted file %s is referenced", p)
				file, err := localPath(p)
				require.NoError(t, err)
				require.FileExists(t, file)
			}

			// The local build: the same oracle and the same orphans.
			g := BuildForeignT(t, r.Name)
			require.Len(t, f.Expected, len(g.Expected))
			for i := range g.Expected {
				require.True(t, array.RecordEqual(g.Expected[i], f.Expected[i]), "batch %d of Expected differs from the local build's", i)
			}
			_, gtbl, err := g.LoadTable(t.Context())
			require.NoError(t, err)
			root, err := localPath(gtbl.Location())
			require.NoError(t, err)
			rel := func(prefix string, paths []string) []string {
				out := make([]string, len(paths))
				for i, p := range paths {
					out[i] = filepath.ToSlash(strings.TrimPrefix(p, prefix))
				}
				return out
			}
			require.ElementsMatch(t, rel(root+string(filepath.Separator), g.Orphans), rel(loc, f.Orphans))
		})
	}
}

// BuildForeignOn refuses what it cannot build, naming the recipe: a layout
// of local paths, an unknown recipe, a target without what it needs.
func TestBuildForeignOnRefuses(t *testing.T) {
	t.Parallel()
	target := ForeignTarget{
		CatalogName:  "lake",
		CatalogProps: iceberg.Properties{"type": "rest", "uri": "http://127.0.0.1:1"},
		Namespace:    "ns",
		SetModTime:   func(time.Time, ...string) error { return nil },
	}
	var localOnly []string
	for _, r := range ForeignRecipes() {
		if !r.LocalOnly {
			continue
		}
		localOnly = append(localOnly, r.Name)
		_, err := BuildForeignOn(t.Context(), r.Name, target)
		require.ErrorContains(t, err, r.Name+" is a layout of local paths: it is built only under a local folder (BuildForeign)")
		require.ErrorContains(t, err, `catalog "lake"`)
	}
	require.Equal(t, []string{"foreign.relative", "foreign.file-uri", "foreign.hadoop-sidecars"}, localOnly,
		"the path recipes are the local-only ones")

	_, err := BuildForeignOn(t.Context(), "foreign.nope", target)
	require.ErrorIs(t, err, ErrUnknownRecipe)

	noAge := target
	noAge.SetModTime = nil
	_, err = BuildForeignOn(t.Context(), "foreign.migrated", noAge)
	require.ErrorContains(t, err, `build foreign.migrated in catalog "lake": the target has no SetModTime`)
	noNS := target
	noNS.Namespace = ""
	_, err = BuildForeignOn(t.Context(), "foreign.evolved", noNS)
	require.ErrorContains(t, err, `build foreign.evolved in catalog "lake": the target has no namespace`)

	// A catalog that does not answer fails the build, naming the recipe
	// and the catalog.
	_, err = BuildForeignOn(t.Context(), "foreign.defaults", target)
	require.ErrorContains(t, err, `testdata: build foreign.defaults in catalog "lake"`)
}
