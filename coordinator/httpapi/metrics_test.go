package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
)

// TestMetricsAfterTraffic runs an engine whose hooks feed the metrics,
// posts commit events, writes ledger rows, and reads /metrics back.
func TestMetricsAfterTraffic(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		var clock atomic.Int64
		clock.Store(now.UnixNano())
		nowFn := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
		var m *httpapi.Metrics
		b := setup(t, backend, func(c *httpapi.Config) {
			var err error
			m, err = httpapi.NewMetrics(httpapi.MetricsConfig{Store: c.Store, Now: nowFn})
			require.NoError(t, err)
			c.Metrics, c.Now = m, nowFn
		})
		require.Same(t, m, b.srv.Metrics())

		// An engine with one kind: one run succeeds, one fails.
		eng, err := scheduler.New(b.sch, scheduler.Config{
			NodeID: "metrics-node", PollInterval: 20 * time.Millisecond, Log: zaptest.NewLogger(t),
			OnClaim: m.ObserveClaim, OnExecuted: m.ObserveExecution,
		}, scheduler.Kind{Name: "probe", MaxFailures: 1, Handler: func(_ context.Context, x *scheduler.Execution) error {
			if x.Task.Instance == "fail" {
				return errors.New("boom")
			}
			return nil
		}})
		require.NoError(t, err)
		m.AttachEngine(eng.Stats)
		m.AttachWatchdog(func() error { return nil })
		m.AttachFlow(func() flow.FlowStats {
			return flow.FlowStats{Skipped: map[string]int64{"cron-job/cooldown": 2}, Submitted: map[string]int64{"commit-job": 3}}
		})
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- eng.Run(ctx) }()
		defer func() {
			cancel()
			require.NoError(t, <-ran)
		}()
		for _, inst := range []string{"ok", "fail"} {
			_, err := eng.Schedule(t.Context(), store.NewTask{TaskKey: store.TaskKey{Name: "probe", Instance: inst}})
			require.NoError(t, err)
		}
		testkit.Eventually(t, 10*time.Second, "two completed executions", func() bool { return eng.Stats().Completed >= 2 })

		// Webhook traffic: enqueued, duplicate, unknown table, refused.
		b.ingest(event("m-1"))
		b.ingest(event("m-1"))
		b.ingest(`{"catalog":"cat","namespace":"db","table":"nope","eventId":"m-2"}`)
		code, _ := b.post("wrong", event("m-3"))
		require.Equal(t, http.StatusUnauthorized, code)
		code, _ = b.post(commitToken, `{`)
		require.Equal(t, http.StatusBadRequest, code)

		// Ledger rows: one finished with outcomes, one in flight.
		orders := b.tables["db.orders"]
		j, err := b.st.CreateJob(t.Context(), store.NewJob{TableID: orders.ID, PolicyID: 1, Types: []string{"compaction"}, Trigger: store.TriggerCommit})
		require.NoError(t, err)
		require.NoError(t, b.st.FinishJob(t.Context(), j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded,
			Outcomes: []byte(`[{"type":"compaction","outcome":"done"}]`)}))
		_, err = b.st.CreateJob(t.Context(), store.NewJob{TableID: orders.ID, PolicyID: 2, Types: []string{"snapshot-expiry"}, Trigger: store.TriggerCron})
		require.NoError(t, err)

		body := b.metrics()
		for _, line := range []string{
			`tms_commit_events_received_total{source="webhook"} 3`,
			`tms_commit_events_total{result="enqueued",source="webhook"} 1`,
			`tms_commit_events_total{result="duplicate",source="webhook"} 1`,
			`tms_commit_events_total{result="unknown-table",source="webhook"} 1`,
			`tms_commit_requests_rejected_total{reason="unauthorized"} 1`,
			`tms_commit_requests_rejected_total{reason="bad-request"} 1`,
			`tms_task_claims_total{kind="probe"} 2`,
			`tms_task_executions_total{kind="probe",outcome="success"} 1`,
			`tms_task_executions_total{kind="probe",outcome="failure"} 1`,
			`tms_task_claim_lateness_seconds_count{kind="probe"} 2`,
			`tms_queue_tasks{kind="commit-job",state="scheduled"} 1`,
			`tms_queue_tasks{kind="commit-job",state="due"} 0`,
			`tms_jobs_in_flight 1`,
			`tms_job_outcomes{outcome="done",type="compaction"} 1`,
			`tms_store_up 1`,
			`tms_engine_completions_total{result="written"} 2`,
			`tms_engine_rescued_total 0`,
			`tms_flow_skipped_total{kind="cron-job",reason="cooldown"} 2`,
			`tms_flow_submitted_total{kind="commit-job"} 3`,
			`tms_watchdog_healthy 1`,
			`# TYPE go_goroutines gauge`,
		} {
			require.True(t, strings.Contains(body, line+"\n"), "/metrics lacks %q", line)
		}

		// The queue depth is cached for a second of the metrics clock.
		b.ingest(`{"catalog":"cat","namespace":"db.sales","table":"items","eventId":"m-4"}`)
		require.Contains(t, b.metrics(), `tms_queue_tasks{kind="commit-job",state="scheduled"} 1`+"\n")
		clock.Add(int64(2 * time.Second))
		require.Contains(t, b.metrics(), `tms_queue_tasks{kind="commit-job",state="scheduled"} 2`+"\n")
		clock.Add(int64(10 * time.Second))
		require.Contains(t, b.metrics(), `tms_queue_tasks{kind="commit-job",state="due"} 2`+"\n")
	})
}

// TestMetricsWhenTheStoreIsDown leaves the store-backed families out and
// says so, instead of failing the scrape.
func TestMetricsWhenTheStoreIsDown(t *testing.T) {
	t.Parallel()
	b := setup(t, "postgres", nil)
	b.srv.Metrics().CommitEnqueued("watcher", true)
	b.srv.Metrics().CommitEnqueued("watcher", false)
	b.srv.Metrics().CommitIgnored("trigger", ingress.StatusUnknownTable)
	require.NoError(t, b.st.Close())
	body := b.metrics()
	require.Contains(t, body, "tms_store_up 0\n")
	require.NotContains(t, body, "tms_jobs_in_flight")
	require.Contains(t, body, `tms_commit_events_total{result="enqueued",source="watcher"} 1`+"\n")
	require.Contains(t, body, `tms_commit_events_total{result="coalesced",source="watcher"} 1`+"\n")
	require.Contains(t, body, `tms_commit_events_received_total{source="trigger"} 1`+"\n")
}

// metrics scrapes /metrics.
func (b *bundle) metrics() string {
	b.t.Helper()
	code, body := b.do(http.MethodGet, "/metrics", "", "")
	require.Equal(b.t, http.StatusOK, code, body)
	return body
}
