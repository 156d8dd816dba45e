package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// exerciseEnqueueTablesForPolicy walks a policy's tables with
// TxWriter.EnqueueTablesForPolicy inside guarded completions, moving the
// walker row with MoveCompleted as the coordinator's policy-expand does:
// the rows it creates are exactly one per table TablesForPolicy walks, a
// second walk creates none, and MoveCompleted refuses a deleted row.
func exerciseEnqueueTablesForPolicy(t *testing.T, b *policyBundle) {
	wide, want := b.enqueueFixture(t)

	now := time.Now().UTC().Truncate(time.Millisecond)
	walker := store.TaskKey{Name: "walker", Instance: "1"}
	_, err := b.s.ScheduleTask(b.ctx, store.NewTask{TaskKey: walker, ExecutionTime: now}, now)
	require.NoError(t, err)
	walk := func() (created int) {
		after := int64(0)
		for range 100 {
			claims, err := b.s.ClaimTasks(b.ctx, store.ClaimRequest{Names: []string{"walker"}, Node: "n", Limit: 1, Now: now})
			require.NoError(t, err)
			require.Len(t, claims, 1)
			var next int64
			require.NoError(t, b.s.CompleteTaskWith(b.ctx, claims[0], store.Completion{Action: store.CompleteReschedule, Next: now, Now: now},
				func(ctx context.Context, tx store.TxWriter) error {
					n, nx, err := tx.EnqueueTablesForPolicy(ctx, store.PolicyEnqueue{PolicyID: wide.ID, After: after, Limit: 4,
						TaskName: "cron-job", InstancePrefix: "table:", InstanceSuffix: fmt.Sprintf(":%d", wide.ID), At: now})
					created += n
					next = nx
					if err != nil {
						return err
					}
					return tx.MoveCompleted(ctx, now, []byte(fmt.Sprint(nx)))
				}))
			got, err := b.s.GetTask(b.ctx, walker)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprint(next), string(got.Data), "MoveCompleted stored the cursor")
			if next == 0 {
				return created
			}
			require.Greater(t, next, after)
			after = next
		}
		t.Fatal("the walk did not end")
		return 0
	}
	require.Equal(t, 11, walk())
	rows, err := b.s.ListTasks(b.ctx, "cron-job", 100)
	require.NoError(t, err)
	var got []string
	for _, r := range rows {
		got = append(got, r.Instance)
		require.Equal(t, now, r.ExecutionTime.UTC().Truncate(time.Millisecond))
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got)
	require.Zero(t, walk(), "a second walk finds every row there")

	// MoveCompleted: a later time moves the row; it is refused after a delete.
	claims, err := b.s.ClaimTasks(b.ctx, store.ClaimRequest{Names: []string{"walker"}, Node: "n", Limit: 1, Now: now})
	require.NoError(t, err)
	later := now.Add(time.Hour)
	require.NoError(t, b.s.CompleteTaskWith(b.ctx, claims[0], store.Completion{Action: store.CompleteReschedule, Next: now, Now: now},
		func(ctx context.Context, tx store.TxWriter) error { return tx.MoveCompleted(ctx, later, nil) }))
	got2, err := b.s.GetTask(b.ctx, walker)
	require.NoError(t, err)
	require.Equal(t, later, got2.ExecutionTime.UTC().Truncate(time.Millisecond))
	require.Equal(t, "0", string(got2.Data), "nil data keeps the data")
	claims, err = b.s.ClaimTasks(b.ctx, store.ClaimRequest{Names: []string{"walker"}, Node: "n", Limit: 1, Now: later})
	require.NoError(t, err)
	err = b.s.CompleteTaskWith(b.ctx, claims[0], store.Completion{Action: store.CompleteDelete, Now: later},
		func(ctx context.Context, tx store.TxWriter) error { return tx.MoveCompleted(ctx, later, nil) })
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = b.s.GetTask(b.ctx, walker)
	require.NoError(t, err, "the failed transaction deleted nothing")
}

// enqueueFixture attaches policy "wide" to catalog cat, where 12 tables
// live and t3 is pinned to another policy, registers a table elsewhere,
// and returns wide with the cron-job instances a walk of it must create.
func (b *policyBundle) enqueueFixture(t *testing.T) (store.Policy, []string) {
	t.Helper()
	wide := b.create(t, "wide", typeCompaction, `{}`)
	b.create(t, "pinned", typeCompaction, `{}`)
	b.attach(t, "wide", catalogObj("cat"))
	b.attach(t, "pinned", tableObj("cat", "db", "t3"))
	for i := range 12 {
		b.register(t, "cat", "db", fmt.Sprintf("t%d", i))
	}
	b.register(t, "other", "db", "x")
	var want []string
	for _, tbl := range b.walk(t, wide.ID, 5) {
		want = append(want, fmt.Sprintf("table:%d:%d", tbl.ID, wide.ID))
	}
	require.Len(t, want, 11, "t3 is pinned to another policy, x is in another catalog")
	return wide, want
}
