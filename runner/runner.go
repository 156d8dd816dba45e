package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/chain"
	"github.com/tms-dev/tms/jobspec"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/sampler"
	"github.com/tms-dev/tms/store"
)

// ErrJobFailed is wrapped by RunJob's error when the job ran and its row was
// closed with status failed (a type failed, or the spec, catalog or table was
// bad). The message says why; so does the row's error column.
var ErrJobFailed = errors.New("job failed")

// finishTimeout bounds the final ledger write after the job's context was
// cancelled (SIGTERM), so the row is still closed as cancelled.
const finishTimeout = 30 * time.Second

// Options tune RunJob and Replay. The zero value is ready to use.
type Options struct {
	// CatalogProps are overlaid onto the spec's catalog properties: the
	// credentials (and anything else secret) that come from the environment
	// (CatalogPropsFromEnv) or a props file (ReadCatalogPropsFile). They are
	// never written to the ledger. Ignored for a warehouse-dir catalog.
	CatalogProps iceberg.Properties
	// Log receives progress. Defaults to zap.NewNop().
	Log *zap.Logger
	// Now is the clock for started_at, finished_at and the chain's ages.
	// Defaults to time.Now.
	Now func() time.Time
	// Progress, if set, is called after each sample the chain takes (when is
	// chain.WhenBefore at the start of a type, chain.WhenAfter after a type
	// committed), after the ledger was written. Replay draws its terminal
	// progress line from it. It must not block.
	Progress func(t policy.Type, when string, r sampler.Result)
	// FileDeleted, if set, is called after each file snapshot expiry
	// deletes. The binary's crash-recovery failpoint (TMS_FAILPOINT) uses
	// it; it must not block unless it means to.
	FileDeleted func(path string)

	// wrapHooks lets this package's benchmarks time the hooks.
	wrapHooks func(chain.Hooks) chain.Hooks
}

func (o Options) withDefaults() Options {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// RunJob runs job row jobID of st while holding fence, and closes the row.
//
// It marks the row running (a fenced write that also refuses a row another
// runner already started), parses the spec, opens the catalog, checks that
// the table is the incarnation the row's table_id names (same name and
// Iceberg table-uuid), and runs the chain with hooks that write metrics at
// every sample, before_snapshot_id at the first, check the fence before
// every commit and protect the snapshots other in-flight jobs of the table
// planned from. At the end it writes after_snapshot_id, status, per-type
// outcomes, error and finished_at.
//
// Status: failed if any type ended failed, or the job could not run (bad
// spec, unreachable catalog, missing or recreated table); cancelled if ctx
// was cancelled; succeeded otherwise. Skipped, ended-drift and conflict are
// not failures — the table is as healthy as before and the next trigger will
// try again — so a chain of only those is succeeded; the outcomes column
// says what each type did.
//
// Errors: nil when the row was closed succeeded; wrapping ErrJobFailed when
// it was closed failed or cancelled; wrapping store.ErrStaleFence when the
// runner was fenced out (then it wrote nothing more and committed nothing
// after noticing); wrapping store.ErrNotFound for an unknown job; anything
// else when the ledger could not be written. The report is filled in as far
// as the chain got.
func RunJob(ctx context.Context, st store.Store, jobID, fence int64, opts Options) (chain.Report, error) {
	opts = opts.withDefaults()
	job, err := st.GetJob(ctx, jobID)
	if err != nil {
		return chain.Report{}, err
	}
	if err := st.StartJob(ctx, jobID, fence, opts.Now()); err != nil {
		return chain.Report{}, err
	}
	j := &jobRun{st: st, job: job, fence: fence, opts: opts, log: opts.Log.With(zap.Int64("job", jobID))}
	rep, runErr := j.run(ctx)
	return rep, j.finish(ctx, rep, runErr)
}

// jobRun is one RunJob in progress.
type jobRun struct {
	st    store.Store
	job   store.Job
	fence int64
	opts  Options
	log   *zap.Logger

	spec       Spec
	beforeSet  bool // before_snapshot_id written
	chainStart bool // chain.Run was reached
}

// run does everything between StartJob and FinishJob.
func (j *jobRun) run(ctx context.Context) (chain.Report, error) {
	spec, err := ParseSpec(j.job.Spec)
	if err != nil {
		return chain.Report{}, err
	}
	j.spec = spec
	if got, want := joinTypes(spec.ChainTypes()), strings.Join(j.job.Types, ","); got != want {
		return chain.Report{}, fmt.Errorf("%w: steps %s differ from the job row's types %s", ErrInvalidSpec, got, want)
	}
	ident, _ := catalogs.ParseIdent(spec.Table) // validated by ParseSpec
	cat, err := openCatalog(ctx, spec.Catalog, j.opts.CatalogProps)
	if err != nil {
		return chain.Report{}, err
	}
	defer closeCatalog(cat)
	tbl, err := catalogs.LoadTable(ctx, cat, ident)
	if err != nil {
		return chain.Report{}, err
	}
	if err := j.checkIncarnation(ctx, ident, tbl); err != nil {
		return chain.Report{}, err
	}
	// Where the table lives, for the orphan cleanup of the tables around
	// it (Hooks.OtherTables), and gc.enabled, for the plan. Losing them
	// costs only that protection and that line of the plan, so it does not
	// fail the job.
	facts := store.TableFacts{Location: tbl.Location(), GCEnabled: chain.GCEnabled(tbl.Properties())}
	if err := j.st.RecordTableFacts(ctx, j.job.TableID, facts); err != nil {
		j.log.Warn("could not record the table's location and gc.enabled", zap.Error(err))
	}
	hooks := chain.Hooks{
		Sampled:      j.sampled,
		BeforeCommit: func(ctx context.Context, _ policy.Type) error { return j.st.CheckFence(ctx, j.job.ID, j.fence) },
		ProtectedSnapshots: func(ctx context.Context) ([]int64, error) {
			return j.st.InFlightBaseSnapshots(ctx, j.job.TableID, j.job.ID)
		},
		// Snapshot expiry's deletion plan lives in the ledger until done,
		// so a run that dies while deleting is finished by the next one.
		PlanDeletes: func(ctx context.Context, paths []string) error {
			return j.st.AddPendingDeletes(ctx, j.job.ID, j.fence, paths)
		},
		DeletesDone: func(ctx context.Context, paths []string) error {
			return j.st.DonePendingDeletes(ctx, j.job.TableID, paths)
		},
		PendingDeletes: func(ctx context.Context) ([]string, error) {
			return j.st.PendingDeletes(ctx, j.job.TableID)
		},
		FileDeleted: j.opts.FileDeleted,
		OtherTables: func(ctx context.Context) ([]chain.Neighbour, error) { return j.otherTables(ctx, cat) },
	}
	if j.opts.wrapHooks != nil {
		hooks = j.opts.wrapHooks(hooks)
	}
	j.chainStart = true
	j.log.Info("chain starting", zap.String("table", spec.Table), zap.String("types", joinTypes(spec.ChainTypes())), zap.Bool("dry-run", spec.DryRun))
	start := time.Now()
	rep, err := chain.Run(ctx, cat, ident, chainSteps(spec), chain.Options{
		DryRun: spec.DryRun, Now: j.opts.Now, Log: j.log, Hooks: hooks,
		Warehouse: catalogWarehouse(spec.Catalog, j.opts.CatalogProps),
	})
	if rep.Duration == 0 {
		rep.Duration = time.Since(start)
	}
	return rep, err
}

// otherTables are the ledger's tables with a recorded location or outside
// folders other than this job's table: every incarnation of another name
// (an older incarnation of this name is the table it replaced, whose files
// are orphans now). One in this job's catalog loads through cat, and only
// as the incarnation its row records; one in another catalog cannot be
// loaded here (this runner holds only its job's catalog properties).
func (j *jobRun) otherTables(ctx context.Context, cat catalog.Catalog) ([]chain.Neighbour, error) {
	own, err := j.st.GetTable(ctx, j.job.TableID)
	if err != nil {
		return nil, err
	}
	locs, err := j.st.TableLocations(ctx)
	if err != nil {
		return nil, err
	}
	var out []chain.Neighbour
	for _, l := range locs {
		if l.Catalog == own.Catalog && l.Namespace == own.Namespace && l.Name == own.Name {
			continue
		}
		name := l.Catalog + "." + l.Namespace + "." + l.Name
		n := chain.Neighbour{Name: name, Location: l.Location, Folders: l.OutsideFolders}
		if l.Catalog == own.Catalog {
			n.Load = func(ctx context.Context) (*table.Table, error) { return loadIncarnation(ctx, cat, l) }
		}
		out = append(out, n)
	}
	return out, nil
}

// loadIncarnation loads the table of row l and refuses another
// incarnation under its name: its recorded folders are the old one's.
func loadIncarnation(ctx context.Context, cat catalog.Catalog, l store.TableLocation) (*table.Table, error) {
	ident, err := catalogs.ParseIdent(l.Namespace + "." + l.Name)
	if err != nil {
		return nil, err
	}
	tbl, err := catalogs.LoadTable(ctx, cat, ident)
	if err != nil {
		return nil, err
	}
	if got := tbl.Metadata().TableUUID().String(); got != l.UUID {
		return nil, fmt.Errorf("it is now another table (table-uuid %s, the ledger records %s)", got, l.UUID)
	}
	return tbl, nil
}

// checkIncarnation refuses a table whose name or uuid is not the one the
// job's table row records: a dropped and recreated table is a different
// table, and its row (and its history) is a different row.
func (j *jobRun) checkIncarnation(ctx context.Context, ident table.Identifier, tbl *table.Table) error {
	row, err := j.st.GetTable(ctx, j.job.TableID)
	if err != nil {
		return fmt.Errorf("ledger table %d: %w", j.job.TableID, err)
	}
	ns, name := strings.Join(ident[:len(ident)-1], "."), ident[len(ident)-1]
	if row.Namespace != ns || row.Name != name {
		return fmt.Errorf("%w: table %s, but the job row's table is %s.%s", ErrInvalidSpec, j.spec.Table, row.Namespace, row.Name)
	}
	if uuid := tbl.Metadata().TableUUID().String(); uuid != row.UUID {
		// The new incarnation is a new table row: registering it here lets
		// the coordinator maintain it from its next trigger on, while this
		// row (the old table's history) stays as it is.
		ref := row.TableRef
		ref.UUID = uuid
		note := ""
		if nrow, err := j.st.RegisterTable(ctx, ref); err != nil {
			note = fmt.Sprintf(" (registering the new table failed: %v)", err)
		} else {
			note = fmt.Sprintf("; registered the new table as ledger table %d", nrow.ID)
		}
		return fmt.Errorf("table %s was dropped and recreated: its table-uuid is %s, the job was planned for %s%s", j.spec.Table, uuid, row.UUID, note)
	}
	return nil
}

// sampled is the chain's Sampled hook: metrics for every sampled snapshot,
// and before_snapshot_id at the first. Metrics writes are not fenced by the
// store, so the fence is checked first: a zombie writes nothing.
func (j *jobRun) sampled(ctx context.Context, t policy.Type, when string, r sampler.Result) error {
	if r.SnapshotID == 0 {
		if j.opts.Progress != nil {
			j.opts.Progress(t, when, r)
		}
		return nil // an empty table has no snapshot to key metrics on
	}
	if err := j.st.CheckFence(ctx, j.job.ID, j.fence); err != nil {
		return err
	}
	value, err := json.Marshal(r.Metrics)
	if err != nil {
		return fmt.Errorf("encode metrics: %w", err)
	}
	if err := j.st.UpsertSnapshotMetrics(ctx, store.SnapshotMetrics{
		TableID: j.job.TableID, PolicyID: j.job.PolicyID, SnapshotID: r.SnapshotID, Value: value,
	}); err != nil {
		return err
	}
	// Where the table's files lie outside its location, for the orphan
	// cleanup of the tables around it; like the location, losing it costs
	// only that protection.
	if err := j.st.RecordOutsideFolders(ctx, j.job.TableID, r.OutsideFolders); err != nil {
		j.log.Warn("could not record the folders outside its location the table references", zap.Error(err))
	}
	if !j.beforeSet && when == chain.WhenBefore {
		if err := j.st.SetBeforeSnapshot(ctx, j.job.ID, j.fence, r.SnapshotID); err != nil {
			return err
		}
		j.beforeSet = true
	}
	j.log.Debug("sampled", zap.String("type", string(t)), zap.String("when", when), zap.Int64("snapshot", r.SnapshotID))
	if j.opts.Progress != nil {
		j.opts.Progress(t, when, r)
	}
	return nil
}

// finish closes the row from the chain's report and error, unless the
// runner was fenced out. It returns RunJob's error.
func (j *jobRun) finish(ctx context.Context, rep chain.Report, runErr error) error {
	if errors.Is(runErr, store.ErrStaleFence) {
		j.log.Warn("fenced out; stopping without further ledger writes", zap.Error(runErr))
		return runErr
	}
	status, msg := store.StatusSucceeded, ""
	switch {
	case runErr != nil && ctx.Err() != nil:
		status, msg = store.StatusCancelled, "interrupted: "+runErr.Error()
	case runErr != nil:
		status, msg = store.StatusFailed, runErr.Error()
	case rep.Failed():
		status, msg = store.StatusFailed, failedTypes(rep)
	}
	outcomes, err := json.Marshal(j.outcomes(rep, runErr))
	if err != nil {
		return fmt.Errorf("encode outcomes: %w", err)
	}
	f := store.Finish{Status: status, Error: msg, Outcomes: outcomes, At: j.opts.Now()}
	if rep.AfterSnapshotID != 0 {
		f.AfterSnapshotID = &rep.AfterSnapshotID
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := j.st.FinishJob(wctx, j.job.ID, j.fence, f); err != nil {
		return err
	}
	j.log.Info("job finished", zap.String("status", string(status)), zap.String("error", msg))
	switch status {
	case store.StatusCancelled:
		return fmt.Errorf("%w: cancelled: %s", ErrJobFailed, msg)
	case store.StatusFailed:
		return fmt.Errorf("%w: %s", ErrJobFailed, msg)
	}
	return nil
}

// outcomes lists one outcome per type of the job: the chain's reports, then
// every type the chain did not reach. Types that never ran because the job
// could not start are failed with that error; types after a chain that
// stopped early are skipped ("not run").
func (j *jobRun) outcomes(rep chain.Report, runErr error) []store.Outcome {
	out := make([]store.Outcome, 0, len(j.job.Types))
	ran := map[policy.Type]bool{}
	for _, t := range rep.Types {
		ran[t.Type] = true
		out = append(out, store.Outcome{
			Type: string(t.Type), Outcome: string(t.Outcome), Reason: t.Reason, Error: t.Err,
			BeforeSnapshotID: t.BeforeSnapshotID, AfterSnapshotID: t.AfterSnapshotID,
			DurationMs: durationMs(t.Duration),
		})
	}
	for _, name := range j.job.Types {
		t := policy.Type(name)
		if ran[t] {
			continue
		}
		o := j.notRun(t, runErr)
		o.DurationMs = durationMs(0)
		out = append(out, o)
	}
	return out
}

// durationMs is an outcome's duration_ms, which the runner always records.
func durationMs(d time.Duration) *int64 {
	ms := d.Milliseconds()
	return &ms
}

// notRun is the outcome of a type the chain did not reach. If the job could
// not start, the type is failed with that error — except when the error is
// another type's bad policy, which fails that type alone and skips the rest.
func (j *jobRun) notRun(t policy.Type, runErr error) store.Outcome {
	if j.chainStart || runErr == nil {
		return store.Outcome{Type: string(t), Outcome: string(chain.Skipped), Reason: "not run: the chain stopped early"}
	}
	var pe *jobspec.PolicyError
	if errors.As(runErr, &pe) && pe.Type != t {
		return store.Outcome{Type: string(t), Outcome: string(chain.Skipped), Reason: fmt.Sprintf("not run: the %s policy is invalid", pe.Type)}
	}
	return store.Outcome{Type: string(t), Outcome: string(chain.Failed), Reason: "not run: the job could not start", Error: runErr.Error()}
}

// failedTypes summarises the failed types of a report for the error column.
func failedTypes(rep chain.Report) string {
	var parts []string
	for _, t := range rep.Types {
		if t.Outcome == chain.Failed {
			parts = append(parts, fmt.Sprintf("%s failed: %s", t.Type, t.Err))
		}
	}
	return strings.Join(parts, "; ")
}

// openCatalog opens the spec's catalog with overlay on top of its
// properties.
func openCatalog(ctx context.Context, c CatalogSpec, overlay iceberg.Properties) (catalog.Catalog, error) {
	spec := catalogs.Spec{WarehouseDir: c.WarehouseDir, Name: c.Name}
	if c.WarehouseDir == "" {
		spec.Props = mergeProps(c.Properties, overlay)
	}
	return spec.Open(ctx)
}

// catalogWarehouse is the "warehouse" property the catalog is opened with,
// for orphan cleanup to recognise a table at the warehouse root
// (chain.Options.Warehouse). A REST catalog's server may answer with
// another warehouse in its config; that one is not seen here.
func catalogWarehouse(c CatalogSpec, overlay iceberg.Properties) string {
	if c.WarehouseDir != "" {
		props, err := catalogs.LocalProps(c.WarehouseDir)
		if err != nil {
			return ""
		}
		return props["warehouse"]
	}
	return mergeProps(c.Properties, overlay)["warehouse"]
}

// closeCatalog releases what a catalog holds (the SQL catalog's connection
// pool), if it can be closed.
func closeCatalog(cat catalog.Catalog) {
	if c, ok := cat.(catalog.Closer); ok {
		_ = c.Close()
	}
}

// chainSteps converts a spec's steps for chain.Run.
func chainSteps(s Spec) []chain.Step {
	steps := make([]chain.Step, len(s.Steps))
	for i, st := range s.Steps {
		steps[i] = chain.Step{Type: st.Type, Policy: st.Policy}
	}
	return steps
}
