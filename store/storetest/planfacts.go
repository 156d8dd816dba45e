package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// exercisePlanReads runs the conformance tests of store.PlanReads (the
// coordinator's plan): each fact must be what the one-table read it stands
// for answers. open is as for Exercise.
func exercisePlanReads(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	t.Run("PlanFacts", func(t *testing.T) {
		t.Parallel()
		b := &bundle{s: open(t), ctx: t.Context()}

		a, bb, lone := b.table(t, "a"), b.table(t, "b"), b.table(t, "lone")
		newB, err := b.s.RegisterTable(b.ctx, store.TableRef{Catalog: "cat", Namespace: "db.sch", Name: "b", UUID: "b-again"})
		require.NoError(t, err)
		other, err := b.s.RegisterTable(b.ctx, store.TableRef{Catalog: "elsewhere", Namespace: "x", Name: "y", UUID: "u-y"})
		require.NoError(t, err)
		mk := func(name, typ string, enabled bool, obj store.PolicyObject) store.Policy {
			p, err := b.s.CreatePolicy(b.ctx, store.NewPolicy{Name: name, Type: typ, Enabled: enabled, Content: json.RawMessage(`{}`)})
			require.NoError(t, err)
			_, _, err = b.s.Attach(b.ctx, name, obj)
			require.NoError(t, err)
			return p
		}
		catWide := mk("cat-compaction", typeCompaction, true, store.PolicyObject{Level: store.LevelCatalog, Catalog: "cat"})
		onA := mk("a-compaction", typeCompaction, false, store.PolicyObject{Level: store.LevelTable, Catalog: "cat", Namespace: "db.sch", Table: "a"})
		expiry := mk("db-expiry", typeExpiry, true, store.PolicyObject{Level: store.LevelNamespace, Catalog: "cat", Namespace: "db"})

		running := b.job(t, a.ID, onA.ID)
		for range 2 {
			j := b.job(t, newB.ID, catWide.ID)
			require.NoError(t, b.s.FinishJob(b.ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded}))
		}
		j := b.job(t, newB.ID, expiry.ID)
		require.NoError(t, b.s.FinishJob(b.ctx, j.ID, j.Fence, store.Finish{Status: store.StatusFailed, Error: "boom"}))

		t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		put := func(tableID, policyID, snap int64, at time.Time) store.SnapshotMetrics {
			m := store.SnapshotMetrics{TableID: tableID, PolicyID: policyID, SnapshotID: snap, Value: json.RawMessage(`{"data-file-number": 1}`), RecordedAt: at}
			require.NoError(t, b.s.UpsertSnapshotMetrics(b.ctx, m))
			return m
		}
		put(a.ID, onA.ID, 1, t0)
		newestOfA := put(a.ID, onA.ID, 2, t0.Add(2*time.Minute))
		ofExpiry := put(a.ID, expiry.ID, 3, t0.Add(time.Minute))
		put(a.ID, store.NoPolicy, 4, t0.Add(-time.Hour))

		require.NoError(t, b.s.RecordTableFacts(b.ctx, lone.ID, store.TableFacts{Location: "s3://b/lone", GCEnabled: false}))
		require.NoError(t, b.s.RecordTableFacts(b.ctx, a.ID, store.TableFacts{Location: "s3://b/a", GCEnabled: true}))
		ids := []int64{a.ID, bb.ID, newB.ID, lone.ID, other.ID, a.ID, 999999}
		f, err := b.s.PlanFacts(b.ctx, ids)
		require.NoError(t, err)

		for _, tbl := range []store.Table{a, bb, newB, lone, other} {
			want, err := b.s.EffectivePolicies(b.ctx, tbl.Catalog, tbl.Namespace, tbl.Name)
			require.NoError(t, err)
			got := f.Effective[tbl.ID]
			require.Len(t, got, len(want), "table %s", tbl.Name)
			for i := range want {
				require.Equal(t, want[i].Policy.ID, got[i].Policy.ID, "table %s", tbl.Name)
				require.Equal(t, want[i].Policy.Enabled, got[i].Policy.Enabled)
				require.JSONEq(t, string(want[i].Policy.Content), string(got[i].Policy.Content))
				require.Equal(t, want[i].Attachment.Object, got[i].Attachment.Object)
			}
		}
		require.Equal(t, []int64{onA.ID, expiry.ID}, []int64{f.Effective[a.ID][0].Policy.ID, f.Effective[a.ID][1].Policy.ID}, "the table's own attachment wins")
		require.Empty(t, f.Effective[other.ID])

		require.Equal(t, map[int64]bool{bb.ID: true}, f.Superseded)
		require.Equal(t, map[int64]bool{lone.ID: true}, f.GCDisabled, "only a table recorded with gc.enabled=false")
		require.Len(t, f.InFlight[a.ID], 1)
		require.Equal(t, running.ID, f.InFlight[a.ID][0].ID)
		require.Empty(t, f.InFlight[newB.ID])

		for _, k := range []store.TablePolicy{{TableID: newB.ID, PolicyID: catWide.ID}, {TableID: newB.ID, PolicyID: expiry.ID}, {TableID: a.ID, PolicyID: onA.ID}} {
			want, err := b.s.LastFinished(b.ctx, k.TableID, k.PolicyID)
			require.NoError(t, err)
			require.True(t, want.Equal(f.LastFinished[k]), "%+v: %s vs %s", k, want, f.LastFinished[k])
		}
		require.False(t, f.LastFinished[store.TablePolicy{TableID: newB.ID, PolicyID: catWide.ID}].IsZero())

		require.Equal(t, newestOfA.SnapshotID, f.Metrics[store.TablePolicy{TableID: a.ID, PolicyID: onA.ID}].SnapshotID)
		require.Equal(t, ofExpiry.SnapshotID, f.Metrics[store.TablePolicy{TableID: a.ID, PolicyID: expiry.ID}].SnapshotID)
		require.NotContains(t, f.Metrics, store.TablePolicy{TableID: a.ID, PolicyID: store.NoPolicy}, "only the effective policies' pairs are read")
		require.Equal(t, newestOfA.SnapshotID, f.Latest[a.ID].SnapshotID)
		require.NotContains(t, f.Latest, newB.ID)
		// The table's newest of any policy is ListTableStatus' latest row.
		page, err := b.s.ListTableStatus(b.ctx, a.ID-1, 1)
		require.NoError(t, err)
		require.Equal(t, f.Latest[a.ID].SnapshotID, page[0].Metrics.SnapshotID)

		_, err = b.s.PlanFacts(b.ctx, make([]int64, store.MaxPlanTables+1))
		require.ErrorIs(t, err, store.ErrInvalidArgument)
		empty, err := b.s.PlanFacts(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, empty.Effective)
	})
	t.Run("GetTasks", func(t *testing.T) {
		t.Parallel()
		b := &bundle{s: open(t), ctx: t.Context()}
		now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		keys := []store.TaskKey{{Name: "cron-job", Instance: "table:1:2"}, {Name: "commit-job", Instance: "1"}, {Name: "cron-job", Instance: "table:1:3"}}
		for i, k := range keys[:2] {
			_, err := b.s.ScheduleTask(b.ctx, store.NewTask{TaskKey: k, Data: []byte(`{"i":1}`), ExecutionTime: now.Add(time.Duration(i) * time.Minute)}, now)
			require.NoError(t, err)
		}
		got, err := b.s.GetTasks(b.ctx, keys)
		require.NoError(t, err)
		require.Len(t, got, 2)
		for _, k := range keys[:2] {
			want, err := b.s.GetTask(b.ctx, k)
			require.NoError(t, err)
			g := got[k]
			require.True(t, want.ExecutionTime.Equal(g.ExecutionTime), "%v", k)
			require.Equal(t, want.Data, g.Data)
			require.Equal(t, want.Picked, g.Picked)
			require.Equal(t, want.Version, g.Version)
		}
		none, err := b.s.GetTasks(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, none)
	})
}
