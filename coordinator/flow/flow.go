package flow

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/reconcile"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/jobspec"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// The task kinds of the maintenance flow (DESIGN.md, Scheduling).
const (
	KindPolicyExpand = "policy-expand"
	KindCronJob      = "cron-job"
	KindCommitJob    = "commit-job"
	KindReconcile    = "reconcile"
	KindSync         = "sync"
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
	pol      store.Policies
	ex       store.Expander
	sub      submit.Submitter
	cfg      FlowConfig
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
		return nil, fmt.Errorf("%w: flow: the ledger URL runners open is required", store.ErrInvalidArgument)
	}
	pol, err := store.PoliciesOf(st)
	if err != nil {
		return nil, err
	}
	ex, err := store.ExpanderOf(st)
	if err != nil {
		return nil, err
	}
	cfg.EnqueueBatchSize = cmp.Or(cfg.EnqueueBatchSize, DefaultEnqueueBatchSize)
	if cfg.EnqueueBatchSize < 1 {
		return nil, fmt.Errorf("%w: expand.enqueueBatchSize must be positive, got %d", store.ErrInvalidArgument, cfg.EnqueueBatchSize)
	}
	cfg.CommitDelay = cmp.Or(cfg.CommitDelay, DefaultCommitDelay)
	cfg.BusyRecheck = cmp.Or(cfg.BusyRecheck, DefaultBusyRecheck)
	if cfg.BusyRecheck < 0 {
		return nil, fmt.Errorf("%w: flow: the busy recheck must not be negative, got %s", store.ErrInvalidArgument, cfg.BusyRecheck)
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	f := &Flow{st: st, pol: pol, ex: ex, sub: sub, cfg: cfg, catalogs: map[string]CatalogConfig{},
		open: map[string]catalog.Catalog{}, skipped: map[string]int64{}, runs: map[string]int64{}}
	for _, c := range cfg.Catalogs {
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("%w: flow: a catalog has no name", store.ErrInvalidArgument)
		case (c.WarehouseDir == "") == (len(c.Properties) == 0):
			return nil, fmt.Errorf("%w: catalog %q: give either a warehouse dir or properties", store.ErrInvalidArgument, c.Name)
		case f.catalogs[c.Name].Name != "":
			return nil, fmt.Errorf("%w: catalog %q configured twice", store.ErrInvalidArgument, c.Name)
		}
		for k := range c.Properties {
			if policy.IsCredentialKey(k) {
				return nil, fmt.Errorf("%w: catalog %q: property %q is a credential; configure it as a secret", store.ErrInvalidArgument, c.Name, k)
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

// ---- cron-job ----

// cronJob runs one (table, policy) if no job is in flight on the table and
// the policy's cooldown has passed.
func (f *Flow) cronJob(ctx context.Context, x *scheduler.Execution) error {
	var tableID, policyID int64
	if _, err := fmt.Sscanf(x.Task.Instance, "table:%d:%d", &tableID, &policyID); err != nil {
		f.skip(KindCronJob, "bad instance")
		return x.Complete(ctx, nil)
	}
	// A busy table is the common case when policies collide: defer before
	// reading the policy and the table.
	if busy, err := f.busy(ctx, tableID); err != nil || busy {
		if err != nil {
			return err
		}
		return f.deferBusy(ctx, x, KindCronJob, tableID, zap.Int64("table", tableID), zap.Int64("policy", policyID))
	}
	p, err := f.pol.GetPolicyByID(ctx, policyID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (p.Deleted() || !p.Enabled)) {
		f.skip(KindCronJob, "policy disabled", zap.Int64("policy", policyID))
		return x.Complete(ctx, nil)
	}
	if err != nil {
		return err
	}
	t, ok := policy.MaintenanceTypeOf(p.Type)
	if !ok {
		f.skip(KindCronJob, "unknown policy type", zap.Int64("policy", policyID))
		return x.Complete(ctx, nil)
	}
	c, err := policy.ParseContent(t, p.Content)
	if err != nil {
		f.skip(KindCronJob, "invalid policy", zap.Int64("policy", policyID), zap.Error(err))
		return x.Complete(ctx, nil)
	}
	tbl, err := f.liveTable(ctx, tableID)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, errSuperseded) {
		f.skip(KindCronJob, "table gone", zap.Int64("table", tableID), zap.Error(err))
		return x.Complete(ctx, nil)
	}
	if err != nil {
		return err
	}
	v, err := f.gate(ctx, tbl.ID, []gated{{p, c}}, x.Now())
	if err != nil {
		return err
	}
	fields := []zap.Field{zap.Int64("table", tableID), zap.Int64("policy", policyID)}
	switch {
	case len(v.run) == 0:
		return f.deferUntil(ctx, x, KindCronJob, "cooldown", v.until, nil, fields...)
	}
	return f.start(ctx, x, KindCronJob, tbl, v.run, store.TriggerCron)
}

// errSuperseded is liveTable's error for a dropped and recreated table's
// old row.
var errSuperseded = errors.New("table was dropped and recreated")

// liveTable returns table row id if it is its name's live incarnation (the
// newest row): the old row of a dropped and recreated table gets no more
// jobs, its name's new row does (policy-expand enqueues only live rows).
func (f *Flow) liveTable(ctx context.Context, id int64) (store.Table, error) {
	tbl, err := f.st.GetTable(ctx, id)
	if err != nil {
		return store.Table{}, err
	}
	cur, err := f.st.FindTable(ctx, tbl.Catalog, tbl.Namespace, tbl.Name)
	if err != nil {
		return store.Table{}, err
	}
	if cur.ID != tbl.ID {
		return store.Table{}, fmt.Errorf("%w: table %d is now table %d (table-uuid %s)", errSuperseded, tbl.ID, cur.ID, cur.UUID)
	}
	return tbl, nil
}

// gated is one maintenance type to run: its policy and parsed content.
type gated struct {
	p store.Policy
	c policy.Content
}

// verdict is what gate decided for one table.
type verdict struct {
	// run are the types that may run now; cooling the ones inside their
	// cooldown, which ends for the first of them at until.
	run, cooling []gated
	until        time.Time
}

// busy reports whether the table has a job in flight. The handlers ask
// first, as a fast path: the partial unique index over in-flight rows
// decides (start turns losing that race into a deferral too).
func (f *Flow) busy(ctx context.Context, tableID int64) (bool, error) {
	open, err := f.st.TableInFlightJobs(ctx, tableID)
	return len(open) > 0, err
}

// gate says which of types may run on the table now (the table was found
// free): those outside their cooldown.
func (f *Flow) gate(ctx context.Context, tableID int64, types []gated, now time.Time) (verdict, error) {
	var v verdict
	for _, g := range types {
		end, err := f.coolingUntil(ctx, tableID, g, now)
		if err != nil {
			return verdict{}, err
		}
		if end.IsZero() {
			v.run = append(v.run, g)
			continue
		}
		v.cooling = append(v.cooling, g)
		if v.until.IsZero() || end.Before(v.until) {
			v.until = end
		}
	}
	return v, nil
}

// deferBusy puts the claimed cron-job or commit-job back because its table
// has a job in flight: due when that job's row finishes (FinishJob wakes
// rows waiting for the table), and at the latest after BusyRecheck. Its
// data (a commit-job's owed types) is kept. A job row that finished between
// the gate and this reschedule woke nobody, so the table is looked at once
// more afterwards and the row made due at once if it is free.
func (f *Flow) deferBusy(ctx context.Context, x *scheduler.Execution, kind string, tableID int64, fields ...zap.Field) error {
	x.NextData(x.Task.Data)
	x.WaitFor(store.TableWaitKey(tableID))
	if err := f.deferUntil(ctx, x, kind, "in flight", x.Now().Add(f.cfg.BusyRecheck), nil, fields...); err != nil {
		return err
	}
	if busy, err := f.busy(ctx, tableID); err != nil || busy {
		return nil // the finish of the job in flight wakes it
	}
	if err := x.Engine().Reschedule(ctx, x.Task.TaskKey, x.Now(), nil); err != nil && !errors.Is(err, store.ErrNotFound) {
		f.cfg.Log.Warn("deferred job: the table is free again but its row could not be made due; it runs at its fallback time",
			append(fields, zap.String("kind", kind), zap.Error(err))...)
	}
	return nil
}

// deferUntil puts the claimed row back due at at (with data, nil keeping
// the row's) instead of deleting it: a job that cannot run now is deferred,
// never dropped. A later trigger of the same row coalesces into it.
func (f *Flow) deferUntil(ctx context.Context, x *scheduler.Execution, kind, reason string, at time.Time, data []byte, fields ...zap.Field) error {
	f.mu.Lock()
	f.skipped[kind+"/"+reason]++
	f.mu.Unlock()
	x.NextAt(at)
	if data != nil {
		x.NextData(data)
	}
	f.cfg.Log.Info("deferred", append([]zap.Field{zap.String("kind", kind), zap.String("reason", reason),
		zap.Time("due", at)}, fields...)...)
	return x.Complete(ctx, nil)
}

// coolingUntil returns when the (table, policy)'s cooldown ends, zero if
// it is not inside one: its last job finished less than its minimum
// interval ago.
func (f *Flow) coolingUntil(ctx context.Context, tableID int64, g gated, now time.Time) (time.Time, error) {
	d := policy.DefaultMinInterval(g.c.Type)
	if v, ok := f.cfg.MinInterval[g.c.Type]; ok {
		d = v
	}
	if g.c.MinInterval != nil {
		d = *g.c.MinInterval
	}
	if d <= 0 {
		return time.Time{}, nil
	}
	last, err := f.st.LastFinished(ctx, tableID, g.p.ID)
	if err != nil || last.IsZero() || now.Sub(last) >= d {
		return time.Time{}, err
	}
	return last.Add(d), nil
}

// start inserts the ledger row and completes the claim in one transaction,
// then submits the job and records its external id. A table that got a job
// in flight since the gate (another node won the race the partial unique
// index decides) defers the row instead. A submit that fails closes the
// row failed: the task is gone, the next trigger tries again.
func (f *Flow) start(ctx context.Context, x *scheduler.Execution, kind string, tbl store.Table, types []gated, trig store.Trigger) error {
	cat, ok := f.catalogs[tbl.Catalog]
	if !ok {
		f.skip(kind, "unknown catalog", zap.String("catalog", tbl.Catalog))
		return x.Complete(ctx, nil)
	}
	spec := jobspec.Spec{
		Catalog: jobspec.CatalogSpec{WarehouseDir: cat.WarehouseDir},
		Table:   tbl.Namespace + "." + tbl.Name,
	}
	if cat.WarehouseDir == "" {
		spec.Catalog = jobspec.CatalogSpec{Name: cat.Name, Properties: cat.Properties}
	}
	var names []string
	opts := map[string]string{}
	for _, g := range types {
		spec.Steps = append(spec.Steps, jobspec.StepSpec{Type: g.c.Type, Policy: g.p.Content})
		names = append(names, string(g.c.Type))
		mergeJobOptions(opts, g.c.JobOptions)
	}
	rawSpec, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	var job store.Job
	err = x.Complete(ctx, func(ctx context.Context, tx store.TxWriter) error {
		job, err = tx.CreateJob(ctx, store.NewJob{TableID: tbl.ID, PolicyID: types[0].p.ID, Types: names, Trigger: trig,
			Spec: rawSpec, Node: x.Node()})
		return err
	})
	if errors.Is(err, store.ErrInFlight) {
		return f.deferBusy(ctx, x, kind, tbl.ID, zap.Int64("table", tbl.ID), zap.Int64("policy", types[0].p.ID))
	}
	if err != nil {
		return err
	}
	// The claim is settled: the task row is gone, and the engine cancels a
	// callback whose row is gone at its next heartbeat. The ledger row
	// exists now and must get its job, so what follows runs on its own
	// deadline instead of the claim's context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitTimeout)
	defer cancel()
	ident := tbl.Catalog + "." + spec.Table
	ext, err := f.sub.Submit(ctx, submit.JobRequest{JobID: job.ID, Fence: job.Fence, DBURL: f.cfg.DBURL, Table: ident,
		Types: spec.ChainTypes(), CatalogProps: cat.Secrets, JobOptions: opts})
	if err != nil {
		f.cfg.Log.Error("submit failed; closing the job row", zap.Int64("job", job.ID), zap.String("table", ident), zap.Error(err))
		ferr := f.st.FinishJob(ctx, job.ID, job.Fence, store.Finish{Status: store.StatusFailed, Error: "submit: " + err.Error()})
		return errors.Join(fmt.Errorf("submit job %d: %w", job.ID, err), ferr)
	}
	f.mu.Lock()
	f.runs[kind]++
	f.mu.Unlock()
	f.cfg.Log.Info("job submitted", zap.String("kind", kind), zap.Int64("job", job.ID), zap.String("table", ident),
		zap.Strings("types", names), zap.String("external_job_id", ext))
	// The runner may already have started: a stale fence here only means
	// the row moved on, and the external id is then not needed.
	if err := f.st.SetJobID(ctx, job.ID, job.Fence, ext); err != nil && !errors.Is(err, store.ErrStaleFence) {
		return fmt.Errorf("record external job id of job %d: %w", job.ID, err)
	}
	return nil
}

// mergeJobOptions merges src into dst: a key both have keeps the larger
// value when both are numbers (resources: memory, cores, executors), else
// the first value.
func mergeJobOptions(dst, src map[string]string) {
	for k, v := range src {
		old, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		a, errA := strconv.ParseFloat(old, 64)
		b, errB := strconv.ParseFloat(v, 64)
		if errA == nil && errB == nil && b > a {
			dst[k] = v
		}
	}
}

// ---- commit-job ----

// EnqueueCommit upserts the table's commit-job, due after the commit delay;
// a burst of commits coalesces into one row. eng must run the flow's kinds.
func (f *Flow) EnqueueCommit(ctx context.Context, eng *scheduler.Engine, tableID int64) error {
	_, err := f.UpsertCommit(ctx, eng, tableID)
	return err
}

// UpsertCommit is EnqueueCommit that also reports whether a new row was
// made (false: the commit coalesced into a pending row), and that wakes
// this node's commit pool when the row falls due after the commit delay
// instead of at its next poll.
func (f *Flow) UpsertCommit(ctx context.Context, eng *scheduler.Engine, tableID int64) (created bool, err error) {
	at := eng.Clock().Now().Add(max(0, f.cfg.CommitDelay))
	created, err = eng.Upsert(ctx, store.NewTask{TaskKey: CommitJobKey(tableID), ExecutionTime: at})
	if err == nil && f.cfg.CommitDelay > 0 {
		eng.WakeAt(KindCommitJob, at)
	}
	return created, err
}

// Store returns the ledger the flow runs on.
func (f *Flow) Store() store.Store { return f.st }

// Policies returns the flow's policy store.
func (f *Flow) Policies() store.Policies { return f.pol }

// Log returns the flow's logger.
func (f *Flow) Log() *zap.Logger { return f.cfg.Log }

// commitJob runs the table's onCommit types as one chain.
func (f *Flow) commitJob(ctx context.Context, x *scheduler.Execution) error {
	tableID, err := strconv.ParseInt(x.Task.Instance, 10, 64)
	if err != nil {
		f.skip(KindCommitJob, "bad instance")
		return x.Complete(ctx, nil)
	}
	if busy, err := f.busy(ctx, tableID); err != nil || busy {
		if err != nil {
			return err
		}
		return f.deferBusy(ctx, x, KindCommitJob, tableID, zap.Int64("table", tableID))
	}
	tbl, err := f.liveTable(ctx, tableID)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, errSuperseded) {
		f.skip(KindCommitJob, "table gone", zap.Int64("table", tableID), zap.Error(err))
		return x.Complete(ctx, nil)
	}
	if err != nil {
		return err
	}
	eff, err := f.pol.EffectivePolicies(ctx, tbl.Catalog, tbl.Namespace, tbl.Name)
	if err != nil {
		return err
	}
	owed, err := owedTypes(x.Task.Data)
	if err != nil {
		f.cfg.Log.Warn("commit-job: unreadable task data; running every onCommit type", zap.Int64("table", tableID), zap.Error(err))
	}
	var types []gated
	for _, e := range eff {
		t, ok := policy.MaintenanceTypeOf(e.Policy.Type)
		if !ok || !e.Policy.Enabled || (owed != nil && !slices.Contains(owed, t)) {
			continue
		}
		c, err := policy.ParseContent(t, e.Policy.Content)
		if err != nil || !c.Schedule.OnCommit {
			continue
		}
		types = append(types, gated{e.Policy, c})
	}
	if len(types) == 0 {
		f.skip(KindCommitJob, "no onCommit policy", zap.Int64("table", tableID))
		return x.Complete(ctx, nil)
	}
	slices.SortFunc(types, func(a, b gated) int { return policy.Rank(a.c.Type) - policy.Rank(b.c.Type) })
	v, err := f.gate(ctx, tableID, types, x.Now())
	if err != nil {
		return err
	}
	field := zap.Int64("table", tableID)
	switch {
	case len(v.run) == 0:
		return f.deferUntil(ctx, x, KindCommitJob, "cooldown", v.until, owedData(v.cooling), field)
	case len(v.cooling) > 0:
		// The types inside their cooldown are owed this commit too: the
		// row stays, due when the first cooldown ends, for those only.
		x.NextAt(v.until)
		x.NextData(owedData(v.cooling))
	}
	return f.start(ctx, x, KindCommitJob, tbl, v.run, store.TriggerCommit)
}

// commitOwed is a commit-job's task data: the maintenance types a commit
// still owes after some of them ran (the others were inside their
// cooldown). No data means every onCommit type; a new commit resets the
// row to that.
type commitOwed struct {
	Types []policy.Type `json:"types"`
}

func owedData(gs []gated) []byte {
	var o commitOwed
	for _, g := range gs {
		o.Types = append(o.Types, g.c.Type)
	}
	b, _ := json.Marshal(o) // a struct of strings always marshals
	return b
}

// owedTypes reads a commit-job's task data; nil means every type.
func owedTypes(data []byte) ([]policy.Type, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var o commitOwed
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, err
	}
	return o.Types, nil
}

// ---- sync: policies → policy-expand rows, attachments → tables ----

// Sync makes every live policy's policy-expand row match it and registers
// the tables under every enabled policy's attachments that the ledger does
// not know yet. A table attachment's table is loaded every time, so a
// dropped and recreated one is registered as its new row within one sync;
// under a namespace or catalog attachment a table known by name is not
// loaded again: its recreation is registered by the runner that finds the
// table-uuid changed (the job fails, the next trigger runs on the new row),
// by the catalog watcher, or by `discover`. An attachment to a catalog the
// coordinator is not configured with is logged and skipped.
func (f *Flow) Sync(ctx context.Context, sch store.Scheduler, now time.Time) error {
	policies, err := f.pol.ListPolicies(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range policies {
		if err := SyncPolicyTask(ctx, sch, p, now); err != nil {
			errs = append(errs, fmt.Errorf("policy %q: %w", p.Name, err))
		}
		if !p.Enabled {
			continue
		}
		atts, err := f.pol.ListAttachments(ctx, p.ID)
		if err != nil {
			return err
		}
		for _, a := range atts {
			if err := f.register(ctx, a.Object); err != nil {
				errs = append(errs, fmt.Errorf("policy %q attachment %s: %w", p.Name, a.Object, err))
			}
		}
	}
	return errors.Join(errs...)
}

// register registers the unknown tables under obj.
func (f *Flow) register(ctx context.Context, obj store.PolicyObject) error {
	cat, err := f.Catalog(ctx, obj.Catalog)
	if err != nil {
		return err
	}
	var ns []string
	if obj.Namespace != "" {
		ns = strings.Split(obj.Namespace, ".")
	}
	target := Object{Catalog: obj.Catalog, Namespace: ns, Table: obj.Table}
	if obj.Table != "" {
		// One load per table attachment and interval: registering by
		// table-uuid picks up a dropped and recreated table as a new row.
		_, err := Discover(ctx, f.st, cat, target, f.cfg.Log)
		if errors.Is(err, catalog.ErrNoSuchTable) {
			if _, ferr := f.st.FindTable(ctx, obj.Catalog, obj.Namespace, obj.Table); ferr == nil {
				return nil // dropped since it was registered: its jobs say so
			}
		}
		return err
	}
	idents, _, err := catalogs.ListTables(ctx, cat, ns)
	if err != nil {
		return err
	}
	for _, ident := range idents {
		tns, name := strings.Join(ident[:len(ident)-1], "."), ident[len(ident)-1]
		if _, err := f.st.FindTable(ctx, obj.Catalog, tns, name); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		_, err := Discover(ctx, f.st, cat, Object{Catalog: obj.Catalog, Namespace: ident[:len(ident)-1], Table: name}, f.cfg.Log)
		if err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
			return err
		}
	}
	return nil
}

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
