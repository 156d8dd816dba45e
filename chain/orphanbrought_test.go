//go:build unix

package chain

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/sampler"
)

// TestOrphanCleanupKeepsFilesOtherTablesReference: table brought adds,
// with add_files, a file that lies in table outer's data folder. Outer's
// orphan cleanup keeps it (brought's references, read through the
// neighbour's Load), and keeps the whole folder when brought cannot be
// loaded; outer's own orphans go both times, and brought reads the same
// rows by iceberg-go's scan.
func TestOrphanCleanupKeepsFilesOtherTablesReference(t *testing.T) {
	t.Parallel()
	w := newScopeWarehouse(t)
	outer := w.table(t, "outer", 3)
	other := w.table(t, "brought", 1)
	root := localPath(outer.load(t).Location())

	imported := filepath.Join(root, "data", "imported", "part-00000-export.parquet")
	body, err := os.ReadFile(localPath(currentFiles(t, other.load(t))[0]))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(imported), 0o755))
	require.NoError(t, os.WriteFile(imported, body, 0o644))
	txn := other.load(t).NewTransaction()
	require.NoError(t, txn.AddFiles(t.Context(), []string{"file://" + imported}, nil, false))
	_, err = txn.Commit(t.Context())
	require.NoError(t, err)
	rows := other.rows(t)
	require.Len(t, rows, 40, "its own file and the added copy")

	res, err := sampler.Sample(t.Context(), other.load(t), 0, sampler.Options{})
	require.NoError(t, err)
	folder := "file://" + filepath.Dir(imported)
	require.Equal(t, []string{folder}, res.OutsideFolders)
	var loadErr error
	outer.opts.Hooks.OtherTables = func(context.Context) ([]Neighbour, error) {
		return []Neighbour{{
			Name: "cat.ns.brought", Location: other.load(t).Location(), Folders: res.OutsideFolders,
			Load: func(ctx context.Context) (*table.Table, error) {
				if loadErr != nil {
					return nil, loadErr
				}
				return w.cat.LoadTable(ctx, other.ident)
			},
		}}, nil
	}

	// Without the neighbour's folders the added file is an orphan of
	// outer: what this test guards against.
	ageTree(t, root)
	bare := outer
	bare.opts.DryRun = true
	bare.opts.Hooks.OtherTables = nil
	d := orphanDetail(t, cleanWith(t, bare, ""))
	require.Contains(t, d.Files, OrphanFile{Path: "file://" + imported, SizeBytes: int64(len(body))})

	planted := plantWriterOrphans(t, root)
	ageTree(t, root)
	before := entries(t, root)
	tr := cleanWith(t, outer, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, planted, gone(before, entries(t, root)))
	require.FileExists(t, imported)
	require.Contains(t, tr.Reason, "1 files other tables reference, left alone")
	d = orphanDetail(t, tr)
	require.Equal(t, []OtherReference{{Table: "cat.ns.brought", Folders: []string{folder}, Files: 1}}, d.ReferencedByOtherTables)
	other.requireRows(t, rows)

	// brought cannot be loaded: nothing under its folder is planned, not
	// even a file it does not reference.
	stray := filepath.Join(root, "data", "imported", "part-00001-export.parquet")
	plant(t, stray)
	planted = plantWriterOrphans(t, root)
	ageTree(t, root)
	before = entries(t, root)
	loadErr = errors.New("catalog down")
	tr = cleanWith(t, outer, "")
	require.Equal(t, Done, tr.Outcome, tr.Err)
	require.ElementsMatch(t, planted, gone(before, entries(t, root)))
	require.FileExists(t, imported)
	require.FileExists(t, stray)
	d = orphanDetail(t, tr)
	require.Empty(t, d.ReferencedByOtherTables)
	require.Equal(t, []OtherTable{{Root: folder, Why: "table cat.ns.brought references files here and could not be read: catalog down", Files: 2}}, d.OtherTables)
	other.requireRows(t, rows)
}
