package scheduler_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// These tests run a coordinator node in a child process (the test binary
// re-executed with helperEnv set, see TestMain) so they can kill or freeze
// it with real signals.

const (
	helperEnv   = "TMS_COORDINATOR_TEST_HELPER" // the helper's mode: "block" or "late"
	helperDBEnv = "TMS_COORDINATOR_TEST_DB"
	victimNode  = "victim"
)

// Liveness settings shared by the helper and the surviving nodes: a claim
// is stale after 5 × 200ms = 1s.
var fastLiveness = scheduler.Config{
	HeartbeatInterval: 200 * time.Millisecond, MissedHeartbeatsLimit: 5, WatchdogTimeout: 900 * time.Millisecond,
	PollInterval: 50 * time.Millisecond,
}

// runHelperNode is the child process: one node running kind "victim" with
// three threads. Each callback prints "started INSTANCE". In mode "block" it
// then waits forever; in mode "late" it waits for a line on stdin and then
// tries to complete, recording the execution in the same transaction, and
// prints "complete INSTANCE ok|stale|error".
func runHelperNode() int {
	mode := os.Getenv(helperEnv)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	s, err := store.Open(ctx, os.Getenv(helperDBEnv), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	defer s.Close()
	stdin := bufio.NewScanner(os.Stdin)
	kind := scheduler.Kind{Name: "victim", Handler: func(ctx context.Context, x *scheduler.Execution) error {
		fmt.Printf("started %s\n", x.Task.Instance)
		if mode == "block" {
			select {} // killed with SIGKILL mid-callback
		}
		stdin.Scan()
		err := x.Complete(context.Background(), func(ctx context.Context, tx store.TxWriter) error {
			return testdb.RecordExecution(ctx, tx, x.Task.Instance, x.Node())
		})
		verdict := "ok"
		switch {
		case errors.Is(err, store.ErrStaleFence):
			verdict = "stale"
		case err != nil:
			verdict = "error " + err.Error()
		}
		fmt.Printf("complete %s %s\n", x.Task.Instance, verdict)
		return err
	}}
	cfg := fastLiveness
	cfg.NodeID, cfg.Pools, cfg.Log = victimNode, map[string]int{"victim": 3}, zap.NewNop()
	e, err := scheduler.New(s, cfg, kind)
	if err != nil {
		return 1
	}
	if err := e.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// helper is a running child node.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startHelper(t *testing.T, b *coordtest.Bundle, mode string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDBEnv+"="+b.URL)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	h := &helper{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return h
}

// expect waits for the child's next line and checks its prefix.
func (h *helper) expect(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		require.True(t, ok, "helper exited before printing %q", prefix)
		require.True(t, strings.HasPrefix(line, prefix), "helper printed %q, want %q…", line, prefix)
		return line
	case <-time.After(time.Minute):
		t.Fatalf("helper printed nothing for a minute (waiting for %q)", prefix)
		return ""
	}
}

// survivors starts two in-process nodes that run kind "victim" and record
// each execution.
func survivors(b *coordtest.Bundle) []*coordtest.Node {
	var ns []*coordtest.Node
	for i := range 2 {
		cfg := fastLiveness
		cfg.NodeID = fmt.Sprint("survivor-", i)
		ns = append(ns, b.Start(cfg, coordtest.RecordKind("victim", "")))
	}
	return ns
}

func TestKilledNodeTasksAreRevived(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendPostgres)
	b.ScheduleN("victim", 3)
	h := startHelper(t, b, "block")
	for range 3 {
		h.expect(t, "started ")
	}
	require.NoError(t, h.cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	ts, err := b.Sch.ListTasks(b.Ctx, "victim", 10)
	require.NoError(t, err)
	for _, task := range ts {
		require.Equal(t, victimNode, task.PickedBy, "the killed node held every row")
	}

	nodes := survivors(b)
	testkit.Eventually(t, time.Minute, "the killed node's tasks to run elsewhere", func() bool {
		return len(testdb.Executions(t, b.URL)) == 3
	})
	require.GreaterOrEqual(t, time.Since(killed), time.Second-fastLiveness.HeartbeatInterval,
		"rows are revived only after the missed-heartbeat limit")
	var rescued int64
	for _, n := range nodes {
		require.NoError(t, n.Stop())
		rescued += n.Stats().Rescued
		// A survivor that misses its own heartbeats on a loaded machine may
		// have a claim revived too: its completion is then rejected as stale
		// and writes nothing (the executions count below proves it), but it
		// never fails.
		require.Zero(t, n.Stats().Failed)
	}
	require.GreaterOrEqual(t, rescued, int64(3), "each of the killed node's rows was revived")
	require.Len(t, testdb.Executions(t, b.URL), 3, "and executed once")
	for inst, node := range testdb.Executions(t, b.URL) {
		require.True(t, strings.HasPrefix(node, "survivor-"), "task %s ran on %s", inst, node)
	}
	total, _, err := b.Sch.CountTasks(b.Ctx)
	require.NoError(t, err)
	require.Zero(t, total)
}

func TestFrozenNodeLateCompletionIsFenced(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendPostgres)
	b.ScheduleN("victim", 1)
	h := startHelper(t, b, "late")
	h.expect(t, "started 0")
	require.NoError(t, h.cmd.Process.Signal(syscall.SIGSTOP))

	nodes := survivors(b)
	testkit.Eventually(t, time.Minute, "the frozen node's task to run elsewhere", func() bool {
		return len(testdb.Executions(t, b.URL)) == 1
	})
	for _, n := range nodes {
		require.NoError(t, n.Stop())
	}
	ranOn := testdb.Executions(t, b.URL)["0"]
	require.True(t, strings.HasPrefix(ranOn, "survivor-"))

	require.NoError(t, h.cmd.Process.Signal(syscall.SIGCONT))
	_, err := io.WriteString(h.stdin, "go\n")
	require.NoError(t, err)
	h.expect(t, "complete 0 stale")
	require.Equal(t, map[string]string{"0": ranOn}, testdb.Executions(t, b.URL), "the late completion wrote nothing")
	total, _, err := b.Sch.CountTasks(b.Ctx)
	require.NoError(t, err)
	require.Zero(t, total, "and did not bring the row back")
	require.NoError(t, h.cmd.Process.Signal(syscall.SIGTERM))
}
