package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
)

// Defaults of MetricsConfig.
const (
	DefaultQueueCacheTTL  = time.Second
	DefaultLedgerCacheTTL = 15 * time.Second
	DefaultMetricsTimeout = 2 * time.Second
	metricsNamespace      = "tms"
)

// MetricsConfig configures NewMetrics. Zero values take the defaults in
// each field's comment.
type MetricsConfig struct {
	// Store is read at scrape time for queue depth, in-flight jobs and job
	// outcomes. Required.
	Store store.Store
	// QueueCacheTTL is how long a queue-depth reading is reused, so that
	// frequent scrapes cost one query per interval. Defaults to 1s.
	QueueCacheTTL time.Duration
	// LedgerCacheTTL is the same for the job counts, which scan the ledger.
	// Defaults to 15s.
	LedgerCacheTTL time.Duration
	// Timeout bounds the store queries of one scrape. Defaults to 2s.
	Timeout time.Duration
	// Now is the clock of cache ages and "due". Defaults to time.Now.
	Now func() time.Time
}

// Metrics are the coordinator's Prometheus collectors, on a private
// registry (never the global one). The engine feeds the task metrics
// through ObserveClaim and ObserveExecution (scheduler.Config's OnClaim
// and OnExecuted), ingress paths count their events with CommitEnqueued,
// and AttachEngine/AttachFlow/AttachWatchdog add the engine's own counters,
// the flow's decisions and the watchdog state.
type Metrics struct {
	cfg MetricsConfig
	reg *prometheus.Registry

	claims     *prometheus.CounterVec
	lateness   *prometheus.HistogramVec
	executions *prometheus.CounterVec
	received   *prometheus.CounterVec
	results    *prometheus.CounterVec
	rejects    *prometheus.CounterVec

	engine   atomic.Pointer[func() scheduler.Stats]
	flow     atomic.Pointer[func() flow.FlowStats]
	watchdog atomic.Pointer[func() error]
}

// NewMetrics returns the collectors, registered on a new registry.
func NewMetrics(cfg MetricsConfig) (*Metrics, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: metrics: a store is required", invalid.ErrArgument)
	}
	cfg.QueueCacheTTL = cmp.Or(cfg.QueueCacheTTL, DefaultQueueCacheTTL)
	cfg.LedgerCacheTTL = cmp.Or(cfg.LedgerCacheTTL, DefaultLedgerCacheTTL)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultMetricsTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Metrics{cfg: cfg, reg: prometheus.NewRegistry()}
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help}
	}
	m.claims = prometheus.NewCounterVec(opts("task_claims_total", "Rows this node claimed, by task kind."), []string{"kind"})
	m.lateness = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "task_claim_lateness_seconds", Help: "Claim lateness: claim time minus the row's due time (execution_time), by task kind.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 900},
	}, []string{"kind"})
	m.executions = prometheus.NewCounterVec(opts("task_executions_total",
		"Handler runs on this node, by task kind and outcome (success, failure, stale, cancelled, panic)."), []string{"kind", "outcome"})
	m.received = prometheus.NewCounterVec(opts("commit_events_received_total",
		"Valid commit events received, by source (webhook, watcher, trigger …)."), []string{"source"})
	m.results = prometheus.NewCounterVec(opts("commit_events_total",
		"Commit events by source and result: enqueued (commit-job created), coalesced (into an existing commit-job), duplicate (event id seen before), unknown-table."),
		[]string{"source", "result"})
	m.rejects = prometheus.NewCounterVec(opts("commit_requests_rejected_total",
		"Commit webhook requests refused, by reason (unauthorized, bad-request, too-large, store-error)."), []string{"reason"})
	for _, c := range []prometheus.Collector{
		m.claims, m.lateness, m.executions, m.received, m.results, m.rejects,
		&storeCollector{m: m}, &statsCollector{m: m},
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
	} {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
}

// Registry returns the private registry, for adding collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format. A
// collector that fails is left out of the scrape rather than failing it.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: m.reg})
}

// ObserveClaim counts a claim of kind and its lateness; it fits
// scheduler.Config.OnClaim.
func (m *Metrics) ObserveClaim(kind string, lateness time.Duration) {
	m.claims.WithLabelValues(kind).Inc()
	m.lateness.WithLabelValues(kind).Observe(max(0, lateness).Seconds())
}

// ObserveExecution counts a handler run; it fits
// scheduler.Config.OnExecuted.
func (m *Metrics) ObserveExecution(kind, outcome string) {
	m.executions.WithLabelValues(kind, outcome).Inc()
}

// CommitEnqueued counts a commit event from source that upserted its
// table's commit-job: created says whether the row was new (enqueued) or
// existed (coalesced). The catalog watcher and the NOTIFY trigger call it
// with their own source names.
func (m *Metrics) CommitEnqueued(source string, created bool) {
	result := ingress.StatusCoalesced
	if created {
		result = ingress.StatusEnqueued
	}
	m.commitResult(source, result)
}

// CommitIgnored counts a commit event from source that enqueued nothing:
// result is ingress.StatusDuplicate or ingress.StatusUnknownTable.
func (m *Metrics) CommitIgnored(source, result string) { m.commitResult(source, result) }

func (m *Metrics) commitResult(source, result string) {
	m.received.WithLabelValues(source).Inc()
	m.results.WithLabelValues(source, result).Inc()
}

func (m *Metrics) rejected(reason string) { m.rejects.WithLabelValues(reason).Inc() }

// AttachEngine exposes the engine's own counters (completions written,
// stale, failed, rescued); pass engine.Stats.
func (m *Metrics) AttachEngine(stats func() scheduler.Stats) { m.engine.Store(&stats) }

// AttachFlow exposes the flow's decisions (skips by reason, submissions);
// pass flow.Stats.
func (m *Metrics) AttachFlow(stats func() flow.FlowStats) { m.flow.Store(&stats) }

// AttachWatchdog exposes tms_watchdog_healthy: 1 while healthy returns nil.
func (m *Metrics) AttachWatchdog(healthy func() error) { m.watchdog.Store(&healthy) }

// ---- store-backed gauges ----

var (
	queueDesc = prometheus.NewDesc("tms_queue_tasks",
		"Rows of scheduled_tasks by task kind and state: due (waiting for a thread), picked (running), scheduled (due later).",
		[]string{"kind", "state"}, nil)
	inFlightDesc = prometheus.NewDesc("tms_jobs_in_flight",
		"Maintenance job rows not yet finished (all nodes).", nil, nil)
	outcomesDesc = prometheus.NewDesc("tms_job_outcomes",
		"Finished maintenance job rows in the ledger by maintenance type and outcome (done, skipped, ended-drift, conflict, failed; or the row status, e.g. lost or cancelled, for rows closed without per-type outcomes). A gauge: purging the ledger lowers it.",
		[]string{"type", "outcome"}, nil)
	storeUpDesc = prometheus.NewDesc("tms_store_up",
		"1 if the last scrape's store queries answered, else 0 (the store-backed families are then left out).", nil, nil)
)

// storeCollector reads the store at scrape time, with a cache per reading.
type storeCollector struct {
	m *Metrics

	mu        sync.Mutex
	queueAt   time.Time
	queue     []store.KindCount
	ledgerAt  time.Time
	ledger    store.JobStats
	lastError error
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDesc
	ch <- inFlightDesc
	ch <- outcomesDesc
	ch <- storeUpDesc
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.m.cfg
	now := cfg.Now()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	up := 1.0
	if c.queue == nil || now.Sub(c.queueAt) >= cfg.QueueCacheTTL {
		q, err := cfg.Store.TaskCounts(ctx, now)
		if err != nil {
			c.queue, up = nil, 0
		} else {
			c.queue, c.queueAt = q, now
		}
	}
	if c.ledgerAt.IsZero() || now.Sub(c.ledgerAt) >= cfg.LedgerCacheTTL {
		l, err := cfg.Store.JobStats(ctx)
		if err != nil {
			c.ledgerAt, up = time.Time{}, 0
		} else {
			c.ledger, c.ledgerAt = l, now
		}
	}
	ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, up)
	for _, k := range c.queue {
		for state, n := range map[string]int{"due": k.Due, "picked": k.Picked, "scheduled": k.Total - k.Due - k.Picked} {
			ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(n), k.Name, state)
		}
	}
	if !c.ledgerAt.IsZero() {
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(c.ledger.InFlight))
		for _, o := range c.ledger.Outcomes {
			ch <- prometheus.MustNewConstMetric(outcomesDesc, prometheus.GaugeValue, float64(o.Count), o.Type, o.Outcome)
		}
	}
}

// ---- engine and flow counters ----

var (
	completionsDesc = prometheus.NewDesc("tms_engine_completions_total",
		"Completions this node wrote, by result: written, stale (claim no longer held), failed.", []string{"result"}, nil)
	rescuedDesc = prometheus.NewDesc("tms_engine_rescued_total",
		"Rows whose holder stopped heartbeating that this node revived.", nil, nil)
	skippedDesc = prometheus.NewDesc("tms_flow_skipped_total",
		"Maintenance decisions that started no job, by task kind and reason (cooldown, in-flight …).", []string{"kind", "reason"}, nil)
	submittedDesc = prometheus.NewDesc("tms_flow_submitted_total",
		"Maintenance jobs submitted, by task kind.", []string{"kind"}, nil)
	watchdogDesc = prometheus.NewDesc("tms_watchdog_healthy",
		"1 while the node's watchdog reports healthy (it writes its heartbeat), else 0.", nil, nil)
)

// statsCollector reads the attached engine, flow and watchdog at scrape time.
type statsCollector struct{ m *Metrics }

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{completionsDesc, rescuedDesc, skippedDesc, submittedDesc, watchdogDesc} {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	if f := c.m.engine.Load(); f != nil {
		st := (*f)()
		for result, n := range map[string]int64{"written": st.Completed, "stale": st.Stale, "failed": st.Failed} {
			ch <- prometheus.MustNewConstMetric(completionsDesc, prometheus.CounterValue, float64(n), result)
		}
		ch <- prometheus.MustNewConstMetric(rescuedDesc, prometheus.CounterValue, float64(st.Rescued))
	}
	if f := c.m.flow.Load(); f != nil {
		st := (*f)()
		for key, n := range st.Skipped {
			kind, reason, _ := strings.Cut(key, "/")
			ch <- prometheus.MustNewConstMetric(skippedDesc, prometheus.CounterValue, float64(n), kind, reason)
		}
		for kind, n := range st.Submitted {
			ch <- prometheus.MustNewConstMetric(submittedDesc, prometheus.CounterValue, float64(n), kind)
		}
	}
	if f := c.m.watchdog.Load(); f != nil {
		v := 1.0
		if (*f)() != nil {
			v = 0
		}
		ch <- prometheus.MustNewConstMetric(watchdogDesc, prometheus.GaugeValue, v)
	}
}
