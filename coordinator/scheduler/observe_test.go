package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
)

// TestObserverHooks checks that Config.OnClaim sees each claim with its
// lateness and Config.OnExecuted each run with its outcome.
func TestObserverHooks(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendSQLite)
	var (
		mu       sync.Mutex
		lateness = map[string]time.Duration{}
		outcomes = map[string]int{}
	)
	n := b.Start(scheduler.Config{
		PollInterval: 20 * time.Millisecond,
		OnClaim: func(kind string, late time.Duration) {
			mu.Lock()
			lateness[kind] = max(lateness[kind], late)
			mu.Unlock()
		},
		OnExecuted: func(kind, outcome string) {
			mu.Lock()
			outcomes[kind+"/"+outcome]++
			mu.Unlock()
		},
	}, scheduler.Kind{Name: "obs", MaxFailures: 1, Handler: func(_ context.Context, x *scheduler.Execution) error {
		switch x.Task.Instance {
		case "boom":
			return errors.New("boom")
		case "panic":
			panic("handler bug")
		}
		return nil
	}})
	for _, inst := range []string{"ok", "boom", "panic"} {
		// Due a minute ago: the claim is at least that late.
		_, err := b.Sch.ScheduleTask(b.Ctx, store.NewTask{TaskKey: store.TaskKey{Name: "obs", Instance: inst}, ExecutionTime: time.Now().Add(-time.Minute)}, time.Now())
		require.NoError(t, err)
	}
	testkit.Eventually(t, 10*time.Second, "three runs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return outcomes["obs/"+scheduler.ExecSuccess]+outcomes["obs/"+scheduler.ExecFailure]+outcomes["obs/"+scheduler.ExecPanic] == 3
	})
	require.NoError(t, n.Stop())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"obs/success": 1, "obs/failure": 1, "obs/panic": 1}, outcomes)
	// The claim's time is taken as its statement starts, which may be a
	// moment before the insert it then finds has committed.
	require.GreaterOrEqual(t, lateness["obs"], time.Minute-100*time.Millisecond)
	require.Less(t, lateness["obs"], 2*time.Minute)
}
