package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
)

// TestExpandBatches: a policy-expand pick enqueues one batch, goes on at
// once while the instant has tables left, and then moves to the next
// crontab instant with its cursor cleared; every table gets one cron-job.
func TestExpandBatches(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			b := coordtest.Setup(t, backend)
			st, err := store.Open(b.Ctx, b.URL, zaptest.NewLogger(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			var refs []store.TableRef
			for i := range 250 {
				refs = append(refs, store.TableRef{Catalog: "c", Namespace: "ns", Name: fmt.Sprintf("t%03d", i), UUID: fmt.Sprint("u", i)})
			}
			_, err = st.RegisterTables(b.Ctx, refs)
			require.NoError(t, err)
			p, err := st.CreatePolicy(b.Ctx, store.NewPolicy{Name: "hourly", Type: "system_iceberg_compaction", Enabled: true,
				Content: json.RawMessage(`{"schedule": {"crontab": "@hourly"}}`)})
			require.NoError(t, err)
			_, _, err = st.Attach(b.Ctx, "hourly", store.PolicyObject{Level: store.LevelCatalog, Catalog: "c"})
			require.NoError(t, err)
			now := time.Now()
			require.NoError(t, flow.SyncPolicyTask(b.Ctx, b.Sch, p, now))
			require.NoError(t, b.Sch.RescheduleTask(b.Ctx, flow.ExpandKey(p.ID), now, nil)) // due at once

			fl, err := flow.NewFlow(st, nil, flow.FlowConfig{DBURL: b.URL, EnqueueBatchSize: 100, Log: zaptest.NewLogger(t)})
			require.NoError(t, err)
			var kinds []scheduler.Kind
			for _, k := range fl.Kinds(nil, 0) {
				if k.Name == flow.KindPolicyExpand {
					kinds = append(kinds, k)
				}
			}
			b.Start(scheduler.Config{PollInterval: time.Hour}, kinds...)
			next := now.Truncate(time.Hour).Add(time.Hour) // @hourly's next instant
			testkit.Eventually(t, time.Minute, "the instant's last batch", func() bool {
				row, err := b.Sch.GetTask(b.Ctx, flow.ExpandKey(p.ID))
				require.NoError(t, err)
				return !row.ExecutionTime.Before(next) && !row.Picked
			})
			rows, err := b.Sch.ListTasks(context.Background(), flow.KindCronJob, 1000)
			require.NoError(t, err)
			require.Len(t, rows, 250, "one cron-job per table")
			row, err := b.Sch.GetTask(b.Ctx, flow.ExpandKey(p.ID))
			require.NoError(t, err)
			var data struct {
				Crontab string `json:"crontab"`
				Cursor  int64  `json:"cursor"`
			}
			require.NoError(t, json.Unmarshal(row.Data, &data))
			require.Equal(t, "@hourly", data.Crontab)
			require.Zero(t, data.Cursor, "the instant is done")
			require.WithinDuration(t, next, row.ExecutionTime, time.Second, "the next crontab instant")
		})
	}
}
