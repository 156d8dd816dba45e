package coordtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
	"github.com/tms-dev/tms/testdata"
)

// This file holds the local submitter's fixtures.
//
// The local submitter is tested with the real tms-runner binary, real
// ledgers (PostgreSQL and SQLite) and real testdata tables. Shell scripts
// stand in only where the runner cannot show what is tested: wrappers that
// exec or run the real runner record the argv and environment it got and
// when each run starts and ends (the concurrency limit); a script that
// ignores SIGTERM, which the runner never does, proves the SIGKILL
// escalation; and `exit 0` is enough to test ids across a restart.

var (
	runnerOnce sync.Once
	runnerBin  string
	runnerErr  error
)

// BuiltRunner builds cmd/tms-runner once per test binary (without the race
// detector: the runner is the system under test's child, not the test) into
// a fixed folder under the temp dir, replaced atomically on every run so
// that runs do not pile up binaries.
func BuiltRunner(t *testing.T) string {
	t.Helper()
	runnerOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "tms-coordinator-test")
		if runnerErr = os.MkdirAll(dir, 0o755); runnerErr != nil {
			return
		}
		var tmp string
		if tmp, runnerErr = os.MkdirTemp(dir, "build-"); runnerErr != nil {
			return
		}
		defer os.RemoveAll(tmp)
		out := filepath.Join(tmp, "tms-runner")
		build := exec.Command("go", "build", "-ldflags=-s -w", "-o", out, "github.com/tms-dev/tms/cmd/tms-runner")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := build.CombinedOutput(); err != nil {
			runnerErr = fmt.Errorf("build tms-runner: %v\n%s", err, b)
			return
		}
		runnerBin = filepath.Join(dir, "tms-runner")
		runnerErr = os.Rename(out, runnerBin)
	})
	require.NoError(t, runnerErr)
	return runnerBin
}

// LocalBackends are the ledgers the runner is started against.
var LocalBackends = []string{store.BackendPostgres, store.BackendSQLite}

// LocalLedger is a migrated ledger the test creates job rows in.
type LocalLedger struct {
	URL string
	St  store.Store
}

func NewLocalLedger(t *testing.T, backend string) LocalLedger {
	t.Helper()
	dbURL := testdb.SQLiteURL(t)
	if backend == store.BackendPostgres {
		dbURL = testdb.PostgresURL(t)
	}
	ctx := context.Background()
	_, err := store.Migrate(ctx, dbURL, zaptest.NewLogger(t))
	require.NoError(t, err)
	st, err := store.Open(ctx, dbURL, zaptest.NewLogger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return LocalLedger{URL: dbURL, St: st}
}

// Job registers table name with uuid and opens a cron job row for policy
// whose spec is spec.
func (l LocalLedger) Job(t *testing.T, name, uuid string, policy int64, types []string, spec any) store.Job {
	t.Helper()
	ident, err := catalogs.ParseIdent(name)
	require.NoError(t, err)
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	row, err := l.St.RegisterTable(t.Context(), store.TableRef{
		Catalog: catalogs.LocalName, Namespace: strings.Join(ident[:len(ident)-1], "."), Name: ident[len(ident)-1], UUID: uuid,
	})
	require.NoError(t, err)
	j, err := l.St.CreateJob(t.Context(), store.NewJob{TableID: row.ID, PolicyID: policy, Types: types, Trigger: store.TriggerCron, Spec: raw})
	require.NoError(t, err)
	return j
}

// Get reads job row id.
func (l LocalLedger) Get(t *testing.T, id int64) store.Job {
	t.Helper()
	j, err := l.St.GetJob(t.Context(), id)
	require.NoError(t, err)
	return j
}

// LocalTableName is the recipe the runs maintain, built with 6 appends (6
// small files): enough for compaction to have work, small enough for the
// race detector.
const LocalTableName = "tms.small_files"

// LocalTable builds the small table and returns its warehouse dir, uuid and
// head snapshot id.
func LocalTable(t *testing.T) (dir, uuid string, head int64) {
	t.Helper()
	dir = testdata.BuildAdjustedT(t, func(r *testdata.Recipe) { r.Appends = 6 }, LocalTableName)
	tbl := LoadLocal(t, dir)
	return dir, tbl.UUID, tbl.Head
}

// LocalState is what LoadLocal read of the local table.
type LocalState struct {
	UUID string
	Head int64
}

// LoadLocal reads the local table in dir.
func LoadLocal(t *testing.T, dir string) LocalState {
	t.Helper()
	cat, err := catalogs.OpenLocal(t.Context(), dir, false)
	require.NoError(t, err)
	if c, ok := cat.(catalog.Closer); ok {
		defer c.Close() // its connection pool, which the leak check counts
	}
	ident, err := catalogs.ParseIdent(LocalTableName)
	require.NoError(t, err)
	tbl, err := catalogs.LoadTable(t.Context(), cat, ident)
	require.NoError(t, err)
	s := LocalState{UUID: tbl.Metadata().TableUUID().String()}
	if snap := tbl.CurrentSnapshot(); snap != nil {
		s.Head = snap.SnapshotID
	}
	return s
}

// LocalChain is the types of WarehouseSpec.
var LocalChain = []string{"compaction", "manifest-rewrite", "snapshot-expiry"}

// WarehouseSpec is the job spec of the full chain on the local table.
func WarehouseSpec(dir string) map[string]any {
	return map[string]any{
		"catalog": map[string]any{"warehouse-dir": dir},
		"table":   LocalTableName,
		"steps":   []any{map[string]any{"type": "compaction"}, map[string]any{"type": "manifest-rewrite"}, map[string]any{"type": "snapshot-expiry"}},
	}
}

// NewLocal returns a submitter with the built runner and a temp log dir
// unless cfg says otherwise, closed when the test ends.
func NewLocal(t *testing.T, cfg submit.LocalConfig) *submit.LocalSubmitter {
	t.Helper()
	if cfg.RunnerPath == "" {
		cfg.RunnerPath = BuiltRunner(t)
	}
	if cfg.LogDir == "" {
		cfg.LogDir = t.TempDir()
	}
	if cfg.Log == nil {
		cfg.Log = zaptest.NewLogger(t)
	}
	s, err := submit.NewLocalSubmitter(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// Request is the job request of row j on ledger l.
func Request(l LocalLedger, j store.Job) submit.JobRequest {
	return submit.JobRequest{JobID: j.ID, Fence: j.Fence, DBURL: l.URL, Table: "local." + LocalTableName}
}

// Status returns the submitter's status of job id.
func Status(t *testing.T, s submit.Submitter, id string) submit.JobStatus {
	t.Helper()
	st, err := s.Status(t.Context(), id)
	require.NoError(t, err)
	return st
}

// WaitEnded waits until the job is terminal and returns its status.
func WaitEnded(t *testing.T, s submit.Submitter, id string) submit.JobStatus {
	t.Helper()
	var st submit.JobStatus
	testkit.Eventually(t, 60*time.Second, "job "+id+" to end", func() bool {
		st = Status(t, s, id)
		return st.State.Terminal()
	})
	return st
}

// SecretValue is a credential-like value no test writes anywhere but into a
// request's CatalogProps or a URL's password.
func SecretValue() string { return "s3cr3t-" + strings.ToLower(rand.Text()[:12]) }

// EnvWithout returns environ without the variable name.
func EnvWithout(environ []string, name string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// WriteScript writes an executable /bin/sh script and returns its path.
func WriteScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runner.sh")
	testkit.WriteExecutable(t, path, []byte("#!/bin/sh\n"+body))
	return path
}

// HangingCatalog is a REST catalog endpoint that accepts connections and
// never answers, so a runner pointed at it stays inside its job (its row
// running) until it is stopped. accepted receives once per connection.
func HangingCatalog(t *testing.T) (uri string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	acc := make(chan struct{}, 16)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case acc <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String(), acc
}

// HangingJob opens a row whose runner will block on the hanging catalog.
// Each policy's row is its own incarnation of the table (a uuid of its
// own), since a table has one job in flight at a time.
func HangingJob(t *testing.T, l LocalLedger, uri string, policy int64) store.Job {
	t.Helper()
	return l.Job(t, LocalTableName, fmt.Sprintf("uuid-of-a-remote-table-%d", policy), policy, []string{"compaction"}, map[string]any{
		"catalog": map[string]any{"name": "prod", "properties": map[string]any{"type": "rest", "uri": uri}},
		"table":   LocalTableName,
		"steps":   []any{map[string]any{"type": "compaction"}},
	})
}

// WaitRunnerInside waits until the runner holds its row (running) and has
// connected to the catalog.
func WaitRunnerInside(t *testing.T, l LocalLedger, jobID int64, accepted <-chan struct{}) {
	t.Helper()
	select {
	case <-accepted:
	case <-time.After(60 * time.Second):
		t.Fatal("the runner never connected to the catalog")
	}
	require.Equal(t, store.StatusRunning, l.Get(t, jobID).Status)
}

// ProcessGone reports whether pid no longer runs: it does not exist, or is
// a zombie waiting for a reaper that is not the test (containers often run
// without an init that reaps).
func ProcessGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, ok := bytes.Cut(stat, []byte(") "))
	return ok && len(rest) > 0 && rest[0] == 'Z'
}
