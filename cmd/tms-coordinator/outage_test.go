package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// supervisor restarts `serve` whenever it exits, as systemd or Kubernetes
// would, until stopped.
type supervisor struct {
	mu  sync.Mutex
	cur *exec.Cmd
	// running is true from cur's start until its Wait returned (cur's
	// ProcessState is written by Wait without the lock).
	running bool
	exits   []int
	logs    []string
	stop    chan struct{}
	done    chan struct{}
}

func supervise(t *testing.T, args ...string) *supervisor {
	t.Helper()
	coord, _ := binaries(t)
	s := &supervisor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for run := 0; ; run++ {
			logFile := filepath.Join(t.TempDir(), fmt.Sprintf("serve-%d.log", run))
			f, err := os.Create(logFile)
			if err != nil {
				t.Errorf("supervisor: %v", err)
				return
			}
			cmd := exec.Command(coord, append([]string{"serve"}, args...)...)
			cmd.Stdout, cmd.Stderr = f, f
			cmd.Env = append(os.Environ(), "TMS_LOG_LEVEL=info")
			if err := cmd.Start(); err != nil {
				t.Errorf("supervisor: %v", err)
				f.Close()
				return
			}
			s.mu.Lock()
			s.cur, s.running, s.logs = cmd, true, append(s.logs, logFile)
			s.mu.Unlock()
			err = cmd.Wait()
			f.Close()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			s.mu.Lock()
			s.running = false
			s.exits = append(s.exits, code)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		s.shutdown()
		if t.Failed() {
			for _, l := range s.logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), b)
			}
		}
	})
	return s
}

// pid is the running serve's process id, 0 between runs.
func (s *supervisor) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || !s.running {
		return 0
	}
	return s.cur.Process.Pid
}

func (s *supervisor) exitCodes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.exits)
}

func (s *supervisor) shutdown() {
	select {
	case <-s.stop:
		<-s.done
		return
	default:
	}
	close(s.stop)
	s.mu.Lock()
	if s.running {
		_ = s.cur.Process.Signal(os.Interrupt)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		s.mu.Lock()
		if s.running {
			_ = s.cur.Process.Kill()
		}
		s.mu.Unlock()
		<-s.done
	}
}

// TestServeSurvivesDatabaseOutage stops a private PostgreSQL server for
// longer than the watchdog timeout right after serve started a runner: the
// node exits through its watchdog (code 5), its supervisor restarts it
// (failing while the database is down), and once the database is back
// every row left in flight is closed and the table is maintained again;
// its rows are unchanged.
func TestServeSurvivesDatabaseOutage(t *testing.T) {
	t.Parallel()
	pg := testdb.StartPrivatePostgres(t)
	db := pg.URL
	dir := t.TempDir()
	smallFilesTable(t, dir, table.Identifier{"outage", "t"}, 6, false)
	before := tableChecksums(t, dir, "outage.t")
	code, _, stderr := run(t, "migrate", "--db", db)
	require.Equal(t, cli.ExitOK, code, stderr)
	file := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"schedule": {"crontab": "*/2 * * * * *"}, "minIntervalMs": 0}`), 0o600))
	ok(t, "policy", "create", "--db", db, "--name", "p", "--type", "compaction", "--content-file", file)
	ok(t, "policy", "attach", "--db", db, "--name", "p", "--object", "local.outage.t")

	_, runner := binaries(t)
	sup := supervise(t, "--db", db, "--runner", runner, "--warehouse-dir", dir, "--log-dir", t.TempDir(),
		"--node-id", "outage-1", "--poll-interval", "200ms", "--heartbeat-interval", "1s", "--reconcile-interval", "1s",
		"--listen", "127.0.0.1:0")
	openLedger := func() store.Store {
		st, err := store.Open(t.Context(), db, zaptest.NewLogger(t))
		require.NoError(t, err)
		return st
	}
	st := openLedger()
	tbl := registered(t, st, "outage.t")
	succeeded := func(st store.Store, after time.Time) bool {
		jobs, err := st.ListJobs(t.Context(), tbl.ID, 100)
		require.NoError(t, err)
		return slices.ContainsFunc(jobs, func(j store.Job) bool { return j.Status == store.StatusSucceeded && j.CreatedAt.After(after) })
	}
	testkit.Eventually(t, time.Minute, "a first job to succeed", func() bool { return succeeded(st, time.Time{}) })
	st.Close()

	// The outage: right as a runner starts.
	testkit.Eventually(t, time.Minute, "a runner to start", func() bool {
		pid := sup.pid()
		return pid != 0 && len(runnerChildren(t, pid)) > 0
	})
	pg.Stop(t)
	down := time.Now()
	testkit.Eventually(t, time.Minute, "serve to exit through its watchdog", func() bool {
		return slices.Contains(sup.exitCodes(), exitWatchdog)
	})
	// The outage outlasts the watchdog: the database comes back only after
	// the supervisor's restarts have failed against it twice.
	testkit.Eventually(t, time.Minute, "two restarts to fail while the database is down", func() bool {
		exits := sup.exitCodes()
		i := slices.Index(exits, exitWatchdog)
		return len(exits)-i-1 >= 2 && !slices.Contains(exits[i+1:], 0)
	})
	pg.Start(t)
	up := time.Now()
	t.Logf("database down for %s; serve exits so far: %v", up.Sub(down).Round(100*time.Millisecond), sup.exitCodes())

	st = openLedger()
	defer st.Close()
	testkit.Eventually(t, time.Minute, "every row from before the outage to be closed", func() bool {
		jobs, err := st.ListInFlightJobs(t.Context(), 0, 100)
		require.NoError(t, err)
		return !slices.ContainsFunc(jobs, func(j store.Job) bool { return j.CreatedAt.Before(up) })
	})
	testkit.Eventually(t, time.Minute, "a job after the outage to succeed", func() bool { return succeeded(st, up) })
	sup.shutdown()

	jobs, err := st.ListJobs(t.Context(), tbl.ID, 1000)
	require.NoError(t, err)
	var closed []string
	for _, j := range jobs {
		require.False(t, j.InFlight(), "job %d", j.ID)
		if strings.Contains(j.Error, "reconciler") || j.Status == store.StatusLost {
			closed = append(closed, fmt.Sprintf("%d %s: %s", j.ID, j.Status, j.Error))
		}
	}
	t.Logf("%d jobs; closed for the outage: %v", len(jobs), closed)
	exits := sup.exitCodes()
	require.Equal(t, 0, exits[len(exits)-1], "stopped: exit 0")
	require.NotContains(t, exits[:len(exits)-1], 0, "serve exits 0 only when stopped")
	require.Equal(t, before, tableChecksums(t, dir, "outage.t"), "no row lost or duplicated")
}
