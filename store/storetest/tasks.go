package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// exerciseTasks runs the conformance suite of store.Scheduler (the task
// table) against the stores open returns, under the same contract as
// Exercise.
func exerciseTasks(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	setup := func(t *testing.T) *taskBundle {
		t.Helper()
		st := open(t)
		return &taskBundle{s: st, st: st, ctx: t.Context(), now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	}
	for name, fn := range map[string]func(*testing.T, *taskBundle){
		"ScheduleAndClaim":               exerciseScheduleAndClaim,
		"UpsertCoalesces":                exerciseUpsertCoalesces,
		"UpsertWhilePickedReruns":        exerciseUpsertWhilePicked,
		"ConcurrentClaimsOnce":           exerciseConcurrentClaims,
		"CompletionIsFenced":             exerciseCompletionFenced,
		"CompleteWithRollsBack":          exerciseCompleteWithRollback,
		"BatchCompletion":                exerciseBatchCompletion,
		"CompleteAndClaim":               exerciseCompleteAndClaim,
		"ConcurrentCompleteAndClaimOnce": exerciseConcurrentCompleteAndClaim,
		"RescheduleAndFailure":           exerciseRescheduleAndFailure,
		"HeartbeatAndRescue":             exerciseHeartbeatAndRescue,
		"ConcurrentRescueOnce":           exerciseConcurrentRescue,
		"Nodes":                          exerciseNodes,
		"FinishedJobWakesWaiters":        exerciseWaitForTable,
		"CompleteWithCreatesJobOfNode":   exerciseCompleteWithJobNode,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t))
		})
	}
}

type taskBundle struct {
	s   store.Scheduler
	st  store.Store
	ctx context.Context
	now time.Time
}

func (b *taskBundle) schedule(t *testing.T, name, instance string, at time.Time) {
	t.Helper()
	created, err := b.s.ScheduleTask(b.ctx, store.NewTask{TaskKey: store.TaskKey{Name: name, Instance: instance}, ExecutionTime: at}, b.now)
	require.NoError(t, err)
	require.True(t, created)
}

func (b *taskBundle) claim(t *testing.T, node string, limit int, names ...string) []store.Task {
	t.Helper()
	ts, err := b.s.ClaimTasks(b.ctx, store.ClaimRequest{Names: names, Node: node, Limit: limit, Now: b.now})
	require.NoError(t, err)
	return ts
}

func (b *taskBundle) get(t *testing.T, name, instance string) store.Task {
	t.Helper()
	task, err := b.s.GetTask(b.ctx, store.TaskKey{Name: name, Instance: instance})
	require.NoError(t, err)
	return task
}

func exerciseScheduleAndClaim(t *testing.T, b *taskBundle) {
	b.schedule(t, "k", "due", b.now.Add(-time.Minute))
	b.schedule(t, "k", "later", b.now.Add(time.Hour))
	b.schedule(t, "other", "due", b.now)
	created, err := b.s.ScheduleTask(b.ctx, store.NewTask{TaskKey: store.TaskKey{Name: "k", Instance: "due"}, ExecutionTime: b.now.Add(-time.Hour)}, b.now)
	require.NoError(t, err)
	require.False(t, created, "an existing row is left alone")
	require.Equal(t, b.now.Add(-time.Minute), b.get(t, "k", "due").ExecutionTime)

	got := b.claim(t, "node-a", 10, "k")
	require.Len(t, got, 1, "only the due row of the asked kind")
	require.Equal(t, store.TaskKey{Name: "k", Instance: "due"}, got[0].TaskKey)
	require.True(t, got[0].Picked)
	require.Equal(t, "node-a", got[0].PickedBy)
	require.Equal(t, int64(2), got[0].Version)
	require.Equal(t, b.now, got[0].LastHeartbeat)
	require.Empty(t, b.claim(t, "node-b", 10, "k"), "a picked row is not claimed again")

	total, picked, err := b.s.CountTasks(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []int{3, 1}, []int{total, picked})

	require.NoError(t, b.s.CompleteTask(b.ctx, got[0], store.Completion{Action: store.CompleteDelete, Now: b.now}))
	_, err = b.s.GetTask(b.ctx, got[0].TaskKey)
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, b.s.CancelTask(b.ctx, store.TaskKey{Name: "k", Instance: "later"}))
	require.ErrorIs(t, b.s.CancelTask(b.ctx, store.TaskKey{Name: "k", Instance: "later"}), store.ErrNotFound)

	n, err := b.s.ScheduleTasks(b.ctx, []store.NewTask{
		{TaskKey: store.TaskKey{Name: "bulk", Instance: "1"}}, {TaskKey: store.TaskKey{Name: "bulk", Instance: "2"}},
		{TaskKey: store.TaskKey{Name: "other", Instance: "due"}},
	}, b.now)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Len(t, b.claim(t, "node-a", 10, "bulk", "other"), 3)

	_, err = b.s.ClaimTasks(b.ctx, store.ClaimRequest{Names: []string{"k"}, Node: "n", Limit: 0})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = b.s.ScheduleTask(b.ctx, store.NewTask{TaskKey: store.TaskKey{Name: "k"}}, b.now)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}

func exerciseUpsertCoalesces(t *testing.T, b *taskBundle) {
	key := store.TaskKey{Name: "commit-job", Instance: "7"}
	up := func(at time.Time, data string) bool {
		created, err := b.s.UpsertTask(b.ctx, store.NewTask{TaskKey: key, ExecutionTime: at, Data: []byte(data)}, b.now)
		require.NoError(t, err)
		return created
	}
	require.True(t, up(b.now.Add(time.Minute), "a"))
	require.False(t, up(b.now.Add(2*time.Minute), "b"))
	require.Equal(t, b.now.Add(time.Minute), b.get(t, key.Name, key.Instance).ExecutionTime, "a later upsert keeps the due time")
	require.False(t, up(b.now.Add(-time.Second), "c"))
	got := b.get(t, key.Name, key.Instance)
	require.Equal(t, b.now.Add(-time.Second), got.ExecutionTime, "an earlier upsert pulls the due time in")
	require.Equal(t, []byte("c"), got.Data)
	ts, err := b.s.ListTasks(b.ctx, key.Name, 10)
	require.NoError(t, err)
	require.Len(t, ts, 1)

	require.NoError(t, b.s.RescheduleTask(b.ctx, key, b.now.Add(time.Hour), nil))
	got = b.get(t, key.Name, key.Instance)
	require.Equal(t, b.now.Add(time.Hour), got.ExecutionTime)
	require.Equal(t, []byte("c"), got.Data, "nil data keeps the data")
	require.ErrorIs(t, b.s.RescheduleTask(b.ctx, store.TaskKey{Name: "x", Instance: "y"}, b.now, nil), store.ErrNotFound)
}

func exerciseUpsertWhilePicked(t *testing.T, b *taskBundle) {
	key := store.TaskKey{Name: "commit-job", Instance: "8"}
	b.schedule(t, key.Name, key.Instance, b.now)
	claims := b.claim(t, "node-a", 1, key.Name)
	require.Len(t, claims, 1)
	_, err := b.s.UpsertTask(b.ctx, store.NewTask{TaskKey: key, ExecutionTime: b.now.Add(time.Second)}, b.now)
	require.NoError(t, err)
	got := b.get(t, key.Name, key.Instance)
	require.True(t, got.Picked, "an upsert does not disturb the running claim")
	require.Equal(t, claims[0].Version, got.Version)
	require.Equal(t, b.now.Add(time.Second), got.RerunAt)

	require.NoError(t, b.s.CompleteTask(b.ctx, claims[0], store.Completion{Action: store.CompleteDelete, Now: b.now}))
	got = b.get(t, key.Name, key.Instance)
	require.False(t, got.Picked, "the upserted event gets its own run")
	require.Equal(t, b.now.Add(time.Second), got.ExecutionTime)
	require.True(t, got.RerunAt.IsZero())
	require.Equal(t, b.now, got.LastSuccess)
}

func exerciseConcurrentClaims(t *testing.T, b *taskBundle) {
	const n, workers = 300, 6
	ts := make([]store.NewTask, n)
	for i := range ts {
		ts[i] = store.NewTask{TaskKey: store.TaskKey{Name: "one-shot", Instance: fmt.Sprint(i)}}
	}
	created, err := b.s.ScheduleTasks(b.ctx, ts, b.now)
	require.NoError(t, err)
	require.Equal(t, n, created)

	var (
		mu   sync.Mutex
		seen = map[store.TaskKey]int{}
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for {
				got, err := b.s.ClaimTasks(b.ctx, store.ClaimRequest{Names: []string{"one-shot"}, Node: fmt.Sprint("node-", w), Limit: 7, Now: b.now})
				if !assertNoError(t, err) || len(got) == 0 {
					return
				}
				for _, c := range got {
					mu.Lock()
					seen[c.TaskKey]++
					mu.Unlock()
					assertNoError(t, b.s.CompleteTask(b.ctx, c, store.Completion{Action: store.CompleteDelete, Now: b.now}))
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, n)
	for k, c := range seen {
		require.Equal(t, 1, c, "task %s claimed %d times", k, c)
	}
	total, _, err := b.s.CountTasks(b.ctx)
	require.NoError(t, err)
	require.Zero(t, total)
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

func exerciseCompletionFenced(t *testing.T, b *taskBundle) {
	b.schedule(t, "k", "1", b.now)
	old := b.claim(t, "node-a", 1, "k")[0]
	revived, err := b.s.RescueTasks(b.ctx, b.now.Add(time.Second))
	require.NoError(t, err)
	require.Len(t, revived, 1)
	require.Equal(t, old.Version+1, revived[0].Version)
	fresh := b.claim(t, "node-b", 1, "k")[0]

	called := false
	err = b.s.CompleteTaskWith(b.ctx, old, store.Completion{Action: store.CompleteDelete}, func(ctx context.Context, tx store.TxWriter) error {
		called = true
		return nil
	})
	require.ErrorIs(t, err, store.ErrStaleFence)
	require.False(t, called, "a stale claim never reaches the handler's writes")
	for _, c := range []store.Completion{
		{Action: store.CompleteDelete}, {Action: store.CompleteRelease},
		{Action: store.CompleteReschedule, Next: b.now}, {Action: store.CompleteFailure, Next: b.now},
	} {
		require.ErrorIs(t, b.s.CompleteTask(b.ctx, old, c), store.ErrStaleFence, "action %d", c.Action)
	}
	got := b.get(t, "k", "1")
	require.Equal(t, "node-b", got.PickedBy)
	require.Equal(t, fresh.Version, got.Version)

	require.NoError(t, b.s.CompleteTaskWith(b.ctx, fresh, store.Completion{Action: store.CompleteDelete}, func(ctx context.Context, tx store.TxWriter) error {
		_, err := tx.ScheduleTask(ctx, store.NewTask{TaskKey: store.TaskKey{Name: "follow-up", Instance: "1"}}, b.now)
		return err
	}))
	b.get(t, "follow-up", "1")
	require.ErrorIs(t, b.s.CompleteTask(b.ctx, fresh, store.Completion{Action: store.CompleteDelete}), store.ErrStaleFence,
		"a second completion of the same claim is stale")

	b.schedule(t, "k", "2", b.now)
	c := b.claim(t, "node-a", 1, "k")[0]
	require.NoError(t, b.s.CancelTask(b.ctx, c.TaskKey))
	require.ErrorIs(t, b.s.CompleteTask(b.ctx, c, store.Completion{Action: store.CompleteDelete}), store.ErrStaleFence)
}

func exerciseCompleteWithRollback(t *testing.T, b *taskBundle) {
	b.schedule(t, "k", "1", b.now)
	c := b.claim(t, "node-a", 1, "k")[0]
	boom := errors.New("boom")
	err := b.s.CompleteTaskWith(b.ctx, c, store.Completion{Action: store.CompleteDelete}, func(ctx context.Context, tx store.TxWriter) error {
		if _, err := tx.ScheduleTask(ctx, store.NewTask{TaskKey: store.TaskKey{Name: "follow-up", Instance: "1"}}, b.now); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	got := b.get(t, "k", "1")
	require.True(t, got.Picked, "the completion rolled back with the handler's error")
	_, err = b.s.GetTask(b.ctx, store.TaskKey{Name: "follow-up", Instance: "1"})
	require.ErrorIs(t, err, store.ErrNotFound, "the handler's write rolled back")
	require.NoError(t, b.s.CompleteTask(b.ctx, c, store.Completion{Action: store.CompleteRelease}))
	got = b.get(t, "k", "1")
	require.False(t, got.Picked)
	require.Equal(t, b.now, got.ExecutionTime)
}

func exerciseBatchCompletion(t *testing.T, b *taskBundle) {
	for i := range 4 {
		b.schedule(t, "k", fmt.Sprint(i), b.now)
	}
	claims := b.claim(t, "node-a", 4, "k")
	require.Len(t, claims, 4)
	require.NoError(t, b.s.CancelTask(b.ctx, claims[0].TaskKey))
	_, err := b.s.UpsertTask(b.ctx, store.NewTask{TaskKey: claims[1].TaskKey, ExecutionTime: b.now.Add(time.Minute)}, b.now)
	require.NoError(t, err)
	stale, err := b.s.CompleteTasks(b.ctx, claims, b.now)
	require.NoError(t, err)
	require.Equal(t, []store.TaskKey{claims[0].TaskKey}, stale, "only the cancelled claim is stale")
	ts, err := b.s.ListTasks(b.ctx, "k", 10)
	require.NoError(t, err)
	require.Len(t, ts, 1, "completed rows are gone, except the one an upsert asked to run again")
	require.Equal(t, claims[1].TaskKey, ts[0].TaskKey)
	require.False(t, ts[0].Picked)
	require.Equal(t, b.now.Add(time.Minute), ts[0].ExecutionTime)
	stale, err = b.s.CompleteTasks(b.ctx, claims[2:], b.now)
	require.NoError(t, err)
	require.Len(t, stale, 2, "a claim completes once")
}

func exerciseCompleteAndClaim(t *testing.T, b *taskBundle) {
	for i := range 6 {
		b.schedule(t, "k", fmt.Sprint(i), b.now)
	}
	b.schedule(t, "other", "1", b.now)
	first := b.claim(t, "node-a", 3, "k")
	require.Len(t, first, 3)
	require.NoError(t, b.s.CancelTask(b.ctx, first[0].TaskKey))
	_, err := b.s.UpsertTask(b.ctx, store.NewTask{TaskKey: first[1].TaskKey, ExecutionTime: b.now.Add(time.Minute)}, b.now)
	require.NoError(t, err)

	later := b.now.Add(time.Second)
	next, stale, err := b.s.CompleteAndClaim(b.ctx, first, later, store.ClaimRequest{Names: []string{"k"}, Node: "node-a", Limit: 10, Now: later})
	require.NoError(t, err)
	require.Equal(t, []store.TaskKey{first[0].TaskKey}, stale, "only the cancelled claim is stale")
	require.Len(t, next, 3, "the other due rows of the kind, not the completed ones")
	done := map[store.TaskKey]bool{}
	for _, c := range first {
		done[c.TaskKey] = true
	}
	for _, c := range next {
		require.False(t, done[c.TaskKey], "completed row %s claimed again", c.TaskKey)
		require.True(t, c.Picked)
		require.Equal(t, "node-a", c.PickedBy)
		require.Equal(t, int64(2), c.Version)
		require.Equal(t, later, c.LastHeartbeat)
	}
	_, err = b.s.GetTask(b.ctx, first[2].TaskKey)
	require.ErrorIs(t, err, store.ErrNotFound, "the completed row is gone")
	rerun := b.get(t, "k", first[1].Instance)
	require.False(t, rerun.Picked, "the row an upsert asked to run again is back, unpicked")
	require.Equal(t, b.now.Add(time.Minute), rerun.ExecutionTime)
	require.Equal(t, later, rerun.LastSuccess)
	require.False(t, b.get(t, "other", "1").Picked, "other kinds are not claimed")

	// Limit zero only completes.
	claimed, stale, err := b.s.CompleteAndClaim(b.ctx, next, later, store.ClaimRequest{})
	require.NoError(t, err)
	require.Empty(t, claimed)
	require.Empty(t, stale)
	ts, err := b.s.ListTasks(b.ctx, "k", 10)
	require.NoError(t, err)
	require.Len(t, ts, 1, "only the rerun row is left")

	// A stale batch changes nothing, also not the claim's rows.
	claimed, stale, err = b.s.CompleteAndClaim(b.ctx, next, later, store.ClaimRequest{Names: []string{"other"}, Node: "node-b", Limit: 1, Now: later})
	require.NoError(t, err)
	require.Len(t, stale, 3, "a claim completes once")
	require.Len(t, claimed, 1)
	require.Equal(t, "node-b", b.get(t, "other", "1").PickedBy)

	_, _, err = b.s.CompleteAndClaim(b.ctx, nil, later, store.ClaimRequest{})
	require.ErrorIs(t, err, store.ErrInvalidArgument, "nothing to complete and nothing to claim")
	_, _, err = b.s.CompleteAndClaim(b.ctx, next, later, store.ClaimRequest{Names: []string{"k"}, Limit: 1})
	require.ErrorIs(t, err, store.ErrInvalidArgument, "a claim needs its node")
}

// exerciseConcurrentCompleteAndClaim drains rows with workers that each
// complete their previous batch in the statement that claims the next one,
// as the engine's pools do: every row is claimed once, no completion is
// stale, and no statement deadlocks with another.
func exerciseConcurrentCompleteAndClaim(t *testing.T, b *taskBundle) {
	const n, workers = 400, 6
	ts := make([]store.NewTask, n)
	for i := range ts {
		ts[i] = store.NewTask{TaskKey: store.TaskKey{Name: "one-shot", Instance: fmt.Sprint(i)}}
	}
	created, err := b.s.ScheduleTasks(b.ctx, ts, b.now)
	require.NoError(t, err)
	require.Equal(t, n, created)

	var (
		mu   sync.Mutex
		seen = map[store.TaskKey]int{}
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			var held []store.Task
			for {
				r := store.ClaimRequest{Names: []string{"one-shot"}, Node: fmt.Sprint("node-", w), Limit: 5, Now: b.now}
				got, stale, err := b.s.CompleteAndClaim(b.ctx, held, b.now, r)
				if !assertNoError(t, err) {
					return
				}
				if len(stale) > 0 {
					t.Errorf("worker %d: completions of held claims were stale: %v", w, stale)
					return
				}
				mu.Lock()
				for _, c := range got {
					seen[c.TaskKey]++
				}
				mu.Unlock()
				if len(got) == 0 && len(held) == 0 {
					return
				}
				held = got
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, n)
	for k, c := range seen {
		require.Equal(t, 1, c, "task %s claimed %d times", k, c)
	}
	total, _, err := b.s.CountTasks(b.ctx)
	require.NoError(t, err)
	require.Zero(t, total)
}

func exerciseRescheduleAndFailure(t *testing.T, b *taskBundle) {
	b.schedule(t, "cron", "p1", b.now)
	c := b.claim(t, "node-a", 1, "cron")[0]
	next := b.now.Add(time.Minute)
	require.NoError(t, b.s.CompleteTask(b.ctx, c, store.Completion{Action: store.CompleteFailure, Next: next, Now: b.now}))
	got := b.get(t, "cron", "p1")
	require.False(t, got.Picked)
	require.Equal(t, 1, got.ConsecutiveFailures)
	require.Equal(t, b.now, got.LastFailure)
	require.Equal(t, next, got.ExecutionTime)

	b.now = next
	c = b.claim(t, "node-a", 1, "cron")[0]
	require.NoError(t, b.s.CompleteTask(b.ctx, c, store.Completion{Action: store.CompleteReschedule, Next: next.Add(time.Hour), Data: []byte("d"), Now: next}))
	got = b.get(t, "cron", "p1")
	require.Zero(t, got.ConsecutiveFailures)
	require.Equal(t, next, got.LastSuccess)
	require.Equal(t, next.Add(time.Hour), got.ExecutionTime)
	require.Equal(t, []byte("d"), got.Data)
	require.ErrorIs(t, b.s.CompleteTask(b.ctx, c, store.Completion{Action: store.CompleteFailure}), store.ErrInvalidArgument)
}

func exerciseHeartbeatAndRescue(t *testing.T, b *taskBundle) {
	for i := range 3 {
		b.schedule(t, "k", fmt.Sprint(i), b.now)
	}
	claims := b.claim(t, "node-a", 3, "k")
	require.Len(t, claims, 3)
	require.NoError(t, b.s.CancelTask(b.ctx, claims[2].TaskKey))

	later := b.now.Add(time.Minute)
	lost, err := b.s.HeartbeatTasks(b.ctx, "node-a", claims, later)
	require.NoError(t, err)
	require.Equal(t, []store.TaskKey{claims[2].TaskKey}, lost)
	require.Equal(t, later, b.get(t, "k", claims[0].Instance).LastHeartbeat)
	lost, err = b.s.HeartbeatTasks(b.ctx, "node-b", claims[:1], later)
	require.NoError(t, err)
	require.Len(t, lost, 1, "another node cannot heartbeat a claim it does not hold")

	revived, err := b.s.RescueTasks(b.ctx, later)
	require.NoError(t, err)
	require.Empty(t, revived, "fresh heartbeats are not rescued")
	revived, err = b.s.RescueTasks(b.ctx, later.Add(time.Second))
	require.NoError(t, err)
	require.Len(t, revived, 2)
	lost, err = b.s.HeartbeatTasks(b.ctx, "node-a", claims[:2], later)
	require.NoError(t, err)
	require.Len(t, lost, 2, "a rescued claim is lost to its old holder")
	require.Len(t, b.claim(t, "node-b", 5, "k"), 2, "rescued rows are due again")
}

func exerciseConcurrentRescue(t *testing.T, b *taskBundle) {
	const n = 50
	ts := make([]store.NewTask, n)
	for i := range ts {
		ts[i] = store.NewTask{TaskKey: store.TaskKey{Name: "k", Instance: fmt.Sprint(i)}}
	}
	_, err := b.s.ScheduleTasks(b.ctx, ts, b.now)
	require.NoError(t, err)
	require.Len(t, b.claim(t, "dead", n, "k"), n)
	var (
		mu    sync.Mutex
		total int
		wg    sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			got, err := b.s.RescueTasks(b.ctx, b.now.Add(time.Hour))
			assertNoError(t, err)
			mu.Lock()
			total += len(got)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, n, total, "every row revived exactly once across concurrent rescuers")
}

func exerciseNodes(t *testing.T, b *taskBundle) {
	require.NoError(t, b.s.RegisterNode(b.ctx, "node-a", b.now))
	require.NoError(t, b.s.HeartbeatNode(b.ctx, "node-a", b.now.Add(time.Second)))
	require.ErrorIs(t, b.s.HeartbeatNode(b.ctx, "node-x", b.now), store.ErrNotFound)
	ns, err := b.s.ListNodes(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []store.Node{{ID: "node-a", StartedAt: b.now, LastHeartbeat: b.now.Add(time.Second)}}, ns)
	require.NoError(t, b.s.SetNodeCatalogs(b.ctx, "node-a", []string{"prod", "lake"}))
	require.ErrorIs(t, b.s.SetNodeCatalogs(b.ctx, "node-x", nil), store.ErrNotFound)
	ns, err = b.s.ListNodes(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"lake", "prod"}, ns[0].Catalogs)
	require.NoError(t, b.s.RegisterNode(b.ctx, "node-a", b.now.Add(time.Minute)))
	ns, err = b.s.ListNodes(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"lake", "prod"}, ns[0].Catalogs, "a restart under the same id keeps them until serve sets them again")
	require.NoError(t, b.s.SetNodeCatalogs(b.ctx, "node-a", nil))
	ns, err = b.s.ListNodes(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{}, ns[0].Catalogs, "none configured is not unknown")
	require.NoError(t, b.s.RemoveNode(b.ctx, "node-a"))
	require.NoError(t, b.s.RemoveNode(b.ctx, "node-a"))
	ns, err = b.s.ListNodes(b.ctx)
	require.NoError(t, err)
	require.Empty(t, ns)
}

// A row deferred because its table had a job in flight (WaitFor the
// table's key) is made due by the finish of that table's job row, and by
// nothing else: another table's finish, a fenced-out finish.
func exerciseWaitForTable(t *testing.T, b *taskBundle) {
	var tables []store.Table
	for _, name := range []string{"a", "b"} {
		tbl, err := b.st.RegisterTable(b.ctx, store.TableRef{Catalog: "c", Namespace: "ns", Name: name, UUID: "u-" + name})
		require.NoError(t, err)
		tables = append(tables, tbl)
	}
	var jobs []store.Job
	for _, tbl := range tables {
		j, err := b.st.CreateJob(b.ctx, store.NewJob{TableID: tbl.ID, PolicyID: 1, Types: []string{"compaction"}, Trigger: store.TriggerCron})
		require.NoError(t, err)
		jobs = append(jobs, j)
	}
	fallback := b.now.Add(time.Hour)
	b.schedule(t, "cron-job", "waits", b.now)
	b.schedule(t, "cron-job", "plain", b.now)
	claims := b.claim(t, "n1", 2, "cron-job")
	require.Len(t, claims, 2)
	for _, c := range claims {
		wait := ""
		if c.Instance == "waits" {
			wait = store.TableWaitKey(tables[0].ID)
		}
		require.NoError(t, b.s.CompleteTask(b.ctx, c, store.Completion{Action: store.CompleteReschedule, Next: fallback, WaitFor: wait, Now: b.now}))
	}

	finish := func(j store.Job, fence int64, at time.Time) error {
		return b.st.FinishJob(b.ctx, j.ID, fence, store.Finish{Status: store.StatusSucceeded, At: at})
	}
	require.NoError(t, finish(jobs[1], jobs[1].Fence, b.now.Add(time.Minute)))
	require.ErrorIs(t, finish(jobs[0], jobs[0].Fence+1, b.now.Add(time.Minute)), store.ErrStaleFence)
	for _, inst := range []string{"waits", "plain"} {
		require.Equal(t, fallback, b.get(t, "cron-job", inst).ExecutionTime, "%s: nothing it waits for finished", inst)
	}

	at := b.now.Add(2 * time.Minute)
	require.NoError(t, finish(jobs[0], jobs[0].Fence, at))
	require.Equal(t, at, b.get(t, "cron-job", "waits").ExecutionTime, "its table's job finished: due at once")
	require.Equal(t, fallback, b.get(t, "cron-job", "plain").ExecutionTime, "a row that waits for nothing keeps its time")

	// The wait was used up: the table's next job finishing later does not
	// move the row again.
	require.NoError(t, b.s.RescheduleTask(b.ctx, store.TaskKey{Name: "cron-job", Instance: "waits"}, fallback, nil))
	j, err := b.st.CreateJob(b.ctx, store.NewJob{TableID: tables[0].ID, PolicyID: 2, Types: []string{"compaction"}, Trigger: store.TriggerCron})
	require.NoError(t, err)
	require.NoError(t, finish(j, j.Fence, b.now.Add(3*time.Minute)))
	require.Equal(t, fallback, b.get(t, "cron-job", "waits").ExecutionTime)
}

// A job row created in a guarded completion (the flow's path) records its
// node and obeys the one-in-flight-per-table index like CreateJob.
func exerciseCompleteWithJobNode(t *testing.T, b *taskBundle) {
	tbl, err := b.st.RegisterTable(b.ctx, store.TableRef{Catalog: "c", Namespace: "ns", Name: "t", UUID: "u"})
	require.NoError(t, err)
	b.schedule(t, "cron-job", "a", b.now)
	b.schedule(t, "cron-job", "b", b.now)
	claims := b.claim(t, "node-7", 2, "cron-job")
	require.Len(t, claims, 2)
	var j store.Job
	require.NoError(t, b.s.CompleteTaskWith(b.ctx, claims[0], store.Completion{Action: store.CompleteDelete, Now: b.now},
		func(ctx context.Context, tx store.TxWriter) error {
			j, err = tx.CreateJob(ctx, store.NewJob{TableID: tbl.ID, PolicyID: 1, Types: []string{"compaction"}, Trigger: store.TriggerCron, Node: "node-7"})
			return err
		}))
	require.Equal(t, "node-7", j.Node)
	got, err := b.st.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, "node-7", got.Node)
	err = b.s.CompleteTaskWith(b.ctx, claims[1], store.Completion{Action: store.CompleteDelete, Now: b.now},
		func(ctx context.Context, tx store.TxWriter) error {
			_, err := tx.CreateJob(ctx, store.NewJob{TableID: tbl.ID, PolicyID: 2, Types: []string{"snapshot-expiry"}, Trigger: store.TriggerCron, Node: "node-7"})
			return err
		})
	require.ErrorIs(t, err, store.ErrInFlight)
	require.Equal(t, "b", b.get(t, "cron-job", "b").Instance, "the losing completion wrote nothing: its row stays")
}
