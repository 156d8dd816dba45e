package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// flowBench is a migrated PostgreSQL schema with n registered tables in
// catalog "bench".
func flowBench(b *testing.B, n int) (string, store.Store) {
	b.Helper()
	ctx := context.Background()
	url := testdb.PostgresURL(b)
	_, err := store.Migrate(ctx, url, zap.NewNop())
	require.NoError(b, err)
	st, err := store.Open(ctx, url, zap.NewNop())
	require.NoError(b, err)
	b.Cleanup(func() { st.Close() })
	for lo := 0; lo < n; lo += 10_000 {
		var refs []store.TableRef
		for i := lo; i < min(n, lo+10_000); i++ {
			refs = append(refs, store.TableRef{Catalog: "bench", Namespace: "ns", Name: fmt.Sprintf("t%06d", i), UUID: fmt.Sprintf("uuid-%d", i)})
		}
		_, err := st.RegisterTables(ctx, refs)
		require.NoError(b, err)
	}
	return url, st
}

// countTasks returns the rows of kind name, counted in the database.
func countTasks(b *testing.B, st store.Store, name string) int {
	b.Helper()
	counts, err := st.TaskCounts(context.Background(), time.Time{})
	require.NoError(b, err)
	for _, k := range counts {
		if k.Name == name {
			return k.Total
		}
	}
	return 0
}

// BenchmarkExpand100k: one crontab policy attached to a catalog of 100,000
// registered tables. It measures the time from the policy-expand row
// falling due until every cron-job row exists (1,000 picks of 100), and, in
// the same run, a bare batched insert of 100,000 cron-job rows of the same
// shape in batches of 100 on a fresh schema. Goal: expand ≤ 3× the insert.
func BenchmarkExpand100k(b *testing.B) {
	const tables = 100_000
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		url, st := flowBench(b, tables)
		p, err := st.CreatePolicy(ctx, store.NewPolicy{Name: "expand", Type: "system_iceberg_compaction", Enabled: true,
			Content: json.RawMessage(`{"schedule": {"crontab": "@hourly"}}`)})
		require.NoError(b, err)
		_, _, err = st.Attach(ctx, "expand", store.PolicyObject{Level: store.LevelCatalog, Catalog: "bench"})
		require.NoError(b, err)
		fl, err := flow.NewFlow(st, nil, flow.FlowConfig{DBURL: url})
		require.NoError(b, err)
		var kinds []scheduler.Kind
		for _, k := range fl.Kinds(nil, 0) {
			if k.Name == flow.KindPolicyExpand {
				kinds = append(kinds, k)
			}
		}
		eng, err := scheduler.New(st, scheduler.Config{PollInterval: 20 * time.Millisecond}, kinds...)
		require.NoError(b, err)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- eng.Run(runCtx) }()
		<-eng.Ready()

		b.StartTimer()
		start := time.Now()
		_, err = st.ScheduleTask(ctx, store.NewTask{TaskKey: flow.ExpandKey(p.ID), ExecutionTime: start}, start)
		require.NoError(b, err)
		for countTasks(b, st, flow.KindCronJob) < tables {
			time.Sleep(20 * time.Millisecond)
		}
		expand := time.Since(start)
		b.StopTimer()
		stop()
		require.NoError(b, <-done)

		// Baseline: the same rows, bare, in batches of 100, on a fresh schema.
		_, st2 := flowBench(b, 0)
		start = time.Now()
		for lo := int64(1); lo <= tables; lo += 100 {
			var batch []store.NewTask
			for id := lo; id < lo+100; id++ {
				batch = append(batch, store.NewTask{TaskKey: flow.CronJobKey(id, p.ID), ExecutionTime: start})
			}
			_, err := st2.ScheduleTasks(ctx, batch, start)
			require.NoError(b, err)
		}
		insert := time.Since(start)
		require.Equal(b, tables, countTasks(b, st2, flow.KindCronJob))
		b.ReportMetric(expand.Seconds(), "expand-s")
		b.ReportMetric(insert.Seconds(), "insert-s")
		b.ReportMetric(expand.Seconds()/insert.Seconds(), "ratio")
		b.StartTimer()
	}
}

// BenchmarkCommitEnqueue50k: 50,000 commit enqueues spread over 1,000
// tables from 8 goroutines, with a commit delay long enough that none runs:
// it reports enqueues/s and the commit-job rows created (goal ≤ 1,000).
func BenchmarkCommitEnqueue50k(b *testing.B) {
	const tables, enqueues, workers = 1000, 50_000, 8
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		url, st := flowBench(b, tables)
		fl, err := flow.NewFlow(st, nil, flow.FlowConfig{DBURL: url, CommitDelay: time.Hour})
		require.NoError(b, err)
		eng, err := scheduler.New(st, scheduler.Config{}, fl.Kinds(nil, 0)...)
		require.NoError(b, err)
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < enqueues; i += workers {
					if _, err := fl.UpsertCommit(ctx, eng, int64(i%tables)+1); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		b.StopTimer()
		rows := countTasks(b, st, flow.KindCommitJob)
		require.LessOrEqual(b, rows, tables)
		b.ReportMetric(enqueues/took.Seconds(), "enqueues/s")
		b.ReportMetric(float64(rows), "commit-jobs")
		b.StartTimer()
	}
}
