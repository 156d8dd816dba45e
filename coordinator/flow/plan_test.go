package flow_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/sampler"
	"github.com/tms-dev/tms/store"
)

// TestPlan: each verdict from the rows that cause it — a job in flight, a
// cooldown, thresholds met and not met on the latest sample, no sample, a
// disabled policy — with the due instant from the task rows, the old
// incarnation of a recreated table left out, and paging by table id. The
// threshold reasons are policy.Decide's, the runner's own.
func TestPlan(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			b := coordtest.Setup(t, backend)
			ctx := b.Ctx
			st, err := store.Open(ctx, b.URL, zaptest.NewLogger(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			reg := func(name, uuid string) store.Table {
				tbl, err := st.RegisterTable(ctx, store.TableRef{Catalog: "c", Namespace: "ns", Name: name, UUID: uuid})
				require.NoError(t, err)
				return tbl
			}
			busy, cool, small, fresh, big := reg("busy", "u1"), reg("cool", "u2"), reg("small", "u3"), reg("fresh", "u4"), reg("big", "u5")
			lone := reg("lone", "u8")
			old := reg("again", "u6")
			again := reg("again", "u7")
			mk := func(name, typ, content string, enabled bool, obj store.PolicyObject) store.Policy {
				p, err := st.CreatePolicy(ctx, store.NewPolicy{Name: name, Type: typ, Enabled: enabled, Content: json.RawMessage(content)})
				require.NoError(t, err)
				_, _, err = st.Attach(ctx, name, obj)
				require.NoError(t, err)
				return p
			}
			compaction := mk("compact", policy.PolicyTypeOf(policy.Compaction),
				`{"schedule": {"crontab": "@hourly", "onCommit": true}, "minIntervalMs": 600000, "minDataFileMse": 1000}`, true,
				store.PolicyObject{Level: store.LevelCatalog, Catalog: "c"})
			expiry := mk("expire", policy.PolicyTypeOf(policy.SnapshotExpiry), `{"schedule": {"onCommit": true}}`, false,
				store.PolicyObject{Level: store.LevelTable, Catalog: "c", Namespace: "ns", Table: "big"})

			now := time.Date(2026, 6, 1, 10, 30, 0, 0, time.UTC)
			// busy: a job in flight. cool: its last compaction finished 5
			// minutes ago (cooldown 10). small, big: samples under and over
			// the thresholds. fresh: no sample.
			_, err = st.CreateJob(ctx, store.NewJob{TableID: busy.ID, PolicyID: compaction.ID, Types: []string{"compaction"}, Trigger: store.TriggerCron})
			require.NoError(t, err)
			j, err := st.CreateJob(ctx, store.NewJob{TableID: cool.ID, PolicyID: compaction.ID, Types: []string{"compaction"}, Trigger: store.TriggerCron})
			require.NoError(t, err)
			require.NoError(t, st.FinishJob(ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded, At: now.Add(-5 * time.Minute)}))
			sample := func(tbl store.Table, policyID, snap int64, mse float64, at time.Time) {
				v, _ := json.Marshal(map[string]any{"data-file-number": 10, "small-file-number": 10, "data-file-mse": mse, "snapshot-number": 3})
				require.NoError(t, st.UpsertSnapshotMetrics(ctx, store.SnapshotMetrics{TableID: tbl.ID, PolicyID: policyID, SnapshotID: snap, Value: v, RecordedAt: at}))
			}
			sample(small, compaction.ID, 11, 10, now.Add(-time.Hour))
			sample(big, compaction.ID, 21, 5000, now.Add(-2*time.Hour))
			sample(big, compaction.ID, 22, 4000, now.Add(-time.Hour)) // the newest of the pair
			sample(big, store.NoPolicy, 23, 1, now.Add(-time.Minute)) // newer, but the pair's own row wins
			// lone: over the threshold, but one small file and no deletes.
			require.NoError(t, st.UpsertSnapshotMetrics(ctx, store.SnapshotMetrics{TableID: lone.ID, PolicyID: compaction.ID, SnapshotID: 31,
				Value: json.RawMessage(`{"data-file-number": 1, "small-file-number": 1, "data-file-mse": 5000}`), RecordedAt: now.Add(-time.Hour)}))
			// Task rows: the policy's next crontab instant; a commit pending on small.
			require.NoError(t, flow.SyncPolicyTask(ctx, b.Sch, compaction, now))
			_, err = b.Sch.ScheduleTask(ctx, store.NewTask{TaskKey: flow.CommitJobKey(small.ID), ExecutionTime: now.Add(2 * time.Second)}, now)
			require.NoError(t, err)

			fl, err := flow.NewFlow(st, nil, flow.FlowConfig{DBURL: b.URL, Log: zaptest.NewLogger(t)})
			require.NoError(t, err)
			plan, err := fl.Plan(ctx, flow.PlanQuery{Now: now})
			require.NoError(t, err)
			require.Equal(t, 8, plan.Tables)
			require.Zero(t, plan.Next)
			items := map[string]flow.PlanItem{}
			for _, it := range plan.Items {
				require.NotEqual(t, old.ID, it.TableID, "an old incarnation is not planned")
				items[it.Table+"/"+string(it.Type)] = it
			}
			require.Len(t, items, 8, "compaction on seven live tables, expiry on big")
			get := func(name string, typ policy.Type) flow.PlanItem {
				it, ok := items["c.ns."+name+"/"+string(typ)]
				require.True(t, ok, "no plan item for %s %s: %+v", name, typ, plan.Items)
				return it
			}

			it := get("busy", policy.Compaction)
			require.Equal(t, flow.PlanWait, it.Verdict)
			require.Contains(t, it.Reason, "is in flight on the table")

			it = get("cool", policy.Compaction)
			require.Equal(t, flow.PlanWait, it.Verdict)
			require.Contains(t, it.Reason, "cooldown until "+now.Add(5*time.Minute).Format(time.RFC3339))

			it = get("small", policy.Compaction)
			require.Equal(t, flow.PlanSkip, it.Verdict)
			want, err := policy.Decide(policy.Compaction, compaction.Content, sampleOf(t, 10))
			require.NoError(t, err)
			require.Equal(t, want.Reason, it.Reason, "the runner's own reason")
			require.Equal(t, int64(11), it.Sample.SnapshotID)
			require.Equal(t, []string{"crontab @hourly (UTC)", "onCommit"}, it.Triggers)
			require.NotNil(t, it.Due)
			require.True(t, now.Add(2*time.Second).Equal(*it.Due), "the pending commit-job, before the crontab: %s", it.Due)
			require.Contains(t, it.DueBy, "commit-job row")

			it = get("big", policy.Compaction)
			require.Equal(t, flow.PlanRun, it.Verdict)
			require.Equal(t, "data-file-mse 4e+03 ≥ minDataFileMse 1e+03", it.Reason)
			require.Equal(t, int64(22), it.Sample.SnapshotID)
			require.True(t, now.Truncate(time.Hour).Add(time.Hour).Equal(*it.Due), "the policy-expand row: %s", it.Due)
			require.Contains(t, it.DueBy, "policy-expand row")

			it = get("lone", policy.Compaction)
			require.Equal(t, flow.PlanSkip, it.Verdict)
			require.Equal(t, "data-file-mse 5e+03 ≥ minDataFileMse 1e+03, but no file group likely qualifies: 1 small data files and no delete files, "+
				"and a group needs min-input-files 5 candidates in one partition", it.Reason)

			it = get("big", policy.SnapshotExpiry)
			require.Equal(t, flow.PlanOff, it.Verdict)
			require.Equal(t, "policy disabled", it.Reason)
			require.Equal(t, "table c.ns.big", it.Attached)
			require.Equal(t, expiry.ID, it.PolicyID)

			it = get("fresh", policy.Compaction)
			require.Equal(t, fresh.ID, it.TableID)
			require.Equal(t, flow.PlanRun, it.Verdict)
			require.Contains(t, it.Reason, "no usable sample yet")
			require.Nil(t, it.Sample)

			it = get("again", policy.Compaction)
			require.Equal(t, again.ID, it.TableID)

			// Paging: two tables a page; one table by name.
			var seen []int64
			var after int64
			for range 10 {
				page, err := fl.Plan(ctx, flow.PlanQuery{Now: now, AfterID: after, Limit: 2})
				require.NoError(t, err)
				for _, it := range page.Items {
					seen = append(seen, it.TableID)
				}
				if after = page.Next; after == 0 {
					break
				}
			}
			require.Len(t, seen, 8)
			one, err := fl.Plan(ctx, flow.PlanQuery{Now: now, Catalog: "c", Namespace: "ns", Name: "big"})
			require.NoError(t, err)
			require.Len(t, one.Items, 2)
			require.Equal(t, policy.Compaction, one.Items[0].Type, "chain order")
			listed, err := fl.Plan(ctx, flow.PlanQuery{Now: now, Tables: []store.Table{small, busy, old}})
			require.NoError(t, err)
			require.Len(t, listed.Items, 2, "the listed live tables only")
			require.Equal(t, []int64{small.ID, busy.ID}, []int64{listed.Items[0].TableID, listed.Items[1].TableID}, "in the listing's order")
			require.Zero(t, listed.Next)
			_, err = fl.Plan(ctx, flow.PlanQuery{Catalog: "c", Namespace: "ns", Name: "nope"})
			require.ErrorIs(t, err, store.ErrNotFound)
			_, err = fl.Plan(ctx, flow.PlanQuery{Limit: flow.MaxPlanLimit + 1})
			require.ErrorIs(t, err, invalid.ErrArgument)

			// Nothing was enqueued or written: the task rows are the two above.
			n, _, err := b.Sch.CountTasks(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, n)
		})
	}
}

func sampleOf(t *testing.T, mse float64) sampler.Metrics {
	t.Helper()
	return sampler.Metrics{DataFileNumber: 10, SmallFileNumber: 10, DataFileMSE: mse, SnapshotNumber: 3}
}

// TestPlanGCDisabled: the plan says orphan cleanup of a table whose runner
// last saw gc.enabled=false deletes nothing; another table's is due.
func TestPlanGCDisabled(t *testing.T) {
	t.Parallel()
	b := coordtest.Setup(t, store.BackendSQLite)
	ctx := b.Ctx
	st, err := store.Open(ctx, b.URL, zaptest.NewLogger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	nogc, err := st.RegisterTable(ctx, store.TableRef{Catalog: "c", Namespace: "ns", Name: "nogc", UUID: "u1"})
	require.NoError(t, err)
	plain, err := st.RegisterTable(ctx, store.TableRef{Catalog: "c", Namespace: "ns", Name: "plain", UUID: "u2"})
	require.NoError(t, err)
	require.NoError(t, st.RecordTableFacts(ctx, nogc.ID, store.TableFacts{Location: "s3://b/nogc", GCEnabled: false}))
	require.NoError(t, st.RecordTableFacts(ctx, plain.ID, store.TableFacts{Location: "s3://b/plain", GCEnabled: true}))
	_, err = st.CreatePolicy(ctx, store.NewPolicy{Name: "orphans", Type: policy.PolicyTypeOf(policy.OrphanCleanup), Enabled: true,
		Content: json.RawMessage(`{"schedule": {"crontab": "@daily"}}`)})
	require.NoError(t, err)
	_, _, err = st.Attach(ctx, "orphans", store.PolicyObject{Level: store.LevelCatalog, Catalog: "c"})
	require.NoError(t, err)

	fl, err := flow.NewFlow(st, nil, flow.FlowConfig{DBURL: b.URL, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	plan, err := fl.Plan(ctx, flow.PlanQuery{Now: time.Now()})
	require.NoError(t, err)
	got := map[string]flow.PlanItem{}
	for _, it := range plan.Items {
		got[it.Table] = it
	}
	require.Len(t, got, 2, "%+v", plan.Items)
	require.Equal(t, flow.PlanSkip, got["c.ns.nogc"].Verdict)
	require.Contains(t, got["c.ns.nogc"].Reason, "gc.enabled=false")
	require.NotContains(t, got["c.ns.plain"].Reason, "gc.enabled")
}
