package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/scanoracle"
	"github.com/tms-dev/tms/internal/seaweedtest"
	"github.com/tms-dev/tms/testdata"
)

// Three histories that lost data, rebuilt with iceberg-go and run through
// the real tms-runner binary. The oracle is iceberg-go's own scan in the
// test process (rows compared as a sorted multiset of canonical row
// strings), never TMS's checksum or its faithful reader, and every file the
// current snapshot references must still exist afterwards.

// dlTable is a table of a data-loss history and how the binary reaches it.
type dlTable struct {
	name  string   // NAMESPACE.TABLE for --table
	args  []string // the catalog's flags
	env   []string // the catalog's credentials, as TMS_CATALOG_PROP_*
	cat   catalog.Catalog
	ident table.Identifier
}

// dlSchema is (id long required, payload string).
func dlSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "payload", Type: iceberg.PrimitiveTypes.String})
}

// dlLocalTable creates tms.NAME in a fresh testdata-style warehouse.
func dlLocalTable(t *testing.T, name string, props iceberg.Properties) dlTable {
	t.Helper()
	dir := t.TempDir()
	cat, err := catalogs.OpenLocal(t.Context(), dir, true)
	require.NoError(t, err)
	if c, ok := cat.(io.Closer); ok {
		t.Cleanup(func() { require.NoError(t, c.Close()) })
	}
	require.NoError(t, cat.CreateNamespace(t.Context(), table.Identifier{"tms"}, nil))
	ident := table.Identifier{"tms", name}
	_, err = cat.CreateTable(t.Context(), ident, dlSchema(), catalog.WithProperties(props))
	require.NoError(t, err)
	return dlTable{name: "tms." + name, args: []string{"--warehouse-dir", dir}, cat: cat, ident: ident}
}

// dlS3Table creates NAME in a fresh namespace of the server's REST catalog.
func dlS3Table(t *testing.T, s *seaweedtest.Server, cat catalog.Catalog, name string, props iceberg.Properties) dlTable {
	t.Helper()
	ident, _ := seaweedtest.CreateTable(t, cat, name, dlSchema(), catalog.WithProperties(props))
	return dlTable{name: catalogs.IdentString(ident), args: s.CatalogArgs(), env: s.SecretEnv(), cat: cat, ident: ident}
}

func (d dlTable) load(t *testing.T) *table.Table {
	t.Helper()
	tbl, err := d.cat.LoadTable(t.Context(), d.ident)
	require.NoError(t, err, "the table loads through its catalog")
	return tbl
}

// appendIDs appends rows with ids [first, first+n) in one iceberg-go append
// (one data file) and returns the paths of the data files it added.
func (d dlTable) appendIDs(t *testing.T, first, n int) []string {
	t.Helper()
	tbl := d.load(t)
	was, _ := dlLiveFiles(t, tbl)
	rows := make([]string, n)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"id": %d, "payload": "row %d of a file that starts at %d"}`, first+i, first+i, first)
	}
	tbl, err := testdata.AppendJSON(t.Context(), tbl, rows)
	require.NoError(t, err)
	now, _ := dlLiveFiles(t, tbl)
	var added []string
	for _, df := range now {
		if !slices.ContainsFunc(was, func(o iceberg.DataFile) bool { return o.FilePath() == df.FilePath() }) {
			added = append(added, df.FilePath())
		}
	}
	return added
}

// replay runs `tms-runner replay --json` on the table with the given types
// and policy contents (type → content JSON) and a fresh sqlite ledger.
func (d dlTable) replay(t *testing.T, types string, policies map[string]string) (result, replayJSON) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"replay", "--table", d.name, "--types", types, "--ledger", "sqlite://" + filepath.Join(dir, "replay.db"), "--json"}
	for _, typ := range slices.Sorted(maps.Keys(policies)) {
		file := filepath.Join(dir, typ+".json")
		require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf(`{"type": %q, "content": %s}`, typ, policies[typ])), 0o600))
		args = append(args, "--policy", file)
	}
	r := execRunner(t, d.env, append(args, d.args...)...)
	var got replayJSON
	if strings.TrimSpace(r.stdout) != "" {
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	}
	return r, got
}

// typeOf returns the outcome of typ in a replay's output.
func typeOf(t *testing.T, r result, got replayJSON, typ string) (outcome, reason string) {
	t.Helper()
	require.NotEmpty(t, got.Types, "the replay reports its types (exit %d): %s", r.code, r.stderr)
	for _, ty := range got.Types {
		if ty.Type == typ {
			return ty.Outcome, ty.Reason
		}
	}
	t.Fatalf("the replay reports no %s: %+v", typ, got)
	return "", ""
}

// dlRows is the oracle, scanoracle.Rows: iceberg-go's scan of the current
// snapshot, each row a canonical string, sorted.
func dlRows(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	rows, err := scanoracle.Rows(t.Context(), tbl)
	require.NoError(t, err, "iceberg-go scans the table")
	return rows
}

// requireRows fails unless iceberg-go's scan of tbl reads exactly want (a
// multiset), saying how many rows came back or went missing.
func requireRows(t *testing.T, want []string, tbl *table.Table, what string) {
	t.Helper()
	if diff := scanoracle.Diff(want, dlRows(t, tbl), 3); diff != "" {
		t.Fatalf("%s: iceberg-go's scan: %s", what, diff)
	}
}

// dlLiveFiles returns the live data and delete files of tbl's current
// snapshot (scanoracle.LiveFiles), failing the test when they do not read.
func dlLiveFiles(t *testing.T, tbl *table.Table) (data, deletes []iceberg.DataFile) {
	t.Helper()
	data, deletes, err := scanoracle.LiveFiles(t.Context(), tbl)
	require.NoError(t, err)
	return data, deletes
}

func paths(files []iceberg.DataFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.FilePath()
	}
	slices.Sort(out)
	return out
}

// requireOpens fails unless every location opens through tbl's FileIO
// (scanoracle.Missing), naming what the files are.
func requireOpens(t *testing.T, tbl *table.Table, what string, locations ...string) {
	t.Helper()
	missing, err := scanoracle.Missing(t.Context(), tbl, locations...)
	require.NoError(t, err, what)
	require.Empty(t, missing, "%s: these files are gone", what)
}

// requireCurrentFilesExist fails unless every file tbl's current snapshot
// references exists (scanoracle.MissingFiles): its metadata file, manifest
// list, manifests, and the data and delete files of their live entries.
func requireCurrentFilesExist(t *testing.T, tbl *table.Table, what string) {
	t.Helper()
	require.NotNil(t, tbl.CurrentSnapshot())
	missing, err := scanoracle.MissingFiles(t.Context(), tbl, false)
	require.NoError(t, err, what)
	require.Empty(t, missing, "%s: files the current snapshot references are gone", what)
}

// History 1: compaction must not bring deleted rows back. A v2
// merge-on-read table holds one large data file and ten small ones; one
// DELETE removes 201 rows of the large file and 28 of two small ones, and
// iceberg-go writes one position-delete file naming all three. Compaction
// with the large file's size as target leaves the large file (inside the
// size band) and rewrites the ten small ones: the delete file still applies
// to the large file and must stay live, or its 201 rows come back. Then
// manifest rewrite and snapshot expiry (retain-last 1, older-than 0s) run
// on the result. On local disk and on SeaweedFS behind its REST catalog.
func TestReplayCompactionKeepsDeletedRowsDeleted(t *testing.T) {
	t.Parallel()
	props := iceberg.Properties{"format-version": "2", table.WriteDeleteModeKey: table.WriteModeMergeOnRead}
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		dlCompactionHistory(t, dlLocalTable(t, "mor", props))
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		s := seaweedtest.Start(t)
		dlCompactionHistory(t, dlS3Table(t, s, s.Catalog(t), "mor", props))
	})
}

func dlCompactionHistory(t *testing.T, d dlTable) {
	d.appendIDs(t, 0, 20_000) // the large file
	for i := range 10 {
		d.appendIDs(t, 100_000+i*100, 100)
	}
	tbl := d.load(t)
	data, _ := dlLiveFiles(t, tbl)
	require.Len(t, data, 11)
	var large int64
	for _, df := range data {
		large = max(large, df.FileSizeBytes())
	}
	between := func(lo, hi int64) iceberg.BooleanExpression {
		return iceberg.NewAnd(iceberg.GreaterThanEqual(iceberg.Reference("id"), lo), iceberg.LessThan(iceberg.Reference("id"), hi))
	}
	tbl, err := tbl.Delete(t.Context(), iceberg.NewOr(iceberg.LessThan(iceberg.Reference("id"), int64(201)),
		iceberg.NewOr(between(100_000, 100_003), between(100_500, 100_525))), nil)
	require.NoError(t, err)
	data, deletes := dlLiveFiles(t, tbl)
	require.Len(t, data, 11, "merge-on-read: no data file rewritten")
	require.Len(t, deletes, 1, "one position-delete file for the whole DELETE")
	require.Equal(t, iceberg.EntryContentPosDeletes, deletes[0].ContentType())
	posDeletes := deletes[0].FilePath()
	want := dlRows(t, tbl)
	require.Len(t, want, 20_000+1_000-201-28)

	r, got := d.replay(t, "compaction", map[string]string{
		"compaction": fmt.Sprintf(`{"minDataFileMse": 0, "rewriteOptions": {"target-file-size-bytes": %d}}`, large),
	})
	tbl = d.load(t)
	requireCurrentFilesExist(t, tbl, "after compaction")
	requireRows(t, want, tbl, "after compaction")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	outcome, reason := typeOf(t, r, got, "compaction")
	require.Equal(t, "done", outcome, reason)
	require.Contains(t, reason, "rewrote 10 files")
	data, deletes = dlLiveFiles(t, tbl)
	require.Len(t, data, 2, "the large file and the one the ten small ones became")
	require.Contains(t, paths(deletes), posDeletes, "the position-delete file still applies to the large file and stays live")

	r, got = d.replay(t, "manifest-rewrite,snapshot-expiry", map[string]string{
		"manifest-rewrite": `{"minManifestNumber": 2}`,
		"snapshot-expiry":  `{"older-than": "0s", "retain-last": 1}`,
	})
	tbl = d.load(t)
	requireCurrentFilesExist(t, tbl, "after manifest rewrite and snapshot expiry")
	requireRows(t, want, tbl, "after manifest rewrite and snapshot expiry")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	for _, typ := range []string{"manifest-rewrite", "snapshot-expiry"} {
		outcome, reason := typeOf(t, r, got, typ)
		require.Equal(t, "done", outcome, "%s: %s", typ, reason)
	}
	require.Len(t, tbl.Metadata().Snapshots(), 1)
	_, deletes = dlLiveFiles(t, tbl)
	require.Contains(t, paths(deletes), posDeletes, "the position-delete file is still live")
}

// History 2: orphan cleanup must not delete a symlinked folder. A table's
// data/ folder was moved elsewhere and replaced by a symbolic link to it;
// every file (and the link itself) is 3 h old, and an orphan was left in
// the linked folder. Orphan cleanup with older-than 1h must delete that
// orphan and nothing else: the link stays and the table reads the same.
// Local disk only: object stores have no links.
func TestReplayOrphanCleanupKeepsSymlinkedFolder(t *testing.T) {
	t.Parallel()
	d := dlLocalTable(t, "linked", iceberg.Properties{"format-version": "2"})
	for i := range 3 {
		d.appendIDs(t, i*100, 50)
	}
	tbl := d.load(t)
	want := dlRows(t, tbl)
	loc, ok := strings.CutPrefix(tbl.Location(), "file://")
	require.True(t, ok, tbl.Location())
	link := filepath.Join(loc, "data")
	moved := filepath.Join(t.TempDir(), "moved-data")
	require.NoError(t, os.Rename(link, moved))
	require.NoError(t, os.Symlink(moved, link))
	requireRows(t, want, d.load(t), "through the link")
	orphan := filepath.Join(moved, "00000-9-orphan-of-a-failed-write.parquet")
	require.NoError(t, os.WriteFile(orphan, []byte("PAR1 written by a job that died PAR1"), 0o644))

	old := time.Now().Add(-3 * time.Hour)
	for _, root := range []string{loc, moved} {
		require.NoError(t, filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Type()&os.ModeSymlink != 0 {
				return err
			}
			return os.Chtimes(p, old, old)
		}))
	}
	// os.Chtimes follows links; the link itself (which a listing that does
	// not follow it reports, with its own time) is aged with lutimes.
	tv := unix.NsecToTimeval(old.UnixNano())
	require.NoError(t, unix.Lutimes(link, []unix.Timeval{tv, tv}))
	before := treeFiles(t, loc)
	for p := range treeFiles(t, moved) {
		before[p] = true
	}
	require.True(t, before[link], "the link is a file of the tree")

	r, got := d.replay(t, "orphan-cleanup", map[string]string{"orphan-cleanup": `{"older-than": "1h"}`})
	fi, err := os.Lstat(link)
	require.NoError(t, err, "the link to the moved data folder still exists")
	require.NotZero(t, fi.Mode()&os.ModeSymlink, "data/ is still the link")
	tbl = d.load(t)
	requireCurrentFilesExist(t, tbl, "after orphan cleanup")
	requireRows(t, want, tbl, "after orphan cleanup")
	after := treeFiles(t, loc)
	for p := range treeFiles(t, moved) {
		after[p] = true
	}
	var removed []string
	for p := range before {
		if !after[p] {
			removed = append(removed, p)
		}
	}
	require.Equal(t, []string{orphan}, removed, "only the planted orphan is deleted")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	outcome, reason := typeOf(t, r, got, "orphan-cleanup")
	require.Equal(t, "done", outcome, reason)
	require.Contains(t, reason, "deleted 1 orphan files")
}

// History 3: manifest rewrite and snapshot expiry must not delete a live
// file spelled differently. A data file is appended, dropped by a
// copy-on-write DELETE of all its rows, then the very same file is added
// back with Transaction.AddFiles under another spelling: on local disk
// file:/abs/… where the writer wrote file:///abs/…, on SeaweedFS s3a://
// where it wrote s3:// (iceberg-go's S3 FileIO registers s3, s3a, s3n and
// oss, and opens s3a://BUCKET/KEY as the same object). Expiring the
// snapshots of the first spelling must not delete the file the second
// spelling names. With the default prefix-mismatch-mode the expiry fails
// naming both spellings and deletes nothing; with prefix-mismatch-mode
// ignore it expires and keeps the file.
func TestReplayExpiryKeepsRespelledLiveFile(t *testing.T) {
	t.Parallel()
	modes := []struct {
		name   string
		expiry string
	}{
		{"default", `{"older-than": "0s", "retain-last": 1}`},
		{"ignore", `{"older-than": "0s", "retain-last": 1, "rewriteOptions": {"prefix-mismatch-mode": "ignore"}}`},
	}
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				d := dlLocalTable(t, "respelled", iceberg.Properties{"format-version": "2"})
				dlRespelledHistory(t, d, m.name, m.expiry, func(p string) string {
					abs, ok := strings.CutPrefix(p, "file:///")
					require.True(t, ok, "iceberg-go writes file:/// paths: %s", p)
					return "file:/" + abs
				})
			})
		}
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		s := seaweedtest.Start(t)
		cat := s.Catalog(t)
		for _, m := range modes {
			t.Run(m.name, func(t *testing.T) {
				t.Parallel()
				d := dlS3Table(t, s, cat, "respelled", iceberg.Properties{"format-version": "2"})
				dlRespelledHistory(t, d, m.name, m.expiry, func(p string) string {
					key, ok := strings.CutPrefix(p, "s3://")
					require.True(t, ok, "iceberg-go writes s3:// paths: %s", p)
					return "s3a://" + key
				})
			})
		}
	})
}

func dlRespelledHistory(t *testing.T, d dlTable, mode, expiry string, respell func(string) string) {
	d.appendIDs(t, 0, 50) // stays throughout
	added := d.appendIDs(t, 1_000, 50)
	require.Len(t, added, 1)
	written := added[0]
	tbl, err := d.load(t).Delete(t.Context(), iceberg.GreaterThanEqual(iceberg.Reference("id"), int64(1_000)), nil)
	require.NoError(t, err)
	data, _ := dlLiveFiles(t, tbl)
	require.Len(t, data, 1, "copy-on-write: the DELETE dropped the file whole")
	require.NotEqual(t, written, data[0].FilePath())

	spelled := respell(written)
	txn := tbl.NewTransaction()
	require.NoError(t, txn.AddFiles(t.Context(), []string{spelled}, nil, false), "iceberg-go's FileIO opens %s", spelled)
	tbl, err = txn.Commit(t.Context())
	require.NoError(t, err)
	data, _ = dlLiveFiles(t, tbl)
	require.Contains(t, paths(data), spelled)
	want := dlRows(t, tbl)
	require.Len(t, want, 100)
	everything, err := scanoracle.ReferencedFiles(t.Context(), tbl, true)
	require.NoError(t, err)
	require.Contains(t, everything, written, "the expired snapshots name the file as written")

	r, got := d.replay(t, "manifest-rewrite,snapshot-expiry", map[string]string{
		"manifest-rewrite": `{"minManifestNumber": 2}`,
		"snapshot-expiry":  expiry,
	})
	tbl = d.load(t)
	requireCurrentFilesExist(t, tbl, "after manifest rewrite and snapshot expiry")
	requireRows(t, want, tbl, "after manifest rewrite and snapshot expiry")
	requireOpens(t, tbl, "the live file under the spelling it was written with", written)
	outcome, reason := typeOf(t, r, got, "manifest-rewrite")
	require.Equal(t, "done", outcome, reason)
	outcome, reason = typeOf(t, r, got, "snapshot-expiry")
	switch mode {
	case "default":
		requireOpens(t, tbl, "a failed expiry deletes nothing", everything...)
		require.Equal(t, "failed", outcome, reason)
		require.True(t, strings.Contains(reason, written) && strings.Contains(reason, spelled) ||
			strings.Contains(reason, "spelling") || strings.Contains(reason, "same object"),
			"the failure names both spellings (%s, %s): %s", written, spelled, reason)
		require.Equal(t, cli.ExitFailure, r.code, r.stderr)
	case "ignore":
		require.Equal(t, "done", outcome, reason)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Len(t, tbl.Metadata().Snapshots(), 1)
	}
}
