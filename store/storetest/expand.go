package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// exerciseCompleteExpand walks a policy's tables with
// Expander.CompleteExpand as the coordinator's policy-expand does: one row
// per table TablesForPolicy walks, the cursor in the row's data, the row
// due at once while tables remain and at the done time after the last
// batch (or at an earlier rerun time an upsert asked for); a stale claim
// inserts nothing; bad data is refused.
func exerciseCompleteExpand(t *testing.T, b *policyBundle) {
	wide, want := b.enqueueFixture(t)

	now := time.Now().UTC().Truncate(time.Millisecond)
	done := now.Add(time.Hour)
	walker := store.TaskKey{Name: "walker", Instance: "1"}
	_, err := b.s.ScheduleTask(b.ctx, store.NewTask{TaskKey: walker, ExecutionTime: now}, now)
	require.NoError(t, err)
	enqueue := func(after int64) store.PolicyEnqueue {
		return store.PolicyEnqueue{PolicyID: wide.ID, After: after, Limit: 4, TaskName: "cron-job",
			InstancePrefix: "table:", InstanceSuffix: fmt.Sprintf(":%d", wide.ID), At: now}
	}
	move := store.ExpandMove{Now: now, Done: done, Data: []byte(`{"crontab": "@hourly", "cursor": 99}`)}
	claim := func(at time.Time) store.Task {
		claims, err := b.s.ClaimTasks(b.ctx, store.ClaimRequest{Names: []string{"walker"}, Node: "n", Limit: 1, Now: at})
		require.NoError(t, err)
		require.Len(t, claims, 1)
		return claims[0]
	}
	walk := func(at time.Time) (created int) {
		after := int64(0)
		for range 100 {
			n, next, err := b.s.CompleteExpand(b.ctx, claim(at), enqueue(after), move)
			require.NoError(t, err)
			created += n
			got, err := b.s.GetTask(b.ctx, walker)
			require.NoError(t, err)
			var data struct {
				Crontab string `json:"crontab"`
				Cursor  int64  `json:"cursor"`
			}
			require.NoError(t, json.Unmarshal(got.Data, &data))
			require.Equal(t, next, data.Cursor, "the row's data holds the cursor")
			require.Equal(t, "@hourly", data.Crontab, "the rest of the data is kept")
			require.False(t, got.Picked)
			if next == 0 {
				require.Equal(t, done, got.ExecutionTime.UTC().Truncate(time.Millisecond), "the instant is over")
				return created
			}
			require.Equal(t, now, got.ExecutionTime.UTC().Truncate(time.Millisecond), "more tables: due at once")
			require.Greater(t, next, after)
			after = next
		}
		t.Fatal("the walk did not end")
		return 0
	}
	require.Equal(t, 11, walk(now))
	rows, err := b.s.ListTasks(b.ctx, "cron-job", 100)
	require.NoError(t, err)
	var got []string
	for _, r := range rows {
		got = append(got, r.Instance)
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got)
	require.Zero(t, walk(done), "a second walk finds every row there")

	// A rerun time asked for while the row was picked wins over done.
	c := claim(done)
	rerun := done.Add(time.Minute)
	require.NoError(t, b.s.RescheduleTask(b.ctx, walker, rerun, nil))
	_, next, err := b.s.CompleteExpand(b.ctx, c, enqueue(want2id(t, want)), store.ExpandMove{Now: done, Done: done.Add(time.Hour), Data: move.Data})
	require.NoError(t, err)
	require.Zero(t, next)
	row, err := b.s.GetTask(b.ctx, walker)
	require.NoError(t, err)
	require.Equal(t, rerun, row.ExecutionTime.UTC().Truncate(time.Millisecond))

	// A stale claim writes nothing, not even the batch.
	c = claim(rerun)
	require.NoError(t, b.s.CancelTask(b.ctx, walker))
	b.register(t, "cat", "db", "late")
	_, _, err = b.s.CompleteExpand(b.ctx, c, enqueue(0), move)
	require.ErrorIs(t, err, store.ErrStaleFence)
	rows, err = b.s.ListTasks(b.ctx, "cron-job", 100)
	require.NoError(t, err)
	require.Len(t, rows, 11, "nothing enqueued for the late table")

	// Bad input is refused before anything is written.
	_, _, err = b.s.CompleteExpand(b.ctx, c, enqueue(0), store.ExpandMove{Now: now, Done: done, Data: []byte(`[1]`)})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	_, _, err = b.s.CompleteExpand(b.ctx, c, enqueue(0), store.ExpandMove{Now: now, Data: move.Data})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}

// want2id returns the highest table id among cron-job instances.
func want2id(t *testing.T, instances []string) int64 {
	t.Helper()
	var top int64
	for _, s := range instances {
		var id, p int64
		_, err := fmt.Sscanf(s, "table:%d:%d", &id, &p)
		require.NoError(t, err)
		top = max(top, id)
	}
	return top
}
