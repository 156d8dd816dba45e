package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/store"
)

// Cancelled is what CancelJob did.
type Cancelled struct {
	// Closed reports the row was fenced out and closed cancelled here;
	// otherwise the submitter was asked to stop the job, and its runner
	// closes the row (or the reconciler does).
	Closed bool
	// Job is the row afterwards.
	Job store.Job
}

// SubmitterError is a cancel the submitter refused or could not deliver:
// nothing was changed.
type SubmitterError struct {
	JobID string
	Err   error
}

func (e *SubmitterError) Error() string {
	return fmt.Sprintf("the submitter could not cancel job %s: %v", e.JobID, e.Err)
}

func (e *SubmitterError) Unwrap() error { return e.Err }

// CancelJob cancels job row id, as the operator asked through via ("over
// the HTTP API", "from the command line (tms-coordinator jobs cancel)", "from
// the console"; the reason recorded on the row says it). A row with an
// external job id is cancelled through sub; the row is fenced out and
// closed cancelled here (store.CloseJob) when it was never submitted, when
// sub does not know its job (submitted by another node or before a restart,
// or sub is nil: the command line has no submitter), or when its job ended
// without its runner closing the row (a queued job taken off the queue).
// Its runner, wherever it runs, then stops at its next ledger write or
// commit check. A row already finished is a *NotInFlightError; a cancel
// the submitter failed a *SubmitterError.
func CancelJob(ctx context.Context, st store.Store, sub submit.Submitter, id int64, via string, now time.Time) (Cancelled, error) {
	j, err := st.GetJob(ctx, id)
	if err != nil {
		return Cancelled{}, err
	}
	if !j.InFlight() {
		return Cancelled{Job: j}, notInFlight(j)
	}
	reason := fmt.Sprintf("cancelled %s before it was submitted", via)
	switch {
	case j.JobID != "" && sub == nil:
		reason = fmt.Sprintf("cancelled %s; its runner, queued or running, is fenced out", via)
	case j.JobID != "":
		err := sub.Cancel(ctx, j.JobID)
		switch {
		case errors.Is(err, submit.ErrUnknownJob):
			reason = fmt.Sprintf("cancelled %s; this coordinator's submitter does not know job %s, so the row was fenced out", via, j.JobID)
		case err != nil:
			return Cancelled{Job: j}, &SubmitterError{JobID: j.JobID, Err: err}
		default:
			reason = endedReason(ctx, st, sub, j, via)
		}
	}
	if reason == "" {
		return Cancelled{Job: j}, nil
	}
	closed, err := st.CloseJob(ctx, id, store.Finish{Status: store.StatusCancelled, Error: reason, At: now})
	if errors.Is(err, store.ErrNotInFlight) {
		return Cancelled{Job: closed}, notInFlight(closed)
	}
	if err != nil {
		return Cancelled{Job: j}, err
	}
	return Cancelled{Closed: true, Job: closed}, nil
}

// endedReason says why to close row j after its submitter accepted the
// cancel, or "" to leave the row to its runner: a job the submitter now
// reports ended whose row is still open never had a runner to close it (a
// queued job removed from the queue) or lost it, so the row is closed at
// once instead of at the next reconcile.
func endedReason(ctx context.Context, st store.Store, sub submit.Submitter, j store.Job, via string) string {
	status, err := sub.Status(ctx, j.JobID)
	if err != nil || !status.State.Terminal() {
		return ""
	}
	if cur, err := st.GetJob(ctx, j.ID); err != nil || !cur.InFlight() {
		return "" // the runner closed it (or it is gone): nothing to do
	}
	if status.StartedAt.IsZero() {
		return fmt.Sprintf("cancelled %s before its runner started (job %s was queued)", via, j.JobID)
	}
	return fmt.Sprintf("cancelled %s; job %s ended without closing its row: %s", via, j.JobID, status.Message)
}

// NotInFlightError is CancelJob's answer for a row already finished:
// nothing was changed. It is a store.ErrNotInFlight.
type NotInFlightError struct{ Job store.Job }

func (e *NotInFlightError) Error() string {
	return fmt.Sprintf("job %d already finished: status %s at %s; nothing to cancel",
		e.Job.ID, e.Job.Status, e.Job.FinishedAt.Format(time.RFC3339))
}

func (e *NotInFlightError) Unwrap() error { return store.ErrNotInFlight }

func notInFlight(j store.Job) error { return &NotInFlightError{Job: j} }
