//go:build unix

package chain

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tms-dev/tms/internal/location"
	"github.com/tms-dev/tms/testdata"
)

// linkAge is how old every file, folder and link of a link test is made:
// older than the one-hour older-than these tests clean with.
const linkAge = 3 * time.Hour

// ageTree sets the access and modification times of every entry under the
// roots, links included (their own times, not their targets'), linkAge in
// the past.
func ageTree(t *testing.T, roots ...string) {
	t.Helper()
	old := time.Now().Add(-linkAge)
	tv := []unix.Timeval{unix.NsecToTimeval(old.UnixNano()), unix.NsecToTimeval(old.UnixNano())}
	for _, root := range roots {
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type()&fs.ModeSymlink != 0 {
				return unix.Lutimes(p, tv)
			}
			return os.Chtimes(p, old, old)
		}))
	}
}

// entries returns every non-folder entry under the roots, links included,
// without following links.
func entries(t *testing.T, roots ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, root := range roots {
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out[p] = true
			}
			return err
		}))
	}
	return out
}

// gone returns the entries of before that after lacks.
func gone(before, after map[string]bool) []string {
	var out []string
	for p := range before {
		if !after[p] {
			out = append(out, p)
		}
	}
	return out
}

// plant writes an unreferenced file with a writer-shaped name at p.
func plant(t *testing.T, p string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte("PAR1 orphan PAR1"), 0o644))
}

// cleanOlderThanHour runs orphan cleanup with older-than 1h.
func cleanOlderThanHour(t *testing.T, b bundle) TypeReport {
	t.Helper()
	return b.run(t, Step{Type: OrphanCleanup, Policy: policyJSON(`{"rewriteOptions": {"older-than": "1h"}}`)}).Types[0]
}

// TestOrphanCleanupFollowsLinkedDataFolder: the table's data/ folder is
// moved elsewhere and replaced by a symbolic link to it, the way a table's
// data is moved to another disk. Cleanup lists the linked folder under the
// link's path (the spelling the metadata uses), keeps the link and every
// referenced file, and deletes exactly the planted orphans, including the
// one inside the linked folder.
func TestOrphanCleanupFollowsLinkedDataFolder(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	before := b.sum(t)
	root := localPath(b.load(t).Location())
	link := filepath.Join(root, "data")
	moved := filepath.Join(t.TempDir(), "t-data")
	require.NoError(t, os.Rename(link, moved))
	require.NoError(t, os.Symlink(moved, link))
	orphan := filepath.Join(moved, "00099-9-7e570000-0000-4000-8000-000000000001-00001.parquet")
	plant(t, orphan)

	// Every planted orphan is old now; those planted in data/ live in the
	// moved folder.
	recipe, err := testdata.ReadOrphans(b.dir)
	require.NoError(t, err)
	require.NotEmpty(t, recipe)
	want := []string{orphan}
	for _, o := range recipe {
		if rel, ok := strings.CutPrefix(o.Path, link+"/"); ok {
			want = append(want, filepath.Join(moved, rel))
		} else {
			want = append(want, o.Path)
		}
	}
	ageTree(t, root, moved)
	files := entries(t, root, moved)

	tr := cleanOlderThanHour(t, b)
	fi, err := os.Lstat(link)
	require.NoError(t, err, "the link to the data folder is kept (%s)", tr.Reason)
	require.NotZero(t, fi.Mode()&fs.ModeSymlink, "data/ is still the link")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, want, gone(files, entries(t, root, moved)), "deleted exactly the planted orphans")
	var planned []string
	for _, f := range tr.Detail.(*OrphanPlan).Files {
		planned = append(planned, f.Path)
	}
	require.Contains(t, planned, "file://"+filepath.Join(link, filepath.Base(orphan)), "listed under the link's path")
	require.Equal(t, before, b.sum(t), "the table reads the same rows")
}

// recipeOrphans returns the OS paths of the orphans the recipe planted.
func recipeOrphans(t *testing.T, b bundle) []string {
	t.Helper()
	recipe, err := testdata.ReadOrphans(b.dir)
	require.NoError(t, err)
	require.NotEmpty(t, recipe)
	var out []string
	for _, o := range recipe {
		out = append(out, o.Path)
	}
	return out
}

// skippedLinks maps every path the detail names as a skipped link to the
// reason given.
func skippedLinks(t *testing.T, tr TypeReport) map[string]string {
	t.Helper()
	d := tr.Detail.(*OrphanPlan)
	require.NotNil(t, d.SkippedLinks, "the detail names the skipped links")
	out := map[string]string{}
	for _, e := range d.SkippedLinks.Examples {
		out[e.Path] = e.Reason
	}
	require.Len(t, out, d.SkippedLinks.Count, "every skipped link is named")
	return out
}

// requireLink asserts that p is still a symbolic link.
func requireLink(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err, "link %s is kept", p)
	require.NotZero(t, fi.Mode()&fs.ModeSymlink, "%s is still a link", p)
}

// TestOrphanCleanupLinkCycles: links under data/ that point back at the
// table location, at data/ itself, at the warehouse folder above the table
// (where another table's folder holds an old file), at a partition folder,
// and two links to one folder outside the table. The cleanup terminates,
// follows no link to a folder containing it or the table, lists every
// other folder once (the partition folder under its own path, the outside
// folder under the first link), deletes exactly the planted orphans and
// keeps every link and the other table's file, naming each skipped link in
// the detail. A hidden link to a folder is not followed, as a hidden
// folder is not.
func TestOrphanCleanupLinkCycles(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	before := b.sum(t)
	root := localPath(b.load(t).Location())
	data := filepath.Join(root, "data")
	var part string
	ents, err := os.ReadDir(data)
	require.NoError(t, err)
	for _, e := range ents {
		if e.IsDir() {
			part = e.Name()
			break
		}
	}
	require.NotEmpty(t, part, "the recipe has a partition folder")

	shared := filepath.Join(t.TempDir(), "shared")
	sharedOrphan := filepath.Join(shared, "00097-9-7e570000-0000-4000-8000-000000000002-00001.parquet")
	plant(t, sharedOrphan)
	staged := filepath.Join(t.TempDir(), "staged")
	stagedFile := filepath.Join(staged, "00096-9-7e570000-0000-4000-8000-000000000003-00001.parquet")
	plant(t, stagedFile)
	dataOrphan := filepath.Join(data, "00098-9-7e570000-0000-4000-8000-000000000004-00001.parquet")
	plant(t, dataOrphan)
	warehouse := filepath.Dir(filepath.Dir(root))
	otherTable := filepath.Join(warehouse, "other.db", "t", "data", "00000-0-7e570000-0000-4000-8000-000000000005-00001.parquet")
	plant(t, otherTable)

	links := map[string]string{
		filepath.Join(data, "warehouse"): warehouse,
		filepath.Join(data, "loop"):      root,
		filepath.Join(data, part, "up"):  "../..",
		filepath.Join(data, "self"):      ".",
		filepath.Join(data, "a-alias"):   part,
		filepath.Join(data, "shared-a"):  shared,
		filepath.Join(data, "shared-b"):  shared,
		filepath.Join(data, "_staged"):   staged,
	}
	for l, target := range links {
		require.NoError(t, os.Symlink(target, l))
	}
	ageTree(t, root, shared, staged, filepath.Dir(otherTable))
	files := entries(t, root, shared, staged)

	tr := cleanOlderThanHour(t, b)
	require.Equal(t, Done, tr.Outcome, tr.Err)
	for l := range links {
		requireLink(t, l)
	}
	require.FileExists(t, stagedFile, "nothing below a hidden link is listed")
	require.FileExists(t, otherTable, "the link to the warehouse is not followed")
	require.ElementsMatch(t, append(recipeOrphans(t, b), dataOrphan, sharedOrphan), gone(files, entries(t, root, shared, staged)),
		"deleted exactly the planted orphans")
	var planned []string
	for _, f := range tr.Detail.(*OrphanPlan).Files {
		planned = append(planned, f.Path)
	}
	require.Contains(t, planned, "file://"+filepath.Join(data, "shared-a", filepath.Base(sharedOrphan)), "listed under the first link")

	skipped := skippedLinks(t, tr)
	listedAs := func(p string) string { return linkListedAs + p }
	require.Equal(t, map[string]string{
		"file://" + filepath.Join(data, "warehouse"): linkCycle,
		"file://" + filepath.Join(data, "loop"):      linkCycle,
		"file://" + filepath.Join(data, part, "up"):  linkCycle,
		"file://" + filepath.Join(data, "self"):      linkCycle,
		"file://" + filepath.Join(data, "a-alias"):   listedAs(filepath.Join(data, part)),
		"file://" + filepath.Join(data, "shared-b"):  listedAs(filepath.Join(data, "shared-a")),
	}, skipped)
	require.Contains(t, tr.Reason, "deleted 14 orphan files")
	require.Contains(t, tr.Reason, "6 symbolic links skipped, none deleted")
	require.Equal(t, before, b.sum(t), "the table reads the same rows")
}

// TestOrphanCleanupKeepsFileLinks: a link to a file outside the table, a
// link to a referenced data file, a referenced data file that is itself a
// link (the table reads it through the link; the file it points at lives in
// data/store/ under a path no metadata names), a dangling link and a link
// loop. No link is deleted, every one is named in the detail, every target
// survives, the table reads the same rows, and exactly the planted orphans
// are deleted.
func TestOrphanCleanupKeepsFileLinks(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	before := b.sum(t)
	tbl := b.load(t)
	root := localPath(tbl.Location())
	data := filepath.Join(root, "data")
	tasks, err := tbl.Scan().PlanFiles(b.ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(tasks), 2)
	readThrough := localPath(tasks[0].File.FilePath())
	aliased := localPath(tasks[1].File.FilePath())

	outside := filepath.Join(t.TempDir(), "outside.parquet")
	plant(t, outside)
	stored := filepath.Join(data, "store", filepath.Base(readThrough))
	require.NoError(t, os.MkdirAll(filepath.Dir(stored), 0o755))
	require.NoError(t, os.Rename(readThrough, stored))
	dataOrphan := filepath.Join(data, "00098-9-7e570000-0000-4000-8000-000000000004-00001.parquet")
	plant(t, dataOrphan)

	links := map[string]string{
		filepath.Join(data, "outside.parquet"):  outside,
		filepath.Join(data, "alias.parquet"):    aliased,
		readThrough:                             stored,
		filepath.Join(data, "dangling.parquet"): filepath.Join(data, "nope.parquet"),
		filepath.Join(data, "loop-1"):           "loop-2",
		filepath.Join(data, "loop-2"):           "loop-1",
	}
	for l, target := range links {
		require.NoError(t, os.Symlink(target, l))
	}
	ageTree(t, root, filepath.Dir(outside))
	files := entries(t, root, filepath.Dir(outside))

	tr := cleanOlderThanHour(t, b)
	require.Equal(t, Done, tr.Outcome, tr.Err)
	for l := range links {
		requireLink(t, l)
	}
	for _, target := range []string{outside, aliased, stored} {
		require.FileExists(t, target)
	}
	require.ElementsMatch(t, append(recipeOrphans(t, b), dataOrphan), gone(files, entries(t, root, filepath.Dir(outside))),
		"deleted exactly the planted orphans")
	require.Equal(t, map[string]string{
		"file://" + filepath.Join(data, "outside.parquet"):  linkToFile,
		"file://" + filepath.Join(data, "alias.parquet"):    linkToFile,
		"file://" + readThrough:                             linkToFile,
		"file://" + filepath.Join(data, "dangling.parquet"): linkDangling,
		"file://" + filepath.Join(data, "loop-1"):           linkLoop,
		"file://" + filepath.Join(data, "loop-2"):           linkLoop,
	}, skippedLinks(t, tr))
	require.Equal(t, filepath.Join(data, "nope.parquet"), func() string {
		for _, e := range tr.Detail.(*OrphanPlan).SkippedLinks.Examples {
			if e.Reason == linkDangling {
				return e.Target
			}
		}
		return ""
	}(), "the detail says what a link points at")
	require.Contains(t, tr.Reason, "6 symbolic links skipped, none deleted")
	require.Equal(t, before, b.sum(t), "the table reads the same rows, one file through its link")
}

// TestOrphanCleanupLinkedLocation: the table location itself is a link to
// the folder that holds the table. Cleanup lists through it and deletes
// exactly the planted orphans.
func TestOrphanCleanupLinkedLocation(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	before := b.sum(t)
	root := localPath(b.load(t).Location())
	moved := filepath.Join(t.TempDir(), "t")
	require.NoError(t, os.Rename(root, moved))
	require.NoError(t, os.Symlink(moved, root))
	ageTree(t, root, moved)
	files := entries(t, moved)
	var want []string
	for _, o := range recipeOrphans(t, b) {
		want = append(want, filepath.Join(moved, strings.TrimPrefix(o, root+"/")))
	}

	tr := cleanOlderThanHour(t, b)
	require.Equal(t, Done, tr.Outcome, tr.Err)
	requireLink(t, root)
	require.ElementsMatch(t, want, gone(files, entries(t, moved)))
	require.Nil(t, tr.Detail.(*OrphanPlan).SkippedLinks)
	require.Equal(t, before, b.sum(t))
}

// TestOrphanCleanupRefusesLinkAtDeletion: a planned orphan replaced by a
// link between planning and deletion (in the BeforeCommit hook, which runs
// right before deletion) is not deleted: the last check before Remove
// sees the link, skips it and names it; the other orphans are deleted.
func TestOrphanCleanupRefusesLinkAtDeletion(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	root := localPath(b.load(t).Location())
	swapped := filepath.Join(root, "data", "00098-9-7e570000-0000-4000-8000-000000000004-00001.parquet")
	plant(t, swapped)
	target := filepath.Join(t.TempDir(), "target.parquet")
	plant(t, target)
	ageTree(t, root)
	b.opts.Hooks.BeforeCommit = func(context.Context, Type) error {
		if err := os.Remove(swapped); err != nil {
			return err
		}
		return os.Symlink(target, swapped)
	}

	tr := cleanOlderThanHour(t, b)
	require.Equal(t, Done, tr.Outcome, tr.Err)
	requireLink(t, swapped)
	require.FileExists(t, target)
	orphans := recipeOrphans(t, b)
	for _, o := range orphans {
		require.NoFileExists(t, o)
	}
	d := tr.Detail.(*OrphanPlan)
	require.Len(t, d.Files, len(orphans), "the detail lists what was deleted")
	require.NotContains(t, d.Files, OrphanFile{Path: "file://" + swapped})
	require.Equal(t, map[string]string{"file://" + swapped: linkBecameLink}, skippedLinks(t, tr))
	require.Contains(t, tr.Reason, "deleted 12 orphan files")
}

// TestOrphanLinkSpellings: a folder two links point at is listed once,
// under the first link; a file in it that the metadata names through the
// second link, or by its real path, is referenced, not an orphan, and a
// file it names through neither is one.
func TestOrphanLinkSpellings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	loc, real := filepath.Join(dir, "t"), filepath.Join(dir, "real")
	for _, f := range []string{"a.parquet", "b.parquet", "c.parquet"} {
		plant(t, filepath.Join(real, "sub", f))
	}
	require.NoError(t, os.MkdirAll(loc, 0o755))
	require.NoError(t, os.Symlink(real, filepath.Join(loc, "la")))
	require.NoError(t, os.Symlink(real, filepath.Join(loc, "lb")))

	links := &linkLog{}
	var listed []plannedOrphan
	c, err := location.New(location.Options{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, listFiles(t.Context(), recordingIO{IO: iceio.LocalFS{}, rec: &recorder{}}, "file://"+loc, func(string) bool { return false }, links,
		func(p string, _ int64, _ time.Time) {
			listed = append(listed, plannedOrphan{path: p, canon: c.Canon(p)})
		}))
	var paths []string
	for _, f := range listed {
		paths = append(paths, f.path)
	}
	require.ElementsMatch(t, []string{
		filepath.Join(loc, "la", "sub", "a.parquet"), filepath.Join(loc, "la", "sub", "b.parquet"), filepath.Join(loc, "la", "sub", "c.parquet"),
	}, paths, "listed once, under the first link")
	require.Equal(t, 1, links.count)
	require.Equal(t, linkListedAs+filepath.Join(loc, "la"), links.examples[0].Reason)

	refs := &orphanRefs{full: map[string]string{}, byKey: map[string]string{}, base: map[string]string{}, logged: map[string]string{}}
	refs.add(c, "file://"+filepath.Join(loc, "lb", "sub", "a.parquet"))
	refs.add(c, filepath.Join(real, "sub", "b.parquet"))
	kept := links.keepLinked(listed, refs, c)
	require.Len(t, kept, 1)
	require.Equal(t, filepath.Join(loc, "la", "sub", "c.parquet"), kept[0].path)
}
