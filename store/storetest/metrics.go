package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

func exerciseMetrics(t *testing.T, setup func(*testing.T) *bundle) {
	t.Run("UpsertReplaces", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "t")
		at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
		m := store.SnapshotMetrics{
			TableID: tbl.ID, PolicyID: 3, SnapshotID: 77,
			Value: json.RawMessage(`{"dataFileMse": 12.5, "deleteFileNumber": 3}`), RecordedAt: at,
		}
		require.NoError(t, b.s.UpsertSnapshotMetrics(b.ctx, m))
		got, err := b.s.ListSnapshotMetrics(b.ctx, tbl.ID)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.JSONEq(t, string(m.Value), string(got[0].Value))
		require.Equal(t, at, got[0].RecordedAt)
		require.Equal(t, [3]int64{tbl.ID, 3, 77}, [3]int64{got[0].TableID, got[0].PolicyID, got[0].SnapshotID})

		m.Value = json.RawMessage(`{"dataFileMse": 1.0}`)
		m.RecordedAt = at.Add(time.Hour)
		require.NoError(t, b.s.UpsertSnapshotMetrics(b.ctx, m))
		got, err = b.s.ListSnapshotMetrics(b.ctx, tbl.ID)
		require.NoError(t, err)
		require.Len(t, got, 1, "same (table, policy, snapshot) replaces")
		require.JSONEq(t, `{"dataFileMse": 1.0}`, string(got[0].Value))
		require.Equal(t, at.Add(time.Hour), got[0].RecordedAt)
	})

	t.Run("KeyedByTablePolicySnapshot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl, other := b.table(t, "t"), b.table(t, "other")
		base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		// Inserted out of order: the list comes back oldest first.
		for _, m := range []store.SnapshotMetrics{
			{TableID: tbl.ID, PolicyID: 1, SnapshotID: 30, Value: json.RawMessage(`{"n":3}`), RecordedAt: base.Add(3 * time.Minute)},
			{TableID: tbl.ID, PolicyID: 1, SnapshotID: 10, Value: json.RawMessage(`{"n":1}`), RecordedAt: base.Add(1 * time.Minute)},
			{TableID: tbl.ID, PolicyID: 2, SnapshotID: 10, Value: json.RawMessage(`{"n":2}`), RecordedAt: base.Add(2 * time.Minute)},
			{TableID: tbl.ID, PolicyID: store.NoPolicy, SnapshotID: 40, Value: json.RawMessage(`{"n":4}`), RecordedAt: base.Add(4 * time.Minute)},
			{TableID: other.ID, PolicyID: 1, SnapshotID: 10, Value: json.RawMessage(`{"n":0}`), RecordedAt: base},
		} {
			require.NoError(t, b.s.UpsertSnapshotMetrics(b.ctx, m))
		}
		got, err := b.s.ListSnapshotMetrics(b.ctx, tbl.ID)
		require.NoError(t, err)
		require.Len(t, got, 4)
		for i, m := range got {
			require.JSONEq(t, `{"n":`+string(rune('1'+i))+`}`, string(m.Value))
			require.Equal(t, tbl.ID, m.TableID)
		}

		got, err = b.s.ListSnapshotMetrics(b.ctx, tbl.ID+1000)
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("ZeroRecordedAtMeansNow", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "t")
		before := time.Now().Add(-time.Second)
		require.NoError(t, b.s.UpsertSnapshotMetrics(b.ctx, store.SnapshotMetrics{TableID: tbl.ID, SnapshotID: 1, Value: json.RawMessage(`{}`)}))
		got, err := b.s.ListSnapshotMetrics(b.ctx, tbl.ID)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.WithinRange(t, got[0].RecordedAt, before, time.Now().Add(time.Second))
		require.Equal(t, time.UTC, got[0].RecordedAt.Location())
	})

	t.Run("RejectsBadValues", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tbl := b.table(t, "t")
		for _, v := range []string{``, `{"a":`, `not json`, `[1,2]`, `"text"`, `42`, `null`} {
			err := b.s.UpsertSnapshotMetrics(b.ctx, store.SnapshotMetrics{TableID: tbl.ID, SnapshotID: 1, Value: json.RawMessage(v)})
			require.ErrorIs(t, err, store.ErrInvalidArgument, "value %q", v)
		}
		err := b.s.UpsertSnapshotMetrics(b.ctx, store.SnapshotMetrics{TableID: tbl.ID, PolicyID: -1, SnapshotID: 1, Value: json.RawMessage(`{}`)})
		require.ErrorIs(t, err, store.ErrInvalidArgument, "negative policy")

		err = b.s.UpsertSnapshotMetrics(b.ctx, store.SnapshotMetrics{TableID: tbl.ID + 1000, SnapshotID: 1, Value: json.RawMessage(`{}`)})
		require.ErrorIs(t, err, store.ErrNotFound, "unknown table")

		got, err := b.s.ListSnapshotMetrics(b.ctx, tbl.ID)
		require.NoError(t, err)
		require.Empty(t, got, "rejected values are not stored")
	})
}
