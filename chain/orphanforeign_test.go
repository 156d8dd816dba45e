//go:build unix

package chain

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/policy"
)

// otherTableRoots maps each other table of an orphan plan to its file count.
func otherTableRoots(t *testing.T, tr TypeReport) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, o := range orphanDetail(t, tr).OtherTables {
		out[o.Root] = o.Files
	}
	return out
}

// TestOrphanCleanupLeavesTableInsideDataFolder: the history. A
// table created with a LOCATION inside another table's data/ folder, which
// is one of the folders the outer table's cleanup lists. Its metadata
// folder marks it as another table: not one of its files is deleted, it
// reads the same rows, and the outer table's planted orphans are deleted,
// under both scopes.
func TestOrphanCleanupLeavesTableInsideDataFolder(t *testing.T) {
	t.Parallel()
	for _, scope := range []string{policy.OrphanScopeTablePaths, policy.OrphanScopeLocation} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			w := newScopeWarehouse(t)
			outer := w.table(t, "outer", 3)
			outerRoot := localPath(outer.load(t).Location())
			inner := w.table(t, "inner", 3, catalog.WithLocation("file://"+filepath.Join(outerRoot, "data", "inner")))
			innerRoot := localPath(inner.load(t).Location())
			innerRows, outerRows := inner.rows(t), outer.rows(t)
			require.Len(t, innerRows, 60)

			planted := plantWriterOrphans(t, outerRoot)
			ageTree(t, outerRoot)
			innerFiles := entries(t, innerRoot)
			before := entries(t, outerRoot)

			tr := cleanWith(t, outer, `"scope": "`+scope+`"`)
			require.Equal(t, Done, tr.Outcome, tr.Err)
			require.ElementsMatch(t, planted, gone(before, entries(t, outerRoot)), "deleted exactly the planted orphans")
			require.Equal(t, innerFiles, entries(t, innerRoot), "no file of the inner table is deleted")
			require.Equal(t, innerRows, inner.rows(t), "the inner table loads with the same rows")
			require.Equal(t, outerRows, outer.rows(t))
			require.Equal(t, map[string]int{"file://" + innerRoot: len(innerFiles)}, otherTableRoots(t, tr))
			require.Contains(t, tr.Reason, "files of another table under the table's folders, left alone")
		})
	}
}

// TestOrphanCleanupLeavesLinkedTable: a folder link inside the table's
// data/ folder to another table's root. The walk follows the link, finds
// the other table's metadata folder below it and plans nothing there.
func TestOrphanCleanupLeavesLinkedTable(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	outer := w.table(t, "outer", 2)
	far := w.table(t, "far", 3)
	outerRoot, farRoot := localPath(outer.load(t).Location()), localPath(far.load(t).Location())
	link := filepath.Join(outerRoot, "data", "far")
	require.NoError(t, os.Symlink(farRoot, link))
	farRows := far.rows(t)
	planted := plantWriterOrphans(t, outerRoot)
	ageTree(t, outerRoot, farRoot)
	farFiles := entries(t, farRoot)
	before := entries(t, outerRoot)

	tr := cleanWith(t, outer, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, planted, gone(before, entries(t, outerRoot)))
	require.Equal(t, farFiles, entries(t, farRoot), "no file of the linked table is deleted")
	require.Equal(t, farRows, far.rows(t))
	requireLink(t, link)
	require.Equal(t, map[string]int{"file://" + link: len(farFiles)}, otherTableRoots(t, tr))
}

// TestOrphanCleanupTableMarks: every mark of a table's metadata folder a
// writer leaves, planted in the table's data/ folder next to a data file:
// a gzip metadata file in both spellings (another table-uuid), a
// version-hint.text alone, a metadata file in a folder not named metadata
// (a custom write.metadata.path: the folder itself is the root), and one
// that cannot be parsed. Each protects its root. A copy of the table's own
// metadata under a folder the log does not name carries this table's
// table-uuid: that folder is the table's own, and its old files are
// orphans like any other.
func TestOrphanCleanupTableMarks(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	b := w.table(t, "marks", 3)
	tbl := b.load(t)
	root := localPath(tbl.Location())
	data := filepath.Join(root, "data")
	other := `{"format-version": 2, "table-uuid": "0b7d3a3e-1111-4222-8333-444455556666", "location": "file:///elsewhere"}`
	gz := func(s string) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(s))
		require.NoError(t, zw.Close())
		return buf.Bytes()
	}
	own, err := os.ReadFile(localPath(tbl.MetadataLocation()))
	require.NoError(t, err)
	write := func(p string, b []byte) string {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	protected := map[string][]string{}
	for name, mark := range map[string][2]any{
		"gz1":    {"metadata/00003-aaaa.gz.metadata.json", gz(other)},
		"gz2":    {"metadata/00003-bbbb.metadata.json.gz", gz(other)},
		"hint":   {"metadata/version-hint.text", []byte("3")},
		"custom": {"v1.metadata.json", []byte(other)},
		"broken": {"metadata/v1.metadata.json", []byte("{not json")},
	} {
		rootDir := filepath.Join(data, name)
		protected["file://"+rootDir] = []string{
			write(filepath.Join(rootDir, mark[0].(string)), mark[1].([]byte)),
			write(filepath.Join(rootDir, "data", "00000-0-"+name+"-00001.parquet"), []byte("PAR1 theirs PAR1")),
		}
	}
	ownCopy := write(filepath.Join(data, "moved", "metadata", "00009-cccc.metadata.json"), own)
	ownOrphan := write(filepath.Join(data, "moved", "data", "00000-0-moved-00001.parquet"), []byte("PAR1 ours PAR1"))
	planted := append(plantWriterOrphans(t, root), ownCopy, ownOrphan)
	rows := b.rows(t)
	ageTree(t, root)
	before := entries(t, root)

	tr := cleanWith(t, b, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, planted, gone(before, entries(t, root)), "the table's own orphans are deleted, the other tables' files are not")
	roots := otherTableRoots(t, tr)
	require.Len(t, roots, len(protected))
	for r, files := range protected {
		require.Equal(t, len(files), roots[r], r)
		for _, f := range files {
			require.FileExists(t, f)
		}
	}
	whys := map[string]string{}
	for _, o := range orphanDetail(t, tr).OtherTables {
		whys[filepath.Base(o.Root)] = o.Why
	}
	require.Contains(t, whys["gz1"], "table-uuid 0b7d3a3e-1111-4222-8333-444455556666")
	require.Contains(t, whys["gz2"], "table-uuid 0b7d3a3e-1111-4222-8333-444455556666")
	require.Contains(t, whys["custom"], "table-uuid 0b7d3a3e")
	require.Contains(t, whys["hint"], "version-hint.text")
	require.Contains(t, whys["broken"], "cannot be read")
	require.Equal(t, rows, b.rows(t))
}

// TestOrphanCleanupSharedMetadataFolder: a metadata file of another table
// in this table's own metadata folder (what register_table on this
// table's metadata leaves once the second table commits) means a table
// shares this table's folders: the cleanup is skipped, naming the file,
// and nothing is deleted. A leftover metadata file of the table itself (a
// failed commit) is an ordinary orphan.
func TestOrphanCleanupSharedMetadataFolder(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	b := w.table(t, "shared", 3)
	tbl := b.load(t)
	root := localPath(tbl.Location())
	own, err := os.ReadFile(localPath(tbl.MetadataLocation()))
	require.NoError(t, err)
	leftover := filepath.Join(root, "metadata", "00007-7e570000-0000-4000-8000-00000000000c.metadata.json")
	require.NoError(t, os.WriteFile(leftover, own, 0o644))
	planted := append(plantWriterOrphans(t, root), leftover)
	ageTree(t, root)
	before := entries(t, root)

	tr := cleanWith(t, b, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, planted, gone(before, entries(t, root)), "a leftover of the table's own is deleted")

	twinUUID := "0b7d3a3e-1111-4222-8333-444455556666"
	twin := filepath.Join(root, "metadata", "00004-7e570000-0000-4000-8000-00000000000d.metadata.json")
	require.NoError(t, os.WriteFile(twin, []byte(strings.Replace(string(own), tbl.Metadata().TableUUID().String(), twinUUID, 1)), 0o644))
	planted = plantWriterOrphans(t, root)
	ageTree(t, root)
	before = entries(t, root)
	tr = cleanWith(t, b, "")
	require.Equal(t, Skipped, tr.Outcome, tr.Err)
	require.Contains(t, tr.Reason, "metadata file "+twin+" in this table's metadata folder belongs to another table (table-uuid "+twinUUID+")")
	require.Empty(t, gone(before, entries(t, root)), "nothing deleted")
	require.NotEmpty(t, planted)
}

// TestOrphanCleanupRegisteredTables: files of a table whose metadata lies
// elsewhere carry no metadata mark; the caller's registered tables
// (Hooks.OtherTables, the ledger's locations) protect them. A registered
// table at this table's own location skips the cleanup.
func TestOrphanCleanupRegisteredTables(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	b := w.table(t, "outer", 3)
	root := localPath(b.load(t).Location())
	theirs := []string{
		filepath.Join(root, "data", "inner", "data", "00000-0-theirs-00001.parquet"),
		filepath.Join(root, "data", "inner", "data", "00001-0-theirs-00001.parquet"),
	}
	for _, p := range theirs {
		plant(t, p)
	}
	planted := plantWriterOrphans(t, root)
	ageTree(t, root)
	before := entries(t, root)
	b.opts.Hooks.OtherTables = func(context.Context) ([]Neighbour, error) {
		return []Neighbour{
			{Name: "cat.ns.inner", Location: "file://" + filepath.Join(root, "data", "inner")},
			{Name: "cat.ns.far", Location: "file:///somewhere/else"},
		}, nil
	}
	tr := cleanWith(t, b, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, planted, gone(before, entries(t, root)))
	for _, p := range theirs {
		require.FileExists(t, p)
	}
	d := orphanDetail(t, tr)
	require.Len(t, d.OtherTables, 1)
	require.Equal(t, OtherTable{Root: "file://" + filepath.Join(root, "data", "inner"), Why: "table cat.ns.inner is registered at this location", Files: 2}, d.OtherTables[0])

	planted = plantWriterOrphans(t, root)
	ageTree(t, root)
	before = entries(t, root)
	b.opts.Hooks.OtherTables = func(context.Context) ([]Neighbour, error) {
		return []Neighbour{{Name: "cat.ns.twin", Location: "file://" + root + "/"}}, nil
	}
	tr = cleanWith(t, b, "")
	require.Equal(t, Skipped, tr.Outcome, tr.Err)
	require.Contains(t, tr.Reason, "table cat.ns.twin is registered at this table's location")
	require.Empty(t, gone(before, entries(t, root)))
	require.NotEmpty(t, planted)

	b.opts.Hooks.OtherTables = func(context.Context) ([]Neighbour, error) { return nil, errors.New("ledger down") }
	tr = cleanWith(t, b, "")
	require.Equal(t, Failed, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Err, "read the other tables: ledger down")
	require.Empty(t, gone(before, entries(t, root)))
}
