package testdata

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
)

func TestRecipesAreTheDefaultSetInStableOrder(t *testing.T) {
	t.Parallel()
	var names []string
	for _, r := range Recipes() {
		require.NoError(t, r.validate())
		require.False(t, r.OnlyWhenNamed, r.Name)
		require.NotEmpty(t, r.Description, r.Name)
		names = append(names, r.Name)
	}
	require.Equal(t, []string{"tms.small_files", "tms.partitioned", "tms.deletes", "tms.many_snapshots", "tms.orphans"}, names)

	bench, err := Lookup("tms.bench_10k")
	require.NoError(t, err)
	require.True(t, bench.OnlyWhenNamed)
	require.NoError(t, bench.validate())
	require.Equal(t, 10_000, bench.Appends*bench.filesPerAppend(), "data files at scale 1")
}

func TestLookupUnknownNamesItAndTheValidNames(t *testing.T) {
	t.Parallel()
	_, err := Lookup("tms.nope")
	require.ErrorIs(t, err, ErrUnknownRecipe)
	require.ErrorContains(t, err, `"tms.nope"`)
	for _, r := range all {
		require.ErrorContains(t, err, r.Name)
	}
}

func TestBuildRejectsBadOptionsBeforeTouchingTheDir(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		opts BuildOptions
		want string
	}{
		"scale zero":     {BuildOptions{Scale: 0}, "scale 0"},
		"scale negative": {BuildOptions{Scale: -3}, "scale -3"},
		"unknown recipe": {BuildOptions{Scale: 1, Recipes: []string{"tms.orphans", "tms.typo"}}, `"tms.typo"`},
		"named twice":    {BuildOptions{Scale: 1, Recipes: []string{"tms.orphans", "tms.orphans"}}, "named twice"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			_, err := Build(t.Context(), dir, tc.opts)
			require.ErrorContains(t, err, tc.want)
			require.NoFileExists(t, filepath.Join(dir, "catalog.db"))
		})
	}
}

func TestBuildRefusesAnExistingTableUnlessReplace(t *testing.T) {
	t.Parallel()
	dir := BuildT(t, "tms.orphans")
	before := load(t, dir, "tms.orphans").tbl.Metadata().TableUUID()

	_, err := Build(t.Context(), dir, BuildOptions{Scale: 1, Recipes: []string{"tms.deletes", "tms.orphans"}})
	require.ErrorContains(t, err, "table tms.orphans already exists")
	cat, err := catalogs.OpenLocal(t.Context(), dir, false)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.(io.Closer).Close() })
	exists, err := cat.CheckTableExists(t.Context(), []string{"tms", "deletes"})
	require.NoError(t, err)
	require.False(t, exists, "nothing is built when one table exists")

	rep, err := Build(t.Context(), dir, BuildOptions{Scale: 1, Recipes: []string{"tms.orphans"}, Replace: true})
	require.NoError(t, err)
	l := load(t, dir, "tms.orphans")
	require.NotEqual(t, before, l.tbl.Metadata().TableUUID(), "table was rebuilt")
	require.Len(t, l.tbl.Metadata().Snapshots(), 5, "old snapshots are gone")
	orphans, err := ReadOrphans(dir)
	require.NoError(t, err)
	tr, ok := rep.Table("tms.orphans")
	require.True(t, ok)
	require.Len(t, orphans, len(tr.Orphans), "orphans.json lists only the new orphans")
	for _, o := range orphans {
		require.FileExists(t, o.Path)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "warehouse"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "one namespace folder")
}

func TestBuildTBuildsIntoATempDir(t *testing.T) {
	t.Parallel()
	dir := BuildT(t, "tms.orphans")
	require.True(t, strings.HasPrefix(dir, os.TempDir()) || filepath.IsAbs(dir))
	require.FileExists(t, filepath.Join(dir, "catalog.db"))
	require.FileExists(t, filepath.Join(dir, OrphansFile))
	l := load(t, dir, "tms.orphans")
	require.Len(t, l.current(t).data, 5)
}
