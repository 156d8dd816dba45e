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

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/seaweedtest"
)

// Orphan cleanup among neighbours, through the real binary: the layouts of
// a warehouse where a table's location is not the table's own. Each
// scenario plants the orphans a failed writer leaves in the table under
// cleanup, ages every file of every table involved past the cutoff, and
// runs `tms-runner replay --types orphan-cleanup` (older-than 1h). The
// table's own orphans are deleted, and nothing else: every neighbour loads
// and reads the same rows by iceberg-go's own scan (scanoracle), every file
// its current snapshot references still exists. On local disk and on S3
// (SeaweedFS, a SQL catalog over an ordinary bucket: a table bucket
// refuses to hold a table inside another's folders).

// nbWorld is a catalog the scenarios create tables in, and how the test
// reaches its files without TMS.
type nbWorld struct {
	cat       catalog.Catalog
	args, env []string
	// warehouse is the catalog's warehouse location; rootLoc a location at
	// the root of a store (the warehouse locally, a bucket's root on S3).
	warehouse, rootLoc string
	// list returns the files under a location, spelled as locations.
	list func(t *testing.T, loc string) []string
	put  func(t *testing.T, loc string, data []byte)
	// age sets the modification time of every file under the locations
	// three hours back.
	age func(t *testing.T, locs ...string)
}

func nbLocalWorld(t *testing.T) nbWorld {
	dir := t.TempDir()
	cat, err := catalogs.OpenLocal(t.Context(), dir, true)
	require.NoError(t, err)
	if c, ok := cat.(io.Closer); ok {
		t.Cleanup(func() { require.NoError(t, c.Close()) })
	}
	props, err := catalogs.LocalProps(dir)
	require.NoError(t, err)
	osPath := func(loc string) string { return strings.TrimPrefix(loc, "file://") }
	return nbWorld{
		cat: cat, args: []string{"--warehouse-dir", dir}, warehouse: props["warehouse"], rootLoc: props["warehouse"],
		list: func(t *testing.T, loc string) []string {
			var out []string
			for p := range treeFiles(t, osPath(loc)) {
				out = append(out, "file://"+p)
			}
			slices.Sort(out)
			return out
		},
		put: func(t *testing.T, loc string, data []byte) {
			require.NoError(t, os.MkdirAll(filepath.Dir(osPath(loc)), 0o755))
			require.NoError(t, os.WriteFile(osPath(loc), data, 0o644))
		},
		age: func(t *testing.T, locs ...string) {
			old := time.Now().Add(-3 * time.Hour)
			for _, l := range locs {
				for p := range treeFiles(t, osPath(l)) {
					require.NoError(t, os.Chtimes(p, old, old))
				}
			}
		},
	}
}

func nbS3World(t *testing.T) nbWorld {
	s := seaweedtest.Start(t)
	warehouse := s.PlainBucket(t, "plain") + "/warehouse"
	cat, props := s.SQLCatalog(t, t.TempDir(), warehouse)
	if c, ok := cat.(io.Closer); ok {
		t.Cleanup(func() { require.NoError(t, c.Close()) })
	}
	w := nbWorld{cat: cat, args: []string{"--catalog-name", "sql-on-s3"}, warehouse: warehouse, rootLoc: s.PlainBucket(t, "root")}
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if k == "s3.access-key-id" || k == "s3.secret-access-key" {
			w.env = append(w.env, "TMS_CATALOG_PROP_"+k+"="+props[k])
			continue
		}
		w.args = append(w.args, "--catalog-prop", k+"="+props[k])
	}
	w.list = func(t *testing.T, loc string) []string { return s.List(t, loc) }
	w.put = func(t *testing.T, loc string, data []byte) { s.Put(t, loc, data) }
	w.age = func(t *testing.T, locs ...string) {
		var all []string
		for _, l := range locs {
			all = append(all, s.List(t, l)...)
		}
		s.SetModTime(t, time.Now().Add(-3*time.Hour), all...)
	}
	return w
}

// create creates ns.NAME, at loc unless it is "", with props and three
// appended data files.
func (w nbWorld) create(t *testing.T, name, loc string, props iceberg.Properties) dlTable {
	t.Helper()
	ident := table.Identifier{"ns", name}
	opts := []catalog.CreateTableOpt{catalog.WithProperties(props)}
	if loc != "" {
		opts = append(opts, catalog.WithLocation(loc))
	}
	_, err := w.cat.CreateTable(t.Context(), ident, dlSchema(), opts...)
	require.NoError(t, err)
	d := dlTable{name: "ns." + name, args: w.args, env: w.env, cat: w.cat, ident: ident}
	for i := range 3 {
		d.appendIDs(t, i*100, 20)
	}
	return d
}

// plant writes a file a failed writer leaves, named as writers name them.
func (w nbWorld) plant(t *testing.T, folder string, n int, manifest bool) string {
	t.Helper()
	name := fmt.Sprintf("00099-9-7e570000-0000-4000-8000-%012d-00001.parquet", n)
	if manifest {
		name = fmt.Sprintf("7e570000-0000-4000-8000-%012d-m0.avro", n)
	}
	loc := strings.TrimSuffix(folder, "/") + "/" + name
	w.put(t, loc, []byte("PAR1 written by a job that died PAR1"))
	return loc
}

// nbOrphanPlan is the part of an orphan-cleanup detail the scenarios read.
type nbOrphanPlan struct {
	OtherTables []struct {
		Root  string `json:"root"`
		Files int    `json:"files"`
	} `json:"other_tables"`
	OutsideTablePaths       *int `json:"outside_table_paths"`
	ReferencedByOtherTables []struct {
		Table   string   `json:"table"`
		Folders []string `json:"folders"`
		Files   int      `json:"files"`
	} `json:"referenced_by_other_tables"`
	Files []struct {
		Path string `json:"path"`
	} `json:"files"`
}

// clean runs orphan cleanup of d on a fresh ledger and returns what it
// removed under the watched locations, the outcome, the reason and the plan.
func (w nbWorld) clean(t *testing.T, d dlTable, watched ...string) (removed []string, outcome, reason string, plan nbOrphanPlan) {
	t.Helper()
	return w.cleanIn(t, d, "", false, watched...)
}

// cleanIn is clean on the ledger at path ("": a fresh one), or a dry run
// with dryRun.
func (w nbWorld) cleanIn(t *testing.T, d dlTable, ledger string, dryRun bool, watched ...string) (removed []string, outcome, reason string, plan nbOrphanPlan) {
	t.Helper()
	before := map[string]bool{}
	for _, l := range watched {
		for _, p := range w.list(t, l) {
			before[p] = true
		}
	}
	dir := t.TempDir()
	if ledger == "" {
		ledger = filepath.Join(dir, "replay.db")
	}
	file := filepath.Join(dir, "orphan-cleanup.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"type": "orphan-cleanup", "content": {"older-than": "1h"}}`), 0o600))
	args := []string{"replay", "--table", d.name, "--types", "orphan-cleanup", "--ledger", "sqlite://" + ledger, "--json", "--policy", file}
	if dryRun {
		args = append(args, "--dry-run")
	}
	r := execRunner(t, d.env, append(args, d.args...)...)
	require.Equal(t, cli.ExitOK, r.code, "%s\n%s", r.stdout, r.stderr)
	var got struct {
		Types []struct {
			Outcome string          `json:"outcome"`
			Reason  string          `json:"reason"`
			Detail  json.RawMessage `json:"detail"`
		} `json:"types"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Len(t, got.Types, 1, r.stdout)
	if len(got.Types[0].Detail) > 0 {
		require.NoError(t, json.Unmarshal(got.Types[0].Detail, &plan))
	}
	after := map[string]bool{}
	for _, l := range watched {
		for _, p := range w.list(t, l) {
			after[p] = true
		}
	}
	for p := range before {
		if !after[p] {
			removed = append(removed, p)
		}
	}
	slices.Sort(removed)
	return removed, got.Types[0].Outcome, got.Types[0].Reason, plan
}

// neighbours records the rows of tables to check them after a cleanup.
type neighbours struct {
	tables []dlTable
	rows   [][]string
}

func watch(t *testing.T, ts ...dlTable) neighbours {
	n := neighbours{tables: ts}
	for _, d := range ts {
		n.rows = append(n.rows, dlRows(t, d.load(t)))
	}
	return n
}

func (n neighbours) check(t *testing.T) {
	t.Helper()
	for i, d := range n.tables {
		tbl := d.load(t)
		requireCurrentFilesExist(t, tbl, d.name+" after orphan cleanup")
		requireRows(t, n.rows[i], tbl, d.name+" after orphan cleanup")
	}
}

// dlCurrentFile is a data file of the table's current snapshot.
func dlCurrentFile(t *testing.T, tbl *table.Table) string {
	t.Helper()
	data, _ := dlLiveFiles(t, tbl)
	require.NotEmpty(t, data)
	return data[0].FilePath()
}

// readLocation reads a file through the table's own FileIO.
func readLocation(t *testing.T, tbl *table.Table, loc string) []byte {
	t.Helper()
	fs, err := tbl.FS(t.Context())
	require.NoError(t, err)
	f, err := fs.Open(loc)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	body, err := io.ReadAll(f)
	require.NoError(t, err)
	return body
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func TestReplayOrphanCleanupNeighbours(t *testing.T) {
	t.Parallel()
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		nbScenarios(t, nbLocalWorld(t))
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		nbScenarios(t, nbS3World(t))
	})
}

func nbScenarios(t *testing.T, w nbWorld) {
	require.NoError(t, w.cat.CreateNamespace(t.Context(), table.Identifier{"ns"}, nil))

	// A table created with a LOCATION inside another table's data folder.
	t.Run("table-inside-data-folder", func(t *testing.T) {
		outer := w.create(t, "outer", "", nil)
		loc := outer.load(t).Location()
		inner := w.create(t, "inner", loc+"/data/inner", nil)
		n := watch(t, outer, inner)
		planted := sorted(w.plant(t, loc+"/data", 1, false), w.plant(t, loc+"/metadata", 2, true))
		w.age(t, loc)
		removed, outcome, reason, plan := w.clean(t, outer, loc)
		require.Equal(t, "done", outcome, reason)
		require.Equal(t, planted, removed, "only the outer table's orphans are deleted")
		require.Len(t, plan.OtherTables, 1, reason)
		require.Equal(t, loc+"/data/inner", plan.OtherTables[0].Root)
		require.Contains(t, reason, "files of another table under the table's folders, left alone")
		n.check(t)
	})

	// A table at the root of the store, with ordinary tables below it.
	t.Run("table-at-root", func(t *testing.T) {
		root := w.create(t, "root", w.rootLoc, nil)
		loc := root.load(t).Location()
		a := w.create(t, "a", strings.TrimSuffix(loc, "/")+"/ns/a", nil)
		b := w.create(t, "b", strings.TrimSuffix(loc, "/")+"/ns/b", nil)
		n := watch(t, root, a, b)
		planted := sorted(w.plant(t, loc+"/data", 3, false), w.plant(t, loc+"/metadata", 4, true))
		w.age(t, loc)
		removed, outcome, reason, _ := w.clean(t, root, loc)
		require.Equal(t, "done", outcome, reason)
		require.Equal(t, planted, removed, "only the root table's orphans are deleted")
		n.check(t)
	})

	// A table whose write.data.path lies outside its location: its data
	// orphans are there; a file under the location outside its paths stays.
	t.Run("data-path-elsewhere", func(t *testing.T) {
		elsewhere := w.warehouse + "/elsewhere/dp-data"
		dp := w.create(t, "dp", "", iceberg.Properties{table.WriteDataPathKey: elsewhere})
		loc := dp.load(t).Location()
		n := watch(t, dp)
		planted := sorted(w.plant(t, elsewhere, 5, false), w.plant(t, loc+"/metadata", 6, true))
		stray := loc + "/data/00000-0-written-before-the-data-path-moved-00001.parquet"
		w.put(t, stray, []byte("PAR1 not this table's any more PAR1"))
		w.age(t, loc, elsewhere)
		removed, outcome, reason, plan := w.clean(t, dp, loc, elsewhere)
		require.Equal(t, "done", outcome, reason)
		require.Equal(t, planted, removed)
		require.NotNil(t, plan.OutsideTablePaths, reason)
		require.Equal(t, 1, *plan.OutsideTablePaths, "the file in the old data folder is left alone and counted")
		n.check(t)
	})

	// A non-Iceberg folder (a Hive-style export) under a table's location.
	t.Run("non-iceberg-folder", func(t *testing.T) {
		hv := w.create(t, "hv", "", nil)
		loc := hv.load(t).Location()
		n := watch(t, hv)
		export := []string{loc + "/export/dt=2024-01-01/000000_0", loc + "/export/dt=2024-01-02/000000_0"}
		for _, e := range export {
			w.put(t, e, []byte("a Hive partition file"))
		}
		planted := []string{w.plant(t, loc+"/data", 7, false)}
		w.age(t, loc)
		removed, outcome, reason, _ := w.clean(t, hv, loc)
		require.Equal(t, "done", outcome, reason)
		require.Equal(t, planted, removed)
		require.Contains(t, reason, "2 files under the location outside the table's paths, left alone")
		n.check(t)
	})

	// A table that registered a file under another table's data folder
	// (add_files of an export that happened to be written there): that
	// file is not an orphan of the host. Protection comes from the ledger:
	// a runner that sampled the guest recorded where its files lie outside
	// its location, and the host's cleanup loads the guest and keeps what
	// it references.
	t.Run("add-files-under-data-folder", func(t *testing.T) {
		host := w.create(t, "host", "", nil)
		loc := host.load(t).Location()
		guest := w.create(t, "guest", "", nil)
		imported := loc + "/data/imported/part-00000-export.parquet"
		tbl := guest.load(t)
		w.put(t, imported, readLocation(t, tbl, dlCurrentFile(t, tbl)))
		txn := tbl.NewTransaction()
		require.NoError(t, txn.AddFiles(t.Context(), []string{imported}, nil, false))
		_, err := txn.Commit(t.Context())
		require.NoError(t, err)
		n := watch(t, host, guest)
		require.Len(t, n.rows[1], 80, "the guest's own rows and the imported copy")
		w.age(t, loc)

		// Without the ledger's record of the guest, the imported file is
		// the host's orphan: what this scenario guards against.
		removed, outcome, reason, plan := w.cleanIn(t, host, "", true, loc)
		require.Equal(t, "skipped", outcome, "a dry run: %s", reason)
		require.Empty(t, removed, "a dry run deletes nothing")
		require.True(t, slices.ContainsFunc(plan.Files, func(f struct {
			Path string `json:"path"`
		}) bool {
			return f.Path == imported
		}), "a ledger that never sampled the guest plans its file: %+v", plan.Files)

		ledger := filepath.Join(t.TempDir(), "ledger.db")
		_, outcome, reason, _ = w.cleanIn(t, guest, ledger, true, loc)
		require.Equal(t, "skipped", outcome, "a dry run: %s", reason)
		planted := sorted(w.plant(t, loc+"/data", 9, false), w.plant(t, loc+"/metadata", 10, true))
		w.age(t, loc)
		removed, outcome, reason, plan = w.cleanIn(t, host, ledger, false, loc)
		require.Equal(t, "done", outcome, reason)
		require.Equal(t, planted, removed, "only the host's orphans are deleted")
		require.Contains(t, reason, "1 files other tables reference, left alone")
		require.Len(t, plan.ReferencedByOtherTables, 1, reason)
		require.True(t, strings.HasSuffix(plan.ReferencedByOtherTables[0].Table, ".ns.guest"), plan.ReferencedByOtherTables[0].Table)
		require.Equal(t, []string{loc + "/data/imported"}, plan.ReferencedByOtherTables[0].Folders)
		require.Equal(t, 1, plan.ReferencedByOtherTables[0].Files)
		n.check(t)
	})

	// gc.enabled=false: the owner's "no file of this table may be deleted".
	t.Run("gc-disabled", func(t *testing.T) {
		nogc := w.create(t, "nogc", "", iceberg.Properties{"gc.enabled": "false"})
		loc := nogc.load(t).Location()
		n := watch(t, nogc)
		w.plant(t, loc+"/data", 8, false)
		w.age(t, loc)
		removed, outcome, reason, _ := w.clean(t, nogc, loc)
		require.Equal(t, "skipped", outcome, reason)
		require.Contains(t, reason, "gc.enabled=false")
		require.Empty(t, removed)
		n.check(t)
	})
}
