package ingress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// This file is the catalog watcher: the commit ingress for catalogs that
// cannot call out (no webhook, no trigger). It polls the tables that have
// an onCommit policy in effect and turns a commit that changed data into a
// commit-job.

// Watcher defaults.
const (
	// DefaultWatchInterval is how often the watcher polls every watched
	// table.
	DefaultWatchInterval = time.Minute
	// DefaultWatchConcurrency bounds the table loads one poll runs at once.
	DefaultWatchConcurrency = 8
	// watchListBatch is how many tables one TablesForPolicy call returns.
	watchListBatch = 1000
)

// WatcherConfig configures a Watcher. Zero values take the defaults in each
// field's comment.
type WatcherConfig struct {
	// Interval is how often every watched table is polled. Defaults to
	// DefaultWatchInterval (60s).
	Interval time.Duration
	// Concurrency bounds the table loads (one metadata file read each) in
	// flight at once, over all catalogs. Defaults to
	// DefaultWatchConcurrency (8).
	Concurrency int
	// OnEnqueue, if set, is called after every commit-job the watcher
	// enqueued: created says whether a new row was made (false: the commit
	// coalesced into a pending row). It must not block.
	OnEnqueue func(created bool)
	// Clock paces Run. Defaults to the engine's clock.
	Clock scheduler.Clock
	// Log receives the watcher's logs. Defaults to the flow's logger.
	Log *zap.Logger
}

// Watcher polls the catalogs of the tables that have an onCommit policy in
// effect (an enabled policy with schedule.onCommit that governs the table,
// see store.Policies.TablesForPolicy) for each table's current metadata
// location, and enqueues the table's commit-job when it changed since the
// last poll with a commit that changed data: a move made only of replace
// snapshots (compactions and manifest rewrites, TMS's own among them) or
// of metadata changes (expiry, properties) enqueues nothing, so TMS's own
// commits do not turn into a second job. The first sight of a table only
// records its location.
//
// What it has seen lives in memory: a restarted coordinator re-primes on
// its first poll, so a commit made while no watcher ran is not turned into
// a commit-job (the table's next commit, or its crontab, is). Every node
// that runs a watcher polls on its own; their enqueues coalesce into the
// table's one commit-job row while it is pending, and the flow's gate (job
// in flight, minIntervalMs) drops a late duplicate.
type Watcher struct {
	f   *flow.Flow
	eng *scheduler.Engine
	cfg WatcherConfig

	pollMu sync.Mutex // one poll at a time

	mu   sync.Mutex
	seen map[int64]seenState // table id → what the last poll saw
}

// seenState is what a poll saw of a table: its metadata location and its
// main branch's current snapshot (0: none).
type seenState struct {
	location string
	snapshot int64
}

// NewWatcher returns a watcher over the flow's catalogs and policies that
// enqueues commit-jobs on eng, which must run the flow's kinds.
func NewWatcher(f *flow.Flow, eng *scheduler.Engine, cfg WatcherConfig) (*Watcher, error) {
	if eng == nil {
		return nil, fmt.Errorf("%w: catalog watcher: the engine is required", invalid.ErrArgument)
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultWatchInterval)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultWatchConcurrency)
	switch {
	case cfg.Interval < 0:
		return nil, fmt.Errorf("%w: catalog watcher: interval must be positive, got %s", invalid.ErrArgument, cfg.Interval)
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("%w: catalog watcher: concurrency must be positive, got %d", invalid.ErrArgument, cfg.Concurrency)
	}
	if cfg.Clock == nil {
		cfg.Clock = eng.Clock()
	}
	if cfg.Log == nil {
		cfg.Log = f.Log()
	}
	return &Watcher{f: f, eng: eng, cfg: cfg, seen: map[int64]seenState{}}, nil
}

// WatchReport says what one Poll did.
type WatchReport struct {
	// Tables is how many tables have an onCommit policy in effect.
	Tables int
	// Primed counts tables seen for the first time: their location was
	// recorded, nothing enqueued.
	Primed int
	// Enqueued counts tables with a new commit that changed data: their
	// commit-job was enqueued.
	Enqueued int
	// NoData counts tables whose metadata moved without a commit that
	// changed data: only replace snapshots (compactions and manifest
	// rewrites, TMS's own included) or no new snapshot at all (snapshot
	// expiry, properties, schema). Nothing was enqueued.
	NoData int
	// Gone counts tables the catalog no longer has.
	Gone int
	// Recreated counts tables whose table-uuid changed: their new
	// incarnation was registered, to be primed at the next poll.
	Recreated int
	// Failed counts tables that could not be checked (catalog not
	// configured or unreachable, load error) or whose enqueue failed; they
	// are checked again at the next poll.
	Failed int
}

// Run polls at once and then every Interval until ctx ends, and returns
// nil then. Errors are logged; none stops it.
func (w *Watcher) Run(ctx context.Context) error {
	for {
		if _, err := w.Poll(ctx); err != nil && ctx.Err() == nil {
			w.cfg.Log.Warn("catalog watcher: poll failed; trying again at the next interval", zap.Error(err))
		}
		wait, stop := w.cfg.Clock.After(w.cfg.Interval)
		select {
		case <-ctx.Done():
			stop()
			return nil
		case <-wait:
		}
	}
}

// Poll checks every watched table once. A catalog that cannot be opened or
// a table that cannot be loaded is logged (one line per catalog) and
// counted in Failed; the error is only for the ledger (listing policies
// and tables) failing.
func (w *Watcher) Poll(ctx context.Context) (WatchReport, error) {
	w.pollMu.Lock()
	defer w.pollMu.Unlock()
	tables, err := w.watched(ctx)
	if err != nil {
		return WatchReport{}, fmt.Errorf("catalog watcher: list watched tables: %w", err)
	}
	rep := WatchReport{Tables: len(tables)}
	byCatalog := map[string][]store.Table{}
	for _, t := range tables {
		byCatalog[t.Catalog] = append(byCatalog[t.Catalog], t)
	}
	type catFailure struct {
		tables int
		first  error
	}
	var (
		mu     sync.Mutex // guards rep and failed
		failed = map[string]*catFailure{}
	)
	fail := func(catName string, n int, err error) { // under mu
		rep.Failed += n
		if failed[catName] == nil {
			failed[catName] = &catFailure{first: err}
		}
		failed[catName].tables += n
	}
	var eg errgroup.Group
	eg.SetLimit(w.cfg.Concurrency)
	for _, catName := range slices.Sorted(maps.Keys(byCatalog)) {
		cat, err := w.f.Catalog(ctx, catName)
		if err != nil {
			mu.Lock()
			fail(catName, len(byCatalog[catName]), err)
			mu.Unlock()
			continue
		}
		for _, t := range byCatalog[catName] {
			eg.Go(func() error {
				outcome, err := w.check(ctx, cat, t)
				mu.Lock()
				defer mu.Unlock()
				switch outcome {
				case watchPrimed:
					rep.Primed++
				case watchEnqueued:
					rep.Enqueued++
				case watchNoData:
					rep.NoData++
				case watchGone:
					rep.Gone++
				case watchRecreated:
					rep.Recreated++
				case watchFailed:
					fail(catName, 1, err)
				}
				return nil
			})
		}
	}
	_ = eg.Wait()
	for catName, f := range failed {
		w.cfg.Log.Warn("catalog watcher: tables of a catalog not checked; trying again at the next poll",
			zap.String("catalog", catName), zap.Int("tables", f.tables), zap.Error(f.first))
	}
	w.forget(tables)
	if rep.Enqueued > 0 || rep.NoData > 0 || rep.Failed > 0 || rep.Primed > 0 || rep.Recreated > 0 { // primed: a table newly watched
		w.cfg.Log.Info("catalog watcher polled", zap.Int("tables", rep.Tables), zap.Int("primed", rep.Primed),
			zap.Int("enqueued", rep.Enqueued), zap.Int("nodata", rep.NoData), zap.Int("gone", rep.Gone), zap.Int("recreated", rep.Recreated), zap.Int("failed", rep.Failed))
	}
	return rep, ctx.Err()
}

type watchOutcome int

const (
	watchUnchanged watchOutcome = iota
	watchPrimed
	watchEnqueued
	watchNoData
	watchGone
	watchFailed
	watchRecreated
)

// check loads one table and compares its metadata location with the last
// one seen; when it moved with a commit that changed data (see
// changedData), the table's commit-job is enqueued.
func (w *Watcher) check(ctx context.Context, cat catalog.Catalog, t store.Table) (watchOutcome, error) {
	ident := append(strings.Split(t.Namespace, "."), t.Name)
	tbl, err := cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		w.cfg.Log.Debug("catalog watcher: table gone from its catalog", zap.Int64("table", t.ID),
			zap.String("name", t.Catalog+"."+t.Namespace+"."+t.Name))
		w.mu.Lock()
		delete(w.seen, t.ID)
		w.mu.Unlock()
		return watchGone, nil
	}
	if err != nil {
		return watchFailed, fmt.Errorf("load %s.%s: %w", t.Namespace, t.Name, err)
	}
	if uuid := tbl.Metadata().TableUUID().String(); uuid != t.UUID {
		// Dropped and recreated: the new table is a new row, registered
		// here and primed at the next poll (its first sight); the old row
		// keeps its history and leaves the watched set.
		ref := t.TableRef
		ref.UUID = uuid
		nrow, err := w.f.Store().RegisterTable(ctx, ref)
		if err != nil {
			return watchFailed, fmt.Errorf("register the recreated table %s.%s: %w", t.Namespace, t.Name, err)
		}
		w.cfg.Log.Info("catalog watcher: table was dropped and recreated; registered the new table", zap.Int64("table", t.ID),
			zap.Int64("new_table", nrow.ID), zap.String("name", t.Catalog+"."+t.Namespace+"."+t.Name), zap.String("table_uuid", uuid))
		w.mu.Lock()
		delete(w.seen, t.ID)
		w.mu.Unlock()
		return watchRecreated, nil
	}
	now := seenState{location: tbl.MetadataLocation()}
	if s := tbl.CurrentSnapshot(); s != nil {
		now.snapshot = s.SnapshotID
	}
	w.mu.Lock()
	last, known := w.seen[t.ID]
	w.mu.Unlock()
	switch {
	case !known:
		w.remember(t.ID, now)
		return watchPrimed, nil
	case last.location == now.location:
		return watchUnchanged, nil
	case !changedData(tbl.Metadata(), last.snapshot):
		w.remember(t.ID, now)
		w.cfg.Log.Debug("catalog watcher: metadata moved without a data change (replace or metadata-only commits); nothing enqueued",
			zap.Int64("table", t.ID), zap.String("name", t.Catalog+"."+t.Namespace+"."+t.Name), zap.Int64("snapshot", now.snapshot))
		return watchNoData, nil
	}
	created, err := w.f.UpsertCommit(ctx, w.eng, t.ID)
	if err != nil {
		// The old location stays: the next poll sees the change again.
		return watchFailed, fmt.Errorf("enqueue the commit-job of table %d: %w", t.ID, err)
	}
	w.remember(t.ID, now)
	w.cfg.Log.Info("catalog watcher: commit seen; commit-job enqueued", zap.Int64("table", t.ID),
		zap.String("name", t.Catalog+"."+t.Namespace+"."+t.Name), zap.Int64("snapshot", now.snapshot), zap.Bool("created", created))
	if w.cfg.OnEnqueue != nil {
		w.cfg.OnEnqueue(created)
	}
	return watchEnqueued, nil
}

func (w *Watcher) remember(id int64, st seenState) {
	w.mu.Lock()
	w.seen[id] = st
	w.mu.Unlock()
}

// maxDataWalk bounds how many snapshots changedData walks back from the
// current one; a longer run of new snapshots counts as a data change.
const maxDataWalk = 10000

// changedData says whether the main branch's snapshots committed since
// snapshot last (0: the table had none) changed table data: whether one of
// them, walking back from the current snapshot along parent ids to last,
// has an operation other than replace (append, overwrite, delete, or none
// recorded). A replace snapshot rewrites files without changing data (the
// spec's meaning): a compaction or manifest rewrite, TMS's own or another
// engine's, owes the table no onCommit maintenance, and turning TMS's own
// commits into commit-jobs would run a second, empty job after every
// compaction. An unchanged current snapshot (expiry, a property or schema
// change) changed no data either. When the walk does not reach last (a
// rollback or a branch reset to other history, last expired, or more than
// maxDataWalk snapshots), it answers true: unknown history is maintained.
func changedData(meta table.Metadata, last int64) bool {
	cur := meta.CurrentSnapshot()
	if cur == nil {
		return false // every snapshot removed: no data to maintain
	}
	for s, n := cur, 0; s != nil && n < maxDataWalk; n++ {
		if s.SnapshotID == last {
			return false
		}
		if s.Summary == nil || s.Summary.Operation != table.OpReplace {
			return true
		}
		if s.ParentSnapshotID == nil {
			return last != 0 // the walk reached the root without meeting last
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	return true
}

// forget drops what was seen of tables no longer watched, so a table
// watched again later is primed afresh instead of compared with an old
// location.
func (w *Watcher) forget(watched []store.Table) {
	keep := make(map[int64]bool, len(watched))
	for _, t := range watched {
		keep[t.ID] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.seen {
		if !keep[id] {
			delete(w.seen, id)
		}
	}
}

// watched returns the registered tables governed by an enabled policy with
// schedule.onCommit, each once, by id.
func (w *Watcher) watched(ctx context.Context) ([]store.Table, error) {
	policies, err := w.f.Policies().ListPolicies(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[int64]store.Table{}
	for _, p := range policies {
		if !p.Enabled {
			continue
		}
		t, ok := policy.MaintenanceTypeOf(p.Type)
		if !ok {
			continue
		}
		c, err := policy.ParseContent(t, p.Content)
		if err != nil || !c.Schedule.OnCommit {
			continue
		}
		for after := int64(0); ; {
			batch, next, err := w.f.Policies().TablesForPolicy(ctx, p.ID, after, watchListBatch)
			if err != nil {
				return nil, fmt.Errorf("tables of policy %q: %w", p.Name, err)
			}
			for _, tbl := range batch {
				byID[tbl.ID] = tbl
			}
			if next == 0 {
				break
			}
			after = next
		}
	}
	out := make([]store.Table, 0, len(byID))
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		out = append(out, byID[id])
	}
	return out, nil
}
