package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tms-dev/tms/policy"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/drift"
	"github.com/tms-dev/tms/sampler"
)

// runner holds what every type of one chain shares.
type runner struct {
	cat   catalog.Catalog
	ident table.Identifier
	opts  Options
	log   *zap.Logger
	now   func() time.Time
	// last is the most recent sample and the metadata file and target size it
	// was taken at. The S0 of a type usually reads the same metadata as the
	// previous type's S1 (or S0, when it did not commit); sample reuses it
	// instead of reading every manifest again.
	last struct {
		metadataLocation string
		target           int64
		res              sampler.Result
	}
}

// sample samples tbl's current snapshot, reusing the previous sample when
// tbl is the same metadata file and target size (metadata files are
// immutable, so every metric but the clock-relative snapshot age is the
// same; that one is refreshed).
func (r *runner) sample(ctx context.Context, tbl *table.Table, opts sampler.Options) (sampler.Result, error) {
	if l := r.last; l.metadataLocation != "" && l.metadataLocation == tbl.MetadataLocation() && l.target == opts.TargetFileSize && !opts.ScanTasks {
		res := l.res
		now := time.Now
		if opts.Now != nil {
			now = opts.Now
		}
		res.Metrics.OldestSnapshotAgeMs = sampler.OldestSnapshotAgeMs(tbl.Metadata(), now())
		return res, nil
	}
	res, err := sampler.Sample(ctx, tbl, 0, opts)
	if err != nil {
		return res, err
	}
	r.last.metadataLocation, r.last.target, r.last.res = tbl.MetadataLocation(), opts.TargetFileSize, res
	r.last.res.Tasks = nil // the metrics are what later types reuse; the file list goes to this type only
	return res, nil
}

// stepState is one type in flight: its S0, the table it planned from, and
// the files it wrote that no commit has claimed yet.
type stepState struct {
	r    *runner
	t    Type
	tbl  *table.Table // the S0 table, writing through rec
	base drift.Base
	s0   sampler.Result
	rec  *recorder
	// commits counts the commits of this type that landed.
	commits int
	// lostAnswers counts the commits that returned an error and that the
	// reloaded table showed had landed; retriedCommits those made again
	// because the catalog had not applied them (see lostanswer.go).
	lostAnswers, retriedCommits int
	// s0Snapshots are the snapshot ids in the metadata at S0.
	s0Snapshots map[int64]bool
	// s0Recorded reports Hooks.Sampled was called with S0 (recordS0).
	s0Recorded bool
	rep        *TypeReport
}

// driftError ends a type as ended-drift: HEAD moved after S0.
type driftError struct{ res drift.Result }

func (e *driftError) Error() string { return "table changed after S0: " + e.res.Reason }

// hookError is an error of a caller hook; it stops the chain.
type hookError struct {
	what string
	err  error
}

func (e *hookError) Error() string { return e.what + ": " + e.err.Error() }
func (e *hookError) Unwrap() error { return e.err }

// skip ends a type as skipped with a reason.
type skip struct{ reason string }

func (s skip) Error() string { return s.reason }

func run(ctx context.Context, cat catalog.Catalog, ident table.Identifier, steps []Step, opts Options) (Report, error) {
	start := time.Now()
	rep := Report{Table: catalogs.IdentString(ident)}
	if cat == nil {
		return rep, errors.New("chain: nil catalog")
	}
	if err := checkSteps(steps); err != nil {
		return rep, err
	}
	r := &runner{cat: cat, ident: ident, opts: opts, log: opts.Log, now: opts.Now}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.log = r.log.With(zap.String("table", rep.Table))

	if n, err := r.finishPendingDeletes(ctx); err != nil {
		r.log.Warn("finish pending deletes", zap.Error(err))
	} else {
		rep.FinishedDeletes = n
	}
	var stopErr error
	for i, st := range steps {
		tr, err := r.runStep(ctx, st)
		rep.Types = append(rep.Types, tr)
		if i == 0 || rep.BeforeSnapshotID == 0 {
			rep.BeforeSnapshotID = tr.BeforeSnapshotID
		}
		if tr.AfterSnapshotID != 0 || tr.BeforeSnapshotID != 0 {
			rep.AfterSnapshotID = tr.AfterSnapshotID
		}
		if err != nil {
			stopErr = err
			break
		}
	}
	if tbl, err := cat.LoadTable(context.WithoutCancel(ctx), ident); err == nil {
		rep.TableUUID = tbl.Metadata().TableUUID().String()
		if s := tbl.CurrentSnapshot(); s != nil {
			rep.AfterSnapshotID = s.SnapshotID
		}
	}
	rep.Duration = time.Since(start)
	return rep, stopErr
}

func checkSteps(steps []Step) error {
	last := -1
	for _, s := range steps {
		i := policy.Rank(s.Type)
		if i < 0 {
			return fmt.Errorf("%w: unknown maintenance type %q (want one of %s)", ErrInvalidPolicy, s.Type, policy.TypeList())
		}
		if i <= last {
			return fmt.Errorf("%w: step %q is out of chain order or repeated (order: %s)", ErrInvalidPolicy, s.Type, policy.TypeList())
		}
		last = i
	}
	return nil
}

// runStep runs one type. Its error is non-nil only when the chain must stop.
func (r *runner) runStep(ctx context.Context, st Step) (tr TypeReport, stop error) {
	start := time.Now()
	tr = TypeReport{Type: st.Type}
	log := r.log.With(zap.String("type", string(st.Type)))
	defer func() {
		tr.Duration = time.Since(start)
		log.Info("maintenance type finished", zap.String("outcome", string(tr.Outcome)),
			zap.String("reason", tr.Reason), zap.Duration("elapsed", tr.Duration))
	}()
	fail := func(err error) {
		tr.Outcome, tr.Err = Failed, err.Error()
		tr.Reason = err.Error()
	}
	if err := ctx.Err(); err != nil {
		fail(err)
		return tr, err
	}
	work, target, err := r.prepare(st)
	if err != nil {
		fail(err)
		return tr, nil
	}
	tbl, err := catalogs.LoadTable(ctx, r.cat, r.ident)
	if err != nil {
		fail(err)
		return tr, nil
	}
	if v := tbl.Metadata().Version(); v < 1 || v > 3 {
		fail(fmt.Errorf("unsupported table format version %d", v))
		return tr, nil
	}
	// A compaction plans from S0's own manifest read (see planCompaction).
	sopts := sampler.Options{Now: r.now, TargetFileSize: target, ScanTasks: st.Type == Compaction}
	s0, err := r.sample(ctx, tbl, sopts)
	if err != nil {
		fail(fmt.Errorf("sample S0: %w", err))
		return tr, nil
	}
	tr.BeforeSnapshotID, tr.AfterSnapshotID = s0.SnapshotID, s0.SnapshotID
	tr.MetricsBefore, tr.MetricsAfter = s0.Metrics, s0.Metrics
	s := &stepState{r: r, t: st.Type, base: drift.BaseOf(tbl), s0: s0, rec: &recorder{}, rep: &tr, s0Snapshots: map[int64]bool{}}
	for _, snap := range tbl.Metadata().Snapshots() {
		s.s0Snapshots[snap.SnapshotID] = true
	}
	s.tbl = recordingTable(tbl, r.cat, s.rec)

	reason, err := work(ctx, s, log)
	if herr := s.recordS0(ctx); herr != nil {
		// Only a type that never reached its drift gate records S0 here,
		// so it committed nothing.
		if removed, cerr := s.cleanup(context.WithoutCancel(ctx)); cerr == nil && removed > 0 {
			log.Warn("files written before a failed sampled hook", zap.Int("removed", removed))
		}
		fail(herr)
		return tr, fmt.Errorf("chain %s: %w", st.Type, herr)
	}
	switch {
	case err == nil:
		tr.Outcome, tr.Reason = Done, reason
		// iceberg-go's commit retry can leave manifests of superseded
		// attempts behind; they are ours and unreferenced.
		if removed, cerr := s.cleanup(context.WithoutCancel(ctx)); cerr != nil {
			log.Warn("cleanup after commit", zap.Error(cerr))
		} else if removed > 0 {
			tr.Reason += fmt.Sprintf("; removed %d unreferenced files left by commit retries", removed)
		}
		tr.Reason += s.lostAnswerText()
	case errors.As(err, new(skip)):
		tr.Outcome, tr.Reason = Skipped, err.Error()
		if removed, cerr := s.cleanup(context.WithoutCancel(ctx)); cerr != nil || removed > 0 {
			log.Warn("files written by a skipped type", zap.Int("removed", removed), zap.Error(cerr))
		}
	default:
		tr.Outcome, tr.Reason, tr.Err = classify(err), err.Error(), err.Error()
		if tr.Outcome == EndedDrift {
			tr.Err = ""
		}
		if removed, cerr := s.cleanup(context.WithoutCancel(ctx)); cerr != nil {
			tr.Reason += "; cleanup: " + cerr.Error()
		} else if removed > 0 {
			tr.Reason += fmt.Sprintf("; removed %d written files", removed)
		}
		if s.commits > 0 {
			tr.Reason += fmt.Sprintf(" (%d earlier commits of this type were kept)", s.commits)
		}
		var he *hookError
		if errors.As(err, &he) || ctx.Err() != nil {
			stop = fmt.Errorf("chain %s: %w", st.Type, err)
		}
	}
	if s.commits == 0 {
		return tr, stop
	}
	after, err := catalogs.LoadTable(ctx, r.cat, r.ident)
	if err == nil {
		var s1 sampler.Result
		sopts.ScanTasks = false
		if s1, err = r.sample(ctx, after, sopts); err == nil {
			tr.AfterSnapshotID, tr.MetricsAfter = s1.SnapshotID, s1.Metrics
			if h := r.opts.Hooks.Sampled; h != nil {
				if herr := h(ctx, st.Type, WhenAfter, s1); herr != nil && stop == nil {
					stop = fmt.Errorf("chain %s: %w", st.Type, &hookError{"sampled hook", herr})
				}
			}
		}
	}
	if err != nil && stop == nil {
		tr.Reason += "; sample S1: " + err.Error()
	}
	return tr, stop
}

// workFunc decides and works on one type. It returns the reason of a Done
// outcome, a skip error for Skipped, or the error that ended the type.
type workFunc func(ctx context.Context, s *stepState, log *zap.Logger) (string, error)

// prepare parses the policy of st and returns its work function and the
// target file size to sample with (0: the table's), so that a compaction
// policy's target-file-size-bytes is also the T of its data-file-mse.
func (r *runner) prepare(st Step) (workFunc, int64, error) {
	invalid := func(err error) error {
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
		}
		return nil
	}
	switch st.Type {
	case Compaction:
		p, err := policy.ParseCompaction(st.Policy)
		return func(ctx context.Context, s *stepState, log *zap.Logger) (string, error) {
			return s.compact(ctx, p, log)
		}, p.TargetFileSize, invalid(err)
	case DeleteRewrite:
		p, err := policy.ParseDeleteRewrite(st.Policy)
		return func(ctx context.Context, s *stepState, log *zap.Logger) (string, error) {
			return s.rewriteDeletes(ctx, p, log)
		}, 0, invalid(err)
	case ManifestRewrite:
		p, err := policy.ParseManifests(st.Policy)
		return func(ctx context.Context, s *stepState, log *zap.Logger) (string, error) {
			return s.rewriteManifests(ctx, p, log)
		}, 0, invalid(err)
	case SnapshotExpiry:
		p, err := policy.ParseExpiry(st.Policy)
		return func(ctx context.Context, s *stepState, log *zap.Logger) (string, error) {
			return s.expire(ctx, p, log)
		}, 0, invalid(err)
	case OrphanCleanup:
		p, err := policy.ParseOrphans(st.Policy)
		return func(ctx context.Context, s *stepState, log *zap.Logger) (string, error) {
			return s.cleanOrphans(ctx, p, log)
		}, 0, invalid(err)
	}
	return nil, 0, fmt.Errorf("%w: unknown maintenance type %q", ErrInvalidPolicy, st.Type)
}

// recordS0 calls Hooks.Sampled with S0, once. A type records it at its
// drift gate, once the table is known not to have moved, so that the
// ledger write is not part of the window in which a concurrent commit makes
// the type end ended-drift; a type that never reached its gate records it
// when its work returns.
func (s *stepState) recordS0(ctx context.Context) error {
	if s.s0Recorded {
		return nil
	}
	s.s0Recorded = true
	if h := s.r.opts.Hooks.Sampled; h != nil {
		if err := h(ctx, s.t, WhenBefore, s.s0); err != nil {
			return &hookError{"sampled hook", err}
		}
	}
	return nil
}

// gate runs immediately before every commit: drift against the base, then
// the caller's BeforeCommit hook.
func (s *stepState) gate(ctx context.Context) error {
	d, err := drift.Check(ctx, s.r.cat, s.base)
	if err != nil {
		return fmt.Errorf("check drift before commit: %w", err)
	}
	if !d.Kind.MayCommit() {
		return &driftError{d}
	}
	if err := s.recordS0(ctx); err != nil {
		return err
	}
	if h := s.r.opts.Hooks.BeforeCommit; h != nil {
		if err := h(ctx, s.t); err != nil {
			return &hookError{"before commit", err}
		}
	}
	return nil
}

// committed records a landed commit: later commits of this type plan from
// the new head. The recorder keeps its files: cleanup keeps those the table
// references, so only files of a later, failed commit are removed.
func (s *stepState) committed(tbl *table.Table) {
	s.commits++
	s.base = drift.BaseOf(tbl)
	s.tbl = recordingTable(tbl, s.r.cat, s.rec)
}

// classify maps the error that ended a type to its outcome.
//
// iceberg-go v0.7.0 reports a lost commit race in two ways. When the
// concurrent commit landed before our commit loaded the table, the SQL
// catalog's requirement check (AssertRefSnapshotID) fails with a plain
// "requirement failed: …" error that wraps nothing. When it landed between
// that check and the compare-and-swap UPDATE, the error wraps
// table.ErrCommitFailed; Table.doCommit retries those only when the table
// property commit.retry.num-retries is above its default of 0, and its
// conflict validators then report ErrConflictingDataFiles,
// ErrConflictingDeleteFiles or ErrDataFilesMissing (all wrapping
// ErrCommitFailed) or ErrCommitDiverged.
func classify(err error) Outcome {
	var de *driftError
	var ce *conflictError
	switch {
	case errors.As(err, &de):
		return EndedDrift
	case errors.As(err, &ce), isConflict(err):
		return Conflict
	}
	return Failed
}

func isConflict(err error) bool {
	return errors.Is(err, table.ErrCommitFailed) || errors.Is(err, table.ErrCommitDiverged) ||
		strings.Contains(err.Error(), "requirement failed:")
}
