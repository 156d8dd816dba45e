package flow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/reconcile"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// Flow defaults.
const (
	DefaultEnqueueBatchSize = 100
	// DefaultCommitDelay is how long a commit-job waits after the first
	// commit of a burst: commits arriving meanwhile coalesce into its row.
	DefaultCommitDelay = 2 * time.Second
	// submitTimeout bounds submitting a job and recording its id once its
	// ledger row exists; a row left without a job is the reconciler's.
	submitTimeout = time.Minute
	// DefaultReconcileInterval is how often the reconciler sweeps.
	DefaultReconcileInterval = time.Minute
	// DefaultBusyRecheck is FlowConfig.BusyRecheck's default.
	DefaultBusyRecheck = 5 * time.Minute
	// DefaultSyncInterval is how often the coordinator brings policy-expand
	// rows in step with the policies and registers new tables under the
	// attachments.
	DefaultSyncInterval = time.Minute
)

// CatalogConfig is a catalog the coordinator knows by name.
type CatalogConfig struct {
	// Name is the catalog name policies and tables use.
	Name string
	// WarehouseDir is a local testdata-style catalog folder; or
	WarehouseDir string
	// Properties are non-secret iceberg-go catalog properties, written into
	// job specs.
	Properties map[string]string
	// Secrets are catalog properties that are credentials. They are passed
	// to the runner through its environment at submit time and never
	// written to a spec, the ledger or a log.
	Secrets map[string]string
}

// FlowConfig configures a Flow.
type FlowConfig struct {
	// DBURL is the ledger URL the runners open. Required.
	DBURL string
	// Catalogs are the catalogs tables may live in, by name.
	Catalogs []CatalogConfig
	// EnqueueBatchSize is how many cron-job rows one policy-expand pick
	// enqueues (expand.enqueueBatchSize). Defaults to 100.
	EnqueueBatchSize int
	// MinInterval is the coordinator's task.<type>.minIntervalMs: the
	// cooldown of a type when its policy does not set one.
	MinInterval map[policy.Type]time.Duration
	// CommitDelay is how long a commit-job waits for more commits.
	// Defaults to DefaultCommitDelay; negative means none.
	CommitDelay time.Duration
	// BusyRecheck is how long a job deferred because its table had a job
	// in flight waits at most: it runs as soon as that job's row finishes,
	// and this is the fallback. Defaults to DefaultBusyRecheck.
	BusyRecheck time.Duration
	// Log receives the flow's logs. Defaults to a no-op logger.
	Log *zap.Logger
}

// Flow is the maintenance flow: the handlers of policy-expand, cron-job and
// commit-job, and the helpers that keep policy-expand rows in step with
// the policies. It decides; the Submitter runs; the runner records.
type Flow struct {
	st       store.Store
	sub      submit.Submitter
	cfg      FlowConfig
	commits  CommitJobs // from cfg.CommitDelay
	catalogs map[string]CatalogConfig

	catMu sync.Mutex                 // guards open; held while a catalog opens
	open  map[string]catalog.Catalog // opened catalogs by name

	mu      sync.Mutex       // guards the counters
	skipped map[string]int64 // "kind/reason" → count
	runs    map[string]int64 // kind → jobs submitted
}

// NewFlow returns the flow over st, submitting through sub.
func NewFlow(st store.Store, sub submit.Submitter, cfg FlowConfig) (*Flow, error) {
	if cfg.DBURL == "" {
		return nil, fmt.Errorf("%w: flow: the ledger URL runners open is required", invalid.ErrArgument)
	}
	cfg.EnqueueBatchSize = cmp.Or(cfg.EnqueueBatchSize, DefaultEnqueueBatchSize)
	if cfg.EnqueueBatchSize < 1 {
		return nil, fmt.Errorf("%w: expand.enqueueBatchSize must be positive, got %d", invalid.ErrArgument, cfg.EnqueueBatchSize)
	}
	cfg.BusyRecheck = cmp.Or(cfg.BusyRecheck, DefaultBusyRecheck)
	if cfg.BusyRecheck < 0 {
		return nil, fmt.Errorf("%w: flow: the busy recheck must not be negative, got %s", invalid.ErrArgument, cfg.BusyRecheck)
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	f := &Flow{st: st, sub: sub, cfg: cfg, commits: NewCommitJobs(cfg.CommitDelay), catalogs: map[string]CatalogConfig{},
		open: map[string]catalog.Catalog{}, skipped: map[string]int64{}, runs: map[string]int64{}}
	for _, c := range cfg.Catalogs {
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("%w: flow: a catalog has no name", invalid.ErrArgument)
		case (c.WarehouseDir == "") == (len(c.Properties) == 0):
			return nil, fmt.Errorf("%w: catalog %q: give either a warehouse dir or properties", invalid.ErrArgument, c.Name)
		case f.catalogs[c.Name].Name != "":
			return nil, fmt.Errorf("%w: catalog %q configured twice", invalid.ErrArgument, c.Name)
		}
		for k := range c.Properties {
			if policy.IsCredentialKey(k) {
				return nil, fmt.Errorf("%w: catalog %q: property %q is a credential; configure it as a secret", invalid.ErrArgument, c.Name, k)
			}
		}
		f.catalogs[c.Name] = c
	}
	return f, nil
}

// Kinds returns the flow's task kinds for the Engine, with the reconciler
// (nil: none) as a recurring kind whose claim is its lease.
func (f *Flow) Kinds(rec *reconcile.Reconciler, every time.Duration) []scheduler.Kind {
	kinds := []scheduler.Kind{
		{Name: KindPolicyExpand, Handler: f.expand},
		{Name: KindCronJob, Handler: f.cronJob, MaxFailures: 5},
		{Name: KindCommitJob, Handler: f.commitJob, MaxFailures: 5},
	}
	kinds = append(kinds, scheduler.Kind{Name: KindSync, Schedule: Every(DefaultSyncInterval),
		Handler: func(ctx context.Context, x *scheduler.Execution) error { return f.Sync(ctx, x.Store(), x.Now()) }})
	if rec != nil {
		kinds = append(kinds, scheduler.Kind{Name: KindReconcile, Schedule: Every(cmp.Or(every, DefaultReconcileInterval)),
			Handler: func(ctx context.Context, _ *scheduler.Execution) error {
				_, err := rec.Sweep(ctx)
				return err
			}})
	}
	return kinds
}

// Every is a Schedule of fixed intervals.
type Every time.Duration

// Next returns t plus the interval.
func (e Every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

// FlowStats counts what the handlers decided.
type FlowStats struct {
	// Skipped maps "kind/reason" (e.g. "cron-job/cooldown") to a count.
	Skipped map[string]int64
	// Submitted maps a kind to the jobs it submitted.
	Submitted map[string]int64
}

// Stats returns the counters since the flow was created.
func (f *Flow) Stats() FlowStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FlowStats{Skipped: maps.Clone(f.skipped), Submitted: maps.Clone(f.runs)}
}

func (f *Flow) skip(kind, reason string, fields ...zap.Field) {
	f.mu.Lock()
	f.skipped[kind+"/"+reason]++
	f.mu.Unlock()
	f.cfg.Log.Info("skipped", append([]zap.Field{zap.String("kind", kind), zap.String("reason", reason)}, fields...)...)
}

// Store returns the ledger the flow runs on.
func (f *Flow) Store() store.Store { return f.st }

// Policies returns the flow's policy store.
func (f *Flow) Policies() store.Policies { return f.st }

// Log returns the flow's logger.
func (f *Flow) Log() *zap.Logger { return f.cfg.Log }

// catalog opens (once) the configured catalog called name.
func (f *Flow) Catalog(ctx context.Context, name string) (catalog.Catalog, error) {
	f.catMu.Lock()
	defer f.catMu.Unlock()
	if c, ok := f.open[name]; ok {
		return c, nil
	}
	cfg, ok := f.catalogs[name]
	if !ok {
		return nil, fmt.Errorf("catalog %q is not configured on this coordinator", name)
	}
	props := iceberg.Properties{}
	maps.Copy(props, cfg.Properties)
	maps.Copy(props, cfg.Secrets)
	spec := catalogs.Spec{WarehouseDir: cfg.WarehouseDir, Name: cfg.Name}
	if cfg.WarehouseDir == "" {
		spec.Props = props
	}
	c, err := spec.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open catalog %q: %w", name, err)
	}
	f.open[name] = c
	return c, nil
}

// Close closes the catalogs the flow opened.
func (f *Flow) Close() error {
	f.catMu.Lock()
	defer f.catMu.Unlock()
	var errs []error
	for name, c := range f.open {
		if cl, ok := c.(catalog.Closer); ok {
			errs = append(errs, cl.Close())
		}
		delete(f.open, name)
	}
	return errors.Join(errs...)
}
