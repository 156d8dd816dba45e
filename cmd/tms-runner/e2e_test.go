package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// The end-to-end tests exercise the real process (flags, environment, exit
// codes): runnerBinary builds bin/tms-runner once per test binary, on first
// use. Under -short (make check, the no-service loop) they skip through
// testkit.NeedsService: building and running the binary is most of this
// package's time; make test runs them.
var (
	binOnce   sync.Once
	binPath   string
	binErr    error
	binTmpDir string
)

func runnerBinary(t testing.TB) string {
	t.Helper()
	testkit.NeedsService(t, "the built tms-runner binary")
	binOnce.Do(func() {
		binTmpDir, binErr = os.MkdirTemp("", "tms-runner-e2e-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binTmpDir, "tms-runner")
		build := exec.Command("go", "build", "-o", binPath, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("build tms-runner: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// TestMain fails the package at once when PostgreSQL does not answer (job
// mode runs against both backends; those tests never skip), and removes the
// built binary after the tests.
func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if err := testdb.RequirePostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	code := m.Run()
	if binTmpDir != "" {
		_ = os.RemoveAll(binTmpDir)
	}
	return code
}

// result is what one run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

// execRunner runs the built binary with args and extra environment.
func execRunner(t testing.TB, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), runnerBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run tms-runner: %v", err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// backends are the ledgers job mode is tested against.
var backends = []struct {
	name string
	url  func(t testing.TB) string
}{
	{"postgres", testdb.PostgresURL},
	{"sqlite", testdb.SQLiteURL},
}

// ledger is a migrated ledger a test creates job rows in.
type ledger struct {
	url string
	st  store.Store
}

func newLedger(t *testing.T, dbURL string) ledger {
	t.Helper()
	ctx := context.Background()
	_, err := store.Migrate(ctx, dbURL, nil)
	require.NoError(t, err)
	st, err := store.Open(ctx, dbURL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return ledger{url: dbURL, st: st}
}

// jobFor registers table name (with uuid, or the real one when empty) and
// creates a cron job row for it whose spec is spec.
func (l ledger) jobFor(t *testing.T, name, uuid string, types []string, spec any) store.Job {
	t.Helper()
	ident, err := catalogs.ParseIdent(name)
	require.NoError(t, err)
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	row, err := l.st.RegisterTable(t.Context(), store.TableRef{
		Catalog: catalogs.LocalName, Namespace: strings.Join(ident[:len(ident)-1], "."), Name: ident[len(ident)-1], UUID: uuid,
	})
	require.NoError(t, err)
	j, err := l.st.CreateJob(t.Context(), store.NewJob{TableID: row.ID, PolicyID: 7, Types: types, Trigger: store.TriggerCron, Spec: raw})
	require.NoError(t, err)
	return j
}

func (l ledger) get(t *testing.T, id int64) store.Job {
	t.Helper()
	j, err := l.st.GetJob(t.Context(), id)
	require.NoError(t, err)
	return j
}

// localTable loads a table of a testdata-style warehouse.
func localTable(t *testing.T, dir, name string) *table.Table {
	t.Helper()
	cat, err := catalogs.OpenLocal(t.Context(), dir, false)
	require.NoError(t, err)
	ident, err := catalogs.ParseIdent(name)
	require.NoError(t, err)
	tbl, err := catalogs.LoadTable(t.Context(), cat, ident)
	require.NoError(t, err)
	return tbl
}

// state is what a test compares before and after: the head snapshot, the
// number of snapshots, and the live rows' checksum.
type state struct {
	head      int64
	snapshots int
	sum       checksum.Result
}

func tableState(t *testing.T, dir, name string) state {
	t.Helper()
	tbl := localTable(t, dir, name)
	var s state
	if snap := tbl.CurrentSnapshot(); snap != nil {
		s.head = snap.SnapshotID
	}
	s.snapshots = len(tbl.Metadata().Snapshots())
	sum, err := checksum.Table(t.Context(), tbl, 0)
	require.NoError(t, err)
	s.sum = sum
	return s
}

// tableUUID returns the Iceberg table-uuid of a local table.
func tableUUID(t *testing.T, dir, name string) string {
	t.Helper()
	return localTable(t, dir, name).Metadata().TableUUID().String()
}

// outcomeRow is one element of a job row's outcomes column.
type outcomeRow struct {
	Type             string `json:"type"`
	Outcome          string `json:"outcome"`
	Reason           string `json:"reason"`
	Error            string `json:"error"`
	BeforeSnapshotID int64  `json:"before_snapshot_id"`
	AfterSnapshotID  int64  `json:"after_snapshot_id"`
	DurationMs       *int64 `json:"duration_ms"`
}

func outcomesOf(t *testing.T, j store.Job) []outcomeRow {
	t.Helper()
	require.NotNil(t, j.Outcomes, "the row has outcomes")
	var out []outcomeRow
	require.NoError(t, json.Unmarshal(j.Outcomes, &out))
	return out
}
