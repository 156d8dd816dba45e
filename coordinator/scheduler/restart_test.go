package scheduler_test

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/freeport"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// pgBinDir holds the PostgreSQL 15 server programs (Debian's layout).
const pgBinDir = "/usr/lib/postgresql/15/bin"

// privatePostgres is a PostgreSQL cluster of one test's own, so the test can
// restart it without disturbing the shared server other tests use.
type privatePostgres struct {
	t       *testing.T
	dir     string // owned by the server's user: data/, the socket, the log
	port    int
	asOwner func(name string, args ...string) *exec.Cmd
}

// startPrivatePostgres initialises and starts a throwaway cluster (trust
// auth, fsync off) on a free port; t.Cleanup stops it and removes its
// files. The server refuses to run as root, so as root it runs as the
// postgres user. It fails the test, saying what is missing, when the
// PostgreSQL 15 server programs are not installed: the test never skips.
func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	for _, prog := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(pgBinDir, prog)); err != nil {
			t.Fatalf("this test runs a PostgreSQL 15 cluster of its own and needs %s/%s (apt-get install postgresql-15): %v", pgBinDir, prog, err)
		}
	}
	dir, err := os.MkdirTemp("", "tms-pg-restart-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	pg := &privatePostgres{t: t, dir: dir, port: freePort(t)}
	pg.asOwner = func(name string, args ...string) *exec.Cmd {
		return exec.Command(filepath.Join(pgBinDir, name), args...)
	}
	if os.Geteuid() == 0 {
		owner, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root, the test starts the server as the postgres user")
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		require.NoError(t, os.Chown(dir, uid, gid))
		pg.asOwner = func(name string, args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(pgBinDir, name)}, args...)...)
		}
	}
	pg.run("initdb", "-D", pg.data(), "-A", "trust", "-U", "postgres", "--no-sync", "--no-instructions")
	pg.run("pg_ctl", "-D", pg.data(), "-l", filepath.Join(dir, "server.log"), "-o", pg.options(), "-w", "-t", "60", "start")
	t.Cleanup(func() {
		if out, err := pg.asOwner("pg_ctl", "-D", pg.data(), "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
			t.Logf("stopping the private cluster: %v\n%s", err, out)
		}
	})
	return pg
}

func (pg *privatePostgres) data() string { return filepath.Join(pg.dir, "data") }

func (pg *privatePostgres) options() string {
	return fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50", pg.port, pg.dir)
}

// url returns the cluster's postgres database URL.
func (pg *privatePostgres) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

// restart restarts the server (fast shutdown: every session is cut).
func (pg *privatePostgres) restart() {
	pg.t.Helper()
	pg.run("pg_ctl", "-D", pg.data(), "-l", filepath.Join(pg.dir, "server.log"), "-o", pg.options(), "-m", "fast", "-w", "-t", "60", "restart")
}

func (pg *privatePostgres) run(name string, args ...string) {
	pg.t.Helper()
	out, err := pg.asOwner(name, args...).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(pg.dir, "server.log"))
		pg.t.Fatalf("%s %s: %v\n%s\nserver log:\n%s", name, strings.Join(args, " "), err, out, log)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.One()
	require.NoError(t, err)
	return port
}

// TestPostgresRestartDuringDrain restarts PostgreSQL while two nodes drain
// tasks whose handlers record their execution in the completion's
// transaction. The nodes must reconnect (pools, listener) and finish without
// the watchdog stopping them; every task runs exactly once and no row is
// left. Claims and completions cut by the restart either committed or not:
// rows in doubt are still picked by a node that forgot them and come back
// through the rescuer, which the short stale age here makes quick.
func TestPostgresRestartDuringDrain(t *testing.T) {
	t.Parallel()
	const tasks = 3000
	pg := startPrivatePostgres(t)
	ctx := t.Context()
	_, err := store.Migrate(ctx, pg.url(), zaptest.NewLogger(t))
	require.NoError(t, err)
	testdb.CreateExecutions(t, pg.url())
	b := &coordtest.Bundle{T: t, URL: pg.url(), Ctx: ctx}
	b.Sch = b.Open(4)
	b.ScheduleN("drain", tasks)

	cfg := scheduler.Config{
		Pools:        map[string]int{"drain": 4},
		PollInterval: 100 * time.Millisecond,
		// A claim is stale after 6s; the watchdog allows 5s without a
		// node heartbeat, far more than a fast restart takes.
		HeartbeatInterval: 200 * time.Millisecond, MissedHeartbeatsLimit: 30, WatchdogTimeout: 5 * time.Second,
		Backoff: func(int) time.Duration { return 50 * time.Millisecond },
	}
	nodes := make([]*coordtest.Node, 2)
	for i := range nodes {
		c := cfg
		c.NodeID = fmt.Sprint("node-", i)
		nodes[i] = b.Start(c, coordtest.RecordKind("drain", ""))
	}
	completed := func() (n int64) {
		for _, nd := range nodes {
			n += nd.Stats().Completed
		}
		return n
	}
	testkit.Eventually(t, time.Minute, "a third of the tasks to run before the restart", func() bool { return completed() >= tasks/3 })
	started := time.Now()
	pg.restart()
	before := completed()
	t.Logf("restarted PostgreSQL in %s; %d of %d tasks had completed", time.Since(started).Round(time.Millisecond), before, tasks)
	require.Less(t, before, int64(tasks), "the restart happened mid-drain")

	testkit.Eventually(t, time.Minute, "every task to run after the restart", func() bool {
		total, _, err := b.Sch.CountTasks(ctx)
		return err == nil && total == 0
	})
	for _, n := range nodes {
		require.NoError(t, n.Stop(), "the node reconnected; the watchdog did not stop it")
	}
	execs := testdb.Executions(t, b.URL)
	require.Len(t, execs, tasks, "every task executed, none twice (the executions key is unique)")
	for i := range tasks {
		if _, ok := execs[fmt.Sprint(i)]; !ok {
			t.Fatalf("task %d never executed", i)
		}
	}
	// A completion whose commit the restart cut is reported as failed
	// although it may have committed; at most one per thread.
	var rescued int64
	for _, n := range nodes {
		rescued += n.Stats().Rescued
	}
	require.GreaterOrEqual(t, completed(), int64(tasks-2*4), "every other task completed normally")
	t.Logf("rows revived by the rescuer: %d", rescued)
}
