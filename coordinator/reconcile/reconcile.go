package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/store"
)

// Reconciler defaults.
const (
	// DefaultSubmitDeadline is how long an in-flight row may wait for its
	// external job id: a coordinator that died between inserting the row and
	// submitting the job leaves a row nobody will ever run.
	DefaultSubmitDeadline = 10 * time.Minute
	// DefaultUnknownDeadline is how long after it started (or was created)
	// an in-flight row whose job the submitter does not know is left alone.
	// A local runner started by another coordinator process keeps running
	// and closes its own row; this only catches jobs that vanished.
	DefaultUnknownDeadline = 6 * time.Hour
	// DefaultHistoryAge and DefaultHistoryPerTable bound the finished ledger
	// rows kept (the newest row of each table and policy always stays).
	DefaultHistoryAge      = 90 * 24 * time.Hour
	DefaultHistoryPerTable = 500
	// DefaultCommitEventAge is how long commit event ids are remembered: a
	// sender retrying an event within it gets "duplicate". It is far longer
	// than any webhook retry policy.
	DefaultCommitEventAge = 7 * 24 * time.Hour
	reconcilePage         = 500
)

// ReconcilerConfig tunes a Reconciler. Zero values take the defaults.
type ReconcilerConfig struct {
	SubmitDeadline  time.Duration
	UnknownDeadline time.Duration
	// HistoryAge purges finished rows older than this; negative keeps all.
	HistoryAge time.Duration
	// HistoryPerTable purges finished rows beyond this many per table;
	// negative keeps all.
	HistoryPerTable int
	// CommitEventAge purges commit event ids older than this; negative
	// keeps all.
	CommitEventAge time.Duration
	Clock          scheduler.Clock
	Log            *zap.Logger
}

// Reconciler closes ledger rows that nobody else will close: the runner
// crashed or was killed (its job is terminal but the row is in flight), the
// job was never submitted, or it vanished (unknown to the submitter past a
// deadline). It bumps the row's fence before closing it, so a runner that
// is in fact still alive is fenced out instead of overwriting the decision.
// It never invents metrics: a closed row gets a status and an error, no
// after snapshot. Run one at a time across nodes (serve runs it as a
// recurring task, whose claim is the lease).
type Reconciler struct {
	st    store.Store
	sub   submit.Submitter
	cfg   ReconcilerConfig
	nodes NodeLiveness // nil: node liveness is not looked at
}

// NodeLiveness is what the reconciler asks about coordinator nodes (the
// Engine implements it): the nodes' heartbeats, and how old a heartbeat
// makes its node dead.
type NodeLiveness interface {
	ListNodes(ctx context.Context) ([]store.Node, error)
	DeadNodeAfter() time.Duration
}

// WatchNodes makes the reconciler close the in-flight rows of coordinator
// nodes that died or restarted: a row whose node's heartbeat is older than
// DeadNodeAfter (or whose node row is gone), or whose node started again
// after the row was created, is closed at once when the submitter cannot
// vouch for its job (unknown to it, or never submitted), instead of after
// SubmitDeadline or UnknownDeadline. Call it before the first Sweep.
func (r *Reconciler) WatchNodes(n NodeLiveness) { r.nodes = n }

// ReconcileReport counts what one Sweep did.
type ReconcileReport struct {
	Checked int
	// Closed maps the status rows were closed with to their count.
	Closed map[store.JobStatus]int
	Purged int64
	// PurgedEvents counts the commit event ids purged.
	PurgedEvents int64
}

// NewReconciler returns a Reconciler over st asking sub about jobs.
func NewReconciler(st store.Store, sub submit.Submitter, cfg ReconcilerConfig) *Reconciler {
	cfg.SubmitDeadline = cmp.Or(cfg.SubmitDeadline, DefaultSubmitDeadline)
	cfg.UnknownDeadline = cmp.Or(cfg.UnknownDeadline, DefaultUnknownDeadline)
	cfg.HistoryAge = cmp.Or(cfg.HistoryAge, DefaultHistoryAge)
	cfg.HistoryPerTable = cmp.Or(cfg.HistoryPerTable, DefaultHistoryPerTable)
	cfg.CommitEventAge = cmp.Or(cfg.CommitEventAge, DefaultCommitEventAge)
	if cfg.Clock == nil {
		cfg.Clock = scheduler.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Reconciler{st: st, sub: sub, cfg: cfg}
}

// Sweep looks at every in-flight row once, closes those that must be
// closed, then purges history. A Status error for one job is logged and
// that row left for the next sweep: it is not evidence about the job.
func (r *Reconciler) Sweep(ctx context.Context) (ReconcileReport, error) {
	rep := ReconcileReport{Closed: map[store.JobStatus]int{}}
	nodes, err := r.nodeStates(ctx)
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	var after int64
	for {
		jobs, err := r.st.ListInFlightJobs(ctx, after, reconcilePage)
		if err != nil {
			return rep, fmt.Errorf("reconcile: %w", err)
		}
		for _, j := range jobs {
			after = j.ID
			rep.Checked++
			status, reason, err := r.verdict(ctx, j, nodes)
			if err != nil {
				r.cfg.Log.Warn("reconcile: cannot tell how a job is doing; trying again next sweep",
					zap.Int64("job", j.ID), zap.String("external_job_id", j.JobID), zap.Error(err))
				continue
			}
			if status == "" {
				continue
			}
			closed, err := r.close(ctx, j.ID, status, reason)
			if err != nil {
				return rep, fmt.Errorf("reconcile job %d: %w", j.ID, err)
			}
			if closed {
				rep.Closed[status]++
				r.cfg.Log.Warn("reconciler closed a job row", zap.Int64("job", j.ID), zap.Int64("table", j.TableID),
					zap.String("external_job_id", j.JobID), zap.String("status", string(status)), zap.String("reason", reason))
			}
		}
		if len(jobs) < reconcilePage {
			break
		}
	}
	p := store.Purge{}
	if r.cfg.HistoryAge > 0 {
		p.FinishedBefore = r.cfg.Clock.Now().Add(-r.cfg.HistoryAge)
	}
	if r.cfg.HistoryPerTable > 0 {
		p.KeepPerTable = r.cfg.HistoryPerTable
	}
	n, err := r.st.PurgeJobs(ctx, p)
	if err != nil {
		return rep, fmt.Errorf("reconcile: %w", err)
	}
	rep.Purged = n
	if r.cfg.CommitEventAge > 0 {
		if rep.PurgedEvents, err = r.st.PurgeCommitEvents(ctx, r.cfg.Clock.Now().Add(-r.cfg.CommitEventAge)); err != nil {
			return rep, fmt.Errorf("reconcile: %w", err)
		}
	}
	return rep, nil
}

// nodeStates returns the coordinator nodes by id, nil when liveness is
// not watched.
func (r *Reconciler) nodeStates(ctx context.Context) (map[string]store.Node, error) {
	if r.nodes == nil {
		return nil, nil
	}
	ns, err := r.nodes.ListNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list coordinator nodes: %w", err)
	}
	out := make(map[string]store.Node, len(ns))
	for _, n := range ns {
		out[n.ID] = n
	}
	return out, nil
}

// gone says why the node that created row j cannot be running its job any
// more ("" if it may be): the node is dead (no heartbeat for the dead-node
// limit, or its row was removed) or it started again after the row was
// created (its submitter's queue and children did not survive). Rows of no
// node (manual runs, rows older than the node column) and a reconciler
// that does not watch liveness say "".
func (r *Reconciler) gone(j store.Job, nodes map[string]store.Node, now time.Time) string {
	if nodes == nil || j.Node == "" {
		return ""
	}
	n, ok := nodes[j.Node]
	switch {
	case !ok:
		return fmt.Sprintf("its coordinator node %s is gone (no node row)", j.Node)
	case now.Sub(n.LastHeartbeat) > r.nodes.DeadNodeAfter():
		return fmt.Sprintf("its coordinator node %s is dead (last heartbeat %s ago, limit %s)",
			j.Node, now.Sub(n.LastHeartbeat).Round(time.Second), r.nodes.DeadNodeAfter())
	case n.StartedAt.After(j.CreatedAt):
		return fmt.Sprintf("its coordinator node %s restarted at %s, after the row was created", j.Node, n.StartedAt.Format(time.RFC3339))
	}
	return ""
}

// verdict says how to close in-flight row j, or "" to leave it.
func (r *Reconciler) verdict(ctx context.Context, j store.Job, nodes map[string]store.Node) (store.JobStatus, string, error) {
	now := r.cfg.Clock.Now()
	gone := r.gone(j, nodes, now)
	if j.JobID == "" {
		if gone != "" {
			return store.StatusLost, fmt.Sprintf("reconciler: the job was never submitted and %s", gone), nil
		}
		if age := now.Sub(j.CreatedAt); age > r.cfg.SubmitDeadline {
			return store.StatusFailed, fmt.Sprintf("reconciler: the job was never submitted (no external job id %s after the row was created)", age.Round(time.Second)), nil
		}
		return "", "", nil
	}
	st, err := r.sub.Status(ctx, j.JobID)
	if err != nil {
		return "", "", err
	}
	switch st.State {
	case submit.JobSucceeded:
		return store.StatusLost, fmt.Sprintf("reconciler: job %s exited 0 but never closed its row", j.JobID), nil
	case submit.JobCancelled:
		return store.StatusCancelled, fmt.Sprintf("reconciler: job %s was cancelled before it closed its row: %s", j.JobID, st.Message), nil
	case submit.JobFailed:
		if st.ExitCode < 0 {
			return store.StatusFailed, fmt.Sprintf("reconciler: job %s ended without closing its row (killed or never started): %s", j.JobID, st.Message), nil
		}
		return store.StatusFailed, fmt.Sprintf("reconciler: job %s exited with code %d without closing its row: %s", j.JobID, st.ExitCode, st.Message), nil
	case submit.JobUnknown:
		if a, ok := r.sub.(interface{ Authoritative() bool }); ok && a.Authoritative() {
			// A remote submitter (Gravitino) knows every job any node
			// submitted: unknown there means the job is gone, not that
			// another process holds it, so there is nothing to wait for.
			return store.StatusLost, fmt.Sprintf("reconciler: job %s is unknown to the submitter, which knows every job of every node: %s", j.JobID, st.Message), nil
		}
		if gone != "" {
			return store.StatusLost, fmt.Sprintf("reconciler: job %s is unknown to the submitter and %s", j.JobID, gone), nil
		}
		since := j.CreatedAt
		if !j.StartedAt.IsZero() {
			since = j.StartedAt
		}
		if age := now.Sub(since); age > r.cfg.UnknownDeadline {
			return store.StatusLost, fmt.Sprintf("reconciler: job %s is unknown to the submitter %s after it started", j.JobID, age.Round(time.Second)), nil
		}
	}
	return "", "", nil
}

// close fences the row out and finishes it, unless the runner finished it
// meanwhile (the runner closes its row before its process ends, so a row
// still open after a terminal status was left open). It reports whether
// this call closed it.
func (r *Reconciler) close(ctx context.Context, id int64, status store.JobStatus, reason string) (bool, error) {
	j, err := r.st.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !j.InFlight() {
		return false, nil
	}
	_, err = r.st.CloseJob(ctx, id, store.Finish{Status: status, Error: reason, At: r.cfg.Clock.Now()})
	if errors.Is(err, store.ErrNotInFlight) {
		return false, nil // closed by someone else since the read
	}
	return err == nil, err
}
