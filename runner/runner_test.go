package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/chain"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/sampler"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
	"github.com/tms-dev/tms/testdata"
)

// These tests use the SQLite ledger: the end-to-end tests of cmd/tms-runner
// run job mode against PostgreSQL and SQLite with the real binary. Here the
// runner is driven in-process, so the tests can act at an exact point of the
// chain.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bundle is what setup returns.
type bundle struct {
	ctx  context.Context
	dir  string // the warehouse
	name string // the table
	st   store.Store
	row  store.Table
}

func setup(t *testing.T, name string) *bundle {
	t.Helper()
	b := &bundle{ctx: t.Context(), dir: testdata.BuildT(t, name), name: name}
	dbURL := testdb.SQLiteURL(t)
	_, err := store.Migrate(b.ctx, dbURL, nil)
	require.NoError(t, err)
	b.st, err = store.Open(b.ctx, dbURL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.st.Close()) })
	ident, err := catalogs.ParseIdent(name)
	require.NoError(t, err)
	b.row, err = b.st.RegisterTable(b.ctx, store.TableRef{
		Catalog: catalogs.LocalName, Namespace: ident[0], Name: ident[1], UUID: b.load(t).uuid,
	})
	require.NoError(t, err)
	return b
}

// job creates a job row running steps on the bundle's table.
func (b *bundle) job(t *testing.T, policyID int64, types ...policy.Type) store.Job {
	t.Helper()
	spec := Spec{Catalog: CatalogSpec{WarehouseDir: b.dir}, Table: b.name}
	names := make([]string, len(types))
	for i, ty := range types {
		spec.Steps = append(spec.Steps, StepSpec{Type: ty})
		names[i] = string(ty)
	}
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	j, err := b.st.CreateJob(b.ctx, store.NewJob{TableID: b.row.ID, PolicyID: policyID, Types: names, Trigger: store.TriggerCommit, Spec: raw})
	require.NoError(t, err)
	return j
}

// cleanOrphans runs an orphan-cleanup job on the bundle's table, requires
// it done, and returns its plan.
func (b *bundle) cleanOrphans(t *testing.T) *chain.OrphanPlan {
	t.Helper()
	j := b.job(t, 1, policy.OrphanCleanup)
	rep, err := RunJob(b.ctx, b.st, j.ID, j.Fence, Options{Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	require.Len(t, rep.Types, 1)
	require.Equal(t, chain.Done, rep.Types[0].Outcome, "%s %s", rep.Types[0].Reason, rep.Types[0].Err)
	return rep.Types[0].Detail.(*chain.OrphanPlan)
}

// tableView is the table as a test compares it.
type tableView struct {
	uuid string
	head int64
	sum  checksum.Result
}

func (b *bundle) load(t *testing.T) tableView {
	t.Helper()
	cat, err := catalogs.OpenLocal(b.ctx, b.dir, false)
	require.NoError(t, err)
	defer closeCatalog(cat)
	ident, _ := catalogs.ParseIdent(b.name)
	tbl, err := catalogs.LoadTable(b.ctx, cat, ident)
	require.NoError(t, err)
	sum, err := checksum.Table(b.ctx, tbl, 0)
	require.NoError(t, err)
	return tableView{uuid: tbl.Metadata().TableUUID().String(), head: tbl.CurrentSnapshot().SnapshotID, sum: sum}
}

// dataFiles lists the files under the table's data folder.
func (b *bundle) dataFiles(t *testing.T) []string {
	t.Helper()
	ident, _ := catalogs.ParseIdent(b.name)
	files, err := filepath.Glob(filepath.Join(b.dir, "warehouse", ident[0]+".db", ident[1], "data", "*"))
	require.NoError(t, err)
	return files
}

// TestFencedOutWhileRunning bumps the fence right after the runner sampled
// S0 — as the reconciler does when it declares a runner dead — and checks
// that the runner commits nothing, removes what it wrote, writes nothing more
// to the row and reports store.ErrStaleFence.
func TestFencedOutWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.partitioned")
	before, files := b.load(t), b.dataFiles(t)
	j := b.job(t, 1, policy.Compaction, policy.ManifestRewrite, policy.SnapshotExpiry)

	var bumped, commitsAttempted int
	opts := Options{Log: zaptest.NewLogger(t), wrapHooks: func(h chain.Hooks) chain.Hooks {
		sampled, beforeCommit := h.Sampled, h.BeforeCommit
		h.Sampled = func(ctx context.Context, ty policy.Type, when string, r sampler.Result) error {
			if err := sampled(ctx, ty, when, r); err != nil {
				return err
			}
			if bumped == 0 {
				_, err := b.st.BumpFence(ctx, j.ID)
				require.NoError(t, err)
				bumped++
			}
			return nil
		}
		h.BeforeCommit = func(ctx context.Context, ty policy.Type) error {
			commitsAttempted++
			return beforeCommit(ctx, ty)
		}
		return h
	}}
	rep, err := RunJob(b.ctx, b.st, j.ID, j.Fence, opts)
	require.ErrorIs(t, err, store.ErrStaleFence)
	require.Equal(t, 1, commitsAttempted, "compaction got as far as its commit, and no further")
	require.NotEmpty(t, rep.Types)
	require.Equal(t, before, b.load(t), "nothing was committed")
	require.ElementsMatch(t, files, b.dataFiles(t), "the files compaction wrote were removed")

	got, err := b.st.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.True(t, got.InFlight(), "the zombie did not close the row")
	require.Equal(t, store.StatusRunning, got.Status)
	require.Equal(t, &before.head, got.BeforeSnapshotID, "written before the bump")
	require.Nil(t, got.Outcomes)
	require.Equal(t, int64(2), got.Fence)
}

// TestProtectedSnapshots checks that snapshot expiry asks which snapshots
// the table's other in-flight jobs planned from (none can exist now), and
// is not told the job's own.
func TestProtectedSnapshots(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	j := b.job(t, 1, policy.SnapshotExpiry)
	// A table runs one job at a time: no other runner can be planning from
	// a snapshot of it while this one expires, so the hook asks the ledger
	// and finds nothing to protect.
	_, err := b.st.CreateJob(b.ctx, store.NewJob{TableID: b.row.ID, PolicyID: 2, Types: []string{"compaction"}, Trigger: store.TriggerCron})
	require.ErrorIs(t, err, store.ErrInFlight)

	asked := false
	opts := Options{wrapHooks: func(h chain.Hooks) chain.Hooks {
		inner := h.ProtectedSnapshots
		h.ProtectedSnapshots = func(ctx context.Context) ([]int64, error) {
			asked = true
			ids, err := inner(ctx)
			require.Empty(t, ids)
			return ids, err
		}
		return h
	}}
	_, err = RunJob(b.ctx, b.st, j.ID, j.Fence, opts)
	require.NoError(t, err)
	require.True(t, asked, "snapshot expiry asks which snapshots other runs need")
}

// TestReplayKeepsCredentialsOutOfTheLedger replays with catalog properties
// that include credential-shaped keys: the run uses them, the job spec in the
// ledger does not contain them.
func TestReplayKeepsCredentialsOutOfTheLedger(t *testing.T) {
	t.Parallel()
	dir := testdata.BuildT(t, "tms.orphans")
	props, err := catalogs.LocalProps(dir)
	require.NoError(t, err)
	props["token"] = "tok-s3cr3t"
	props["s3.secret-access-key"] = "key-s3cr3t"
	ledger := "sqlite://" + filepath.Join(t.TempDir(), "sub", "replay.db")

	res, err := Replay(t.Context(), ReplayOptions{
		Ledger: ledger, Table: "tms.orphans", Steps: []StepSpec{{Type: policy.ManifestRewrite}},
		Catalog: CatalogSpec{Name: catalogs.LocalName, Properties: props}, // the SQL catalog keys tables by catalog name
	}, Options{Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	require.Equal(t, ledger, res.Ledger)
	require.Len(t, res.Report.Types, 1)

	st, err := store.Open(t.Context(), ledger, nil)
	require.NoError(t, err)
	defer st.Close()
	j, err := st.GetJob(t.Context(), res.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StatusSucceeded, j.Status)
	require.NotContains(t, string(j.Spec), "s3cr3t")
	require.Contains(t, string(j.Spec), `"uri"`, "non-secret properties are kept")
	row, err := st.GetTable(t.Context(), j.TableID)
	require.NoError(t, err)
	require.Equal(t, catalogs.LocalName, row.Catalog)

	// The default ledger lives in the user cache dir.
	require.True(t, strings.HasSuffix(DefaultReplayLedger(), string(os.PathSeparator)+filepath.Join("tms", ReplayLedgerFile)))
}

// TestInterruptedJobIsClosedCancelled cancels the job's context (SIGTERM in
// the binary) right after S0: the row is still closed, as cancelled, and
// nothing is committed.
func TestInterruptedJobIsClosedCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.partitioned")
	before := b.load(t)
	j := b.job(t, 1, policy.Compaction, policy.ManifestRewrite)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	opts := Options{wrapHooks: func(h chain.Hooks) chain.Hooks {
		sampled := h.Sampled
		h.Sampled = func(ctx context.Context, ty policy.Type, when string, r sampler.Result) error {
			err := sampled(ctx, ty, when, r)
			cancel()
			return err
		}
		return h
	}}
	_, err := RunJob(ctx, b.st, j.ID, j.Fence, opts)
	require.ErrorIs(t, err, ErrJobFailed)
	require.ErrorContains(t, err, "cancelled")

	got, err := b.st.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, store.StatusCancelled, got.Status)
	require.False(t, got.InFlight())
	require.Contains(t, got.Error, "interrupted")
	require.Len(t, outcomesOf(t, got), 2)
	require.Equal(t, before, b.load(t), "nothing was committed")
}

// outcomesOf decodes a row's outcomes column.
func outcomesOf(t *testing.T, j store.Job) []store.Outcome {
	t.Helper()
	out, err := j.DecodeOutcomes()
	require.NoError(t, err)
	return out
}

// TestOrphanCleanupLeavesRegisteredTables: the runner records the table's
// location in the ledger and hands orphan cleanup the locations of the
// other registered tables. Files under another table's recorded location
// inside this table's data folder (a table whose metadata is elsewhere:
// nothing else marks them) are left alone; an older incarnation of this
// table's own name does not count.
func TestOrphanCleanupLeavesRegisteredTables(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	ident, _ := catalogs.ParseIdent(b.name)
	dataDir := filepath.Join(b.dir, "warehouse", ident[0]+".db", ident[1], "data")
	innerLoc := "file://" + filepath.Join(dataDir, "inner")
	old := time.Now().Add(-testdata.OrphanAge)
	var theirs []string
	for i := range 2 {
		p := filepath.Join(dataDir, "inner", "data", fmt.Sprintf("0000%d-0-theirs-00001.parquet", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("PAR1 theirs PAR1"), 0o644))
		require.NoError(t, os.Chtimes(p, old, old))
		theirs = append(theirs, p)
	}
	inner, err := b.st.RegisterTable(b.ctx, store.TableRef{Catalog: catalogs.LocalName, Namespace: "tms", Name: "inner", UUID: "uuid-inner"})
	require.NoError(t, err)
	require.NoError(t, b.st.RecordTableFacts(b.ctx, inner.ID, store.TableFacts{Location: innerLoc, GCEnabled: true}))
	// An older incarnation of this table's name, recorded at the same
	// location: the table it replaced, not a neighbour.
	gone, err := b.st.RegisterTable(b.ctx, store.TableRef{Catalog: catalogs.LocalName, Namespace: ident[0], Name: ident[1], UUID: "uuid-dropped"})
	require.NoError(t, err)
	require.NoError(t, b.st.RecordTableFacts(b.ctx, gone.ID, store.TableFacts{Location: "file://" + filepath.Dir(dataDir), GCEnabled: true}))
	before := b.load(t)

	d := b.cleanOrphans(t)
	for _, p := range theirs {
		require.FileExists(t, p, "the registered table's file is left alone")
	}
	require.Len(t, d.OtherTables, 1)
	require.Equal(t, innerLoc, d.OtherTables[0].Root)
	require.Equal(t, 2, d.OtherTables[0].Files)
	require.NotEmpty(t, d.Files, "the table's own planted orphans are deleted")
	require.Equal(t, before.sum, b.load(t).sum)

	locs, err := b.st.TableLocations(b.ctx)
	require.NoError(t, err)
	require.Contains(t, locs, store.TableLocation{TableRef: b.row.TableRef, ID: b.row.ID, Location: "file://" + filepath.Dir(dataDir)},
		"the runner recorded the table's location")
}

// TestOrphanCleanupKeepsFolderOfAnotherIncarnation: the ledger records that
// table tms.guest references files in a folder under this table's data
// folder, but the table now under that name is another incarnation (it was
// dropped and created again). The runner does not read the new table's
// references as the old one's: the folder is kept whole, and the detail
// says why.
func TestOrphanCleanupKeepsFolderOfAnotherIncarnation(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	ident, _ := catalogs.ParseIdent(b.name)
	folder := filepath.Join(b.dir, "warehouse", ident[0]+".db", ident[1], "data", "imported")
	imported := filepath.Join(folder, "part-00000-export.parquet")
	require.NoError(t, os.MkdirAll(folder, 0o755))
	require.NoError(t, os.WriteFile(imported, []byte("PAR1 the old guest's PAR1"), 0o644))
	old := time.Now().Add(-testdata.OrphanAge)
	require.NoError(t, os.Chtimes(imported, old, old))

	cat, err := catalogs.OpenLocal(b.ctx, b.dir, false)
	require.NoError(t, err)
	defer closeCatalog(cat)
	_, err = cat.CreateTable(b.ctx, table.Identifier{"tms", "guest"},
		iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true}))
	require.NoError(t, err)
	guest, err := b.st.RegisterTable(b.ctx, store.TableRef{Catalog: catalogs.LocalName, Namespace: "tms", Name: "guest", UUID: "uuid-of-the-dropped-guest"})
	require.NoError(t, err)
	require.NoError(t, b.st.RecordOutsideFolders(b.ctx, guest.ID, []string{"file://" + folder}))
	before := b.load(t)

	d := b.cleanOrphans(t)
	require.FileExists(t, imported)
	require.Empty(t, d.ReferencedByOtherTables)
	require.Len(t, d.OtherTables, 1)
	require.Equal(t, "file://"+folder, d.OtherTables[0].Root)
	require.Contains(t, d.OtherTables[0].Why, "table local.tms.guest references files here and could not be read: it is now another table")
	require.NotEmpty(t, d.Files, "the table's own planted orphans are deleted")
	require.Equal(t, before.sum, b.load(t).sum)
}
