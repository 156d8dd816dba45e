package chain

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/testdata"
)

type bundle struct {
	ctx   context.Context
	dir   string
	cat   catalog.Catalog
	ident table.Identifier
	opts  Options
}

// smallFiles is the number of appends (each one data file of 1,000 rows) of
// the tms.small_files variant these tests build: a tenth of the recipe's 200,
// which keeps the package's race-detector run short while every behaviour
// (many small files in, one file out) stays the same.
const (
	smallFiles = 20
	smallRows  = smallFiles * 1_000
)

// manySnapshots is the number of appends (each one snapshot and one
// manifest) of the tms.many_snapshots variant these tests build: a third of
// the recipe's 120, for the same reason. The tests that need manifest
// rewrite to work pass a minManifestNumber below it.
const manySnapshots = 40

// setup builds recipe into a fresh directory and opens its catalog.
func setup(t *testing.T, recipe string) bundle {
	t.Helper()
	dir := testdata.BuildAdjustedT(t, func(r *testdata.Recipe) {
		switch r.Name {
		case "tms.small_files":
			r.Appends = smallFiles
		case "tms.many_snapshots":
			r.Appends = manySnapshots
		}
	}, recipe)
	cat, err := catalogs.OpenLocal(t.Context(), dir, false)
	require.NoError(t, err)
	ident, err := catalogs.ParseIdent(recipe)
	require.NoError(t, err)
	return bundle{ctx: t.Context(), dir: dir, cat: cat, ident: ident, opts: Options{Log: zaptest.NewLogger(t)}}
}

func (b bundle) load(t *testing.T) *table.Table {
	t.Helper()
	tbl, err := b.cat.LoadTable(b.ctx, b.ident)
	require.NoError(t, err)
	return tbl
}

func (b bundle) sum(t *testing.T) checksum.Result {
	t.Helper()
	r, err := checksum.Table(b.ctx, b.load(t), 0)
	require.NoError(t, err)
	return r
}

func (b bundle) run(t *testing.T, steps ...Step) Report {
	t.Helper()
	rep, err := Run(b.ctx, b.cat, b.ident, steps, b.opts)
	require.NoError(t, err)
	require.Len(t, rep.Types, len(steps))
	return rep
}

// localPath turns a file:// location into an OS path.
func localPath(loc string) string { return strings.TrimPrefix(loc, "file://") }

// diskFiles lists every file under the table location.
func diskFiles(t *testing.T, tbl *table.Table) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	root := localPath(tbl.Location())
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out["file://"+p] = true
		}
		return nil
	}))
	return out
}

// strayFiles returns files under the table location that no metadata of the
// table references under any spelling, excluding the planted orphans listed
// in the build dir.
func (b bundle) strayFiles(t *testing.T) []string {
	t.Helper()
	tbl := b.load(t)
	fsys, err := tbl.FS(b.ctx)
	require.NoError(t, err)
	raw, err := referencedFiles(t.Context(), tbl, fsys, nil)
	require.NoError(t, err)
	refs := testCanon(t, nil, nil, "").NewSet()
	for f := range raw {
		refs.Add(f)
	}
	planted := map[string]bool{}
	orphans, err := testdata.ReadOrphans(b.dir)
	require.NoError(t, err)
	for _, o := range orphans {
		planted[o.Location] = true
	}
	var stray []string
	for f := range diskFiles(t, tbl) {
		if !refs.Has(f) && !planted[f] && !strings.HasSuffix(f, ".crc") {
			stray = append(stray, f)
		}
	}
	return stray
}

// appendRows commits n rows with ids from first through a separately loaded
// table, as a concurrent writer would.
func (b bundle) appendRows(t *testing.T, first, n int) {
	t.Helper()
	tbl := b.load(t)
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	require.NoError(t, err)
	rows := make([]string, n)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"id": %d, "category": "books", "amount": %d.5, "ts": "2024-01-01T00:00:00Z", "note": null}`, first+i, i)
	}
	at, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{"[" + strings.Join(rows, ",") + "]"})
	require.NoError(t, err)
	defer at.Release()
	_, err = tbl.AppendTable(b.ctx, at, int64(n), nil)
	require.NoError(t, err)
}

// deleteRows deletes rows with id < below through a separately loaded table.
func (b bundle) deleteRows(t *testing.T, below int64) {
	t.Helper()
	_, err := b.load(t).Delete(b.ctx, iceberg.LessThan(iceberg.Reference("id"), below), nil)
	require.NoError(t, err)
}

// setProps sets table properties through a separate commit.
func (b bundle) setProps(t *testing.T, props iceberg.Properties) {
	t.Helper()
	txn := b.load(t).NewTransaction()
	require.NoError(t, txn.SetProperties(props))
	_, err := txn.Commit(b.ctx)
	require.NoError(t, err)
}

func policyJSON(s string) []byte { return []byte(s) }

func fileExists(loc string) bool {
	_, err := os.Stat(localPath(loc))
	return err == nil
}

// delete deletes the rows matching filter through a separately loaded
// table, as a concurrent writer would.
func (b bundle) delete(t *testing.T, filter iceberg.BooleanExpression) {
	t.Helper()
	_, err := b.load(t).Delete(b.ctx, filter, nil)
	require.NoError(t, err)
}
