package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/coordinator"
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
			b := setup(t, backend)
			st, err := store.Open(b.ctx, b.url, zaptest.NewLogger(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			var refs []store.TableRef
			for i := range 250 {
				refs = append(refs, store.TableRef{Catalog: "c", Namespace: "ns", Name: fmt.Sprintf("t%03d", i), UUID: fmt.Sprint("u", i)})
			}
			_, err = st.RegisterTables(b.ctx, refs)
			require.NoError(t, err)
			pol, err := store.PoliciesOf(st)
			require.NoError(t, err)
			p, err := pol.CreatePolicy(b.ctx, store.NewPolicy{Name: "hourly", Type: "system_iceberg_compaction", Enabled: true,
				Content: json.RawMessage(`{"schedule": {"crontab": "@hourly"}}`)})
			require.NoError(t, err)
			_, _, err = pol.Attach(b.ctx, "hourly", store.PolicyObject{Level: store.LevelCatalog, Catalog: "c"})
			require.NoError(t, err)
			now := time.Now()
			require.NoError(t, coordinator.SyncPolicyTask(b.ctx, b.sch, p, now))
			require.NoError(t, b.sch.RescheduleTask(b.ctx, coordinator.ExpandKey(p.ID), now, nil)) // due at once

			flow, err := coordinator.NewFlow(st, nil, coordinator.FlowConfig{DBURL: b.url, EnqueueBatchSize: 100, Log: zaptest.NewLogger(t)})
			require.NoError(t, err)
			var kinds []coordinator.Kind
			for _, k := range flow.Kinds(nil, 0) {
				if k.Name == coordinator.KindPolicyExpand {
					kinds = append(kinds, k)
				}
			}
			b.start(coordinator.Config{PollInterval: time.Hour}, kinds...)
			next := now.Truncate(time.Hour).Add(time.Hour) // @hourly's next instant
			eventually(t, time.Minute, "the instant's last batch", func() bool {
				row, err := b.sch.GetTask(b.ctx, coordinator.ExpandKey(p.ID))
				require.NoError(t, err)
				return !row.ExecutionTime.Before(next) && !row.Picked
			})
			rows, err := b.sch.ListTasks(context.Background(), coordinator.KindCronJob, 1000)
			require.NoError(t, err)
			require.Len(t, rows, 250, "one cron-job per table")
			row, err := b.sch.GetTask(b.ctx, coordinator.ExpandKey(p.ID))
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
