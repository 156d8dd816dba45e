package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// exerciseLedgerQueries runs the conformance tests of store.LedgerQueries
// (the HTTP API's job filter and table list). open is as for Exercise.
func exerciseLedgerQueries(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	setup := func(t *testing.T) (*bundle, store.LedgerQueries) {
		t.Helper()
		b := &bundle{s: open(t), ctx: t.Context()}
		return b, b.s
	}
	t.Run("QueryJobs", func(t *testing.T) {
		t.Parallel()
		b, q := setup(t)
		exerciseQueryJobs(t, b, q)
	})
	t.Run("ListTableStatus", func(t *testing.T) {
		t.Parallel()
		b, q := setup(t)
		exerciseListTableStatus(t, b, q)
	})
}

func jobIDs(jobs []store.Job) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

func exerciseQueryJobs(t *testing.T, b *bundle, q store.LedgerQueries) {
	ta, tb := b.table(t, "a"), b.table(t, "b")
	a1 := b.job(t, ta.ID, 1)
	require.NoError(t, b.s.FinishJob(b.ctx, a1.ID, a1.Fence, store.Finish{Status: store.StatusSucceeded}))
	a2 := b.job(t, ta.ID, 1)
	require.NoError(t, b.s.FinishJob(b.ctx, a2.ID, a2.Fence, store.Finish{Status: store.StatusFailed, Error: "boom"}))
	a3 := b.job(t, ta.ID, 1) // pending
	b1 := b.job(t, tb.ID, 1)
	require.NoError(t, b.s.StartJob(b.ctx, b1.ID, b1.Fence, time.Time{}))
	query := func(jq store.JobQuery) []int64 {
		t.Helper()
		if jq.Limit == 0 {
			jq.Limit = 100
		}
		jobs, err := q.QueryJobs(b.ctx, jq)
		require.NoError(t, err)
		return jobIDs(jobs)
	}

	require.Equal(t, []int64{b1.ID, a3.ID, a2.ID, a1.ID}, query(store.JobQuery{}), "newest first")
	require.Equal(t, []int64{a3.ID, a2.ID, a1.ID}, query(store.JobQuery{TableID: ta.ID}))
	require.Equal(t, []int64{b1.ID, a3.ID}, query(store.JobQuery{Statuses: []store.JobStatus{store.StatusPending, store.StatusRunning}}))
	require.Equal(t, []int64{a2.ID}, query(store.JobQuery{TableID: ta.ID, Statuses: []store.JobStatus{store.StatusFailed}}))
	yes, no := true, false
	require.Equal(t, []int64{b1.ID, a3.ID}, query(store.JobQuery{InFlight: &yes}))
	require.Equal(t, []int64{a2.ID, a1.ID}, query(store.JobQuery{InFlight: &no}))
	require.Equal(t, []int64{a2.ID, a1.ID}, query(store.JobQuery{BeforeID: a3.ID}), "paging by cursor")
	jobs, err := q.QueryJobs(b.ctx, store.JobQuery{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{b1.ID, a3.ID}, jobIDs(jobs))
	require.Empty(t, query(store.JobQuery{TableID: 1 << 40}))

	// Time window on created_at: every row was created just now.
	now := b.get(t, a1.ID).CreatedAt
	require.Len(t, query(store.JobQuery{Since: now.Add(-time.Hour)}), 4)
	require.Empty(t, query(store.JobQuery{Since: now.Add(time.Hour)}))
	require.Empty(t, query(store.JobQuery{Until: now.Add(-time.Hour)}))
	require.Len(t, query(store.JobQuery{Since: now.Add(-time.Hour), Until: now.Add(time.Hour)}), 4)

	for _, bad := range []store.JobQuery{
		{Limit: 0}, {Limit: store.MaxQueryLimit + 1},
		{Limit: 10, Statuses: []store.JobStatus{"exploded"}},
		{Limit: 10, Since: now, Until: now},
	} {
		_, err := q.QueryJobs(b.ctx, bad)
		require.ErrorIs(t, err, store.ErrInvalidArgument, "%+v", bad)
	}
}

func exerciseListTableStatus(t *testing.T, b *bundle, q store.LedgerQueries) {
	empty, err := q.ListTableStatus(b.ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, empty)

	ta, tb, tc := b.table(t, "a"), b.table(t, "b"), b.table(t, "c")
	old := b.job(t, ta.ID, 1)
	require.NoError(t, b.s.FinishJob(b.ctx, old.ID, old.Fence, store.Finish{Status: store.StatusSucceeded}))
	newest := b.job(t, ta.ID, 1)
	cj := b.job(t, tc.ID, 2)
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i, m := range []store.SnapshotMetrics{
		{TableID: ta.ID, PolicyID: 1, SnapshotID: 10, Value: []byte(`{"file-number": 10}`), RecordedAt: base},
		{TableID: ta.ID, PolicyID: 1, SnapshotID: 11, Value: []byte(`{"file-number": 3}`), RecordedAt: base.Add(time.Hour)},
		{TableID: tb.ID, PolicyID: 0, SnapshotID: 5, Value: []byte(`{"file-number": 7}`), RecordedAt: base},
	} {
		require.NoError(t, b.s.UpsertSnapshotMetrics(b.ctx, m), i)
	}

	page, err := q.ListTableStatus(b.ctx, 0, 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	tables, err := q.ListTables(b.ctx, 0, 2)
	require.NoError(t, err)
	require.Equal(t, []store.Table{ta, tb}, tables, "ListTables: the same page, without jobs and metrics")
	tables, err = q.ListTables(b.ctx, tb.ID, 10)
	require.NoError(t, err)
	require.Equal(t, []store.Table{tc}, tables)
	_, err = q.ListTables(b.ctx, 0, 0)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	require.Equal(t, ta, page[0].Table)
	require.Equal(t, newest.ID, page[0].LastJob.ID, "the newest row, not the finished one")
	require.Equal(t, int64(11), page[0].Metrics.SnapshotID, "the latest recorded metrics")
	require.JSONEq(t, `{"file-number": 3}`, string(page[0].Metrics.Value))
	require.Equal(t, tb.ID, page[1].ID)
	require.Nil(t, page[1].LastJob)
	require.Equal(t, int64(5), page[1].Metrics.SnapshotID)

	page, err = q.ListTableStatus(b.ctx, page[1].ID, 2)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, tc.ID, page[0].ID)
	require.Equal(t, cj.ID, page[0].LastJob.ID)
	require.Nil(t, page[0].Metrics)

	_, err = q.ListTableStatus(b.ctx, 0, 0)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}
