package submit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/policy"
)

// Errors of Submitter implementations.
var (
	// ErrUnknownJob is returned by Cancel for an external job id the
	// submitter does not know (see JobUnknown).
	ErrUnknownJob = errors.New("unknown external job id")
	// ErrInvalidJobRequest is wrapped by Submit's error for a request that
	// cannot be submitted; the message names the field.
	ErrInvalidJobRequest = invalid.New("invalid job request")
	// ErrSubmitterClosed is returned by Submit after the submitter was closed
	// (the coordinator is shutting down).
	ErrSubmitterClosed = errors.New("submitter closed")
)

// Submitter is runJob's seam: it starts tms-runner for a ledger row wherever
// the configuration says (a local child process, a Gravitino job, a command
// template), reports on it and cancels it. A submitter never writes the
// ledger: the runner closes its own row, and the reconciler closes the rows
// of jobs that Status reports terminal (or unknown past a deadline) while the
// row is still in flight.
//
// Implementations are safe for concurrent use.
type Submitter interface {
	// Submit hands the job to the backend and returns its external job id,
	// which the caller stores in the row (store.Store.SetJobID). It returns
	// once the job is accepted, never after the job's duration: a job that
	// cannot start at once (a concurrency limit) is queued. An error means
	// nothing was submitted.
	Submit(ctx context.Context, req JobRequest) (externalJobID string, err error)
	// Status reports the job's state. An id the submitter does not know (it
	// was issued by another process, or before a restart) is JobUnknown with
	// a nil error; an error means the backend could not be asked, which is
	// not evidence about the job.
	Status(ctx context.Context, externalJobID string) (JobStatus, error)
	// Cancel asks the job to stop: a queued job never starts, a running one
	// is told to stop (tms-runner closes its row cancelled). It returns nil
	// for a job that already ended, and an error wrapping ErrUnknownJob for
	// an id the submitter does not know. Whether Cancel waits for the job to
	// end is up to the implementation; Status says when it has.
	Cancel(ctx context.Context, externalJobID string) error
}

// JobRequest is everything a submitter needs to start `tms-runner run` for
// one ledger row. The work itself (catalog, table, steps, policies) is in
// the row's spec, which the runner reads; the request only says which row,
// under which fence, and carries what must not be stored: credentials.
//
// JobRequest's String and GoString leave CatalogProps out, so logging or
// printing a request never prints a secret.
type JobRequest struct {
	// JobID is the ledger row id (table_maintenance_job.id). Required.
	JobID int64
	// Fence is the row's fence when it was created or last bumped; the
	// runner's ledger writes carry it. Required.
	Fence int64
	// DBURL is the ledger URL the runner opens (postgres://… or
	// sqlite://PATH). Required. It may hold a password; submitters keep it
	// out of process arguments when it does.
	DBURL string
	// Table is the table as CATALOG.NAMESPACE.TABLE, for logs and job
	// names; the runner takes the table from the spec.
	Table string
	// CatalogProps are the catalog client's credentials and any other
	// secret catalog properties (token, credential, s3.secret-access-key …),
	// overlaid onto the spec's properties by the runner. Submitters pass them
	// through the job's environment (TMS_CATALOG_PROP_<KEY>=VALUE, see
	// runner.EnvPropPrefix) or a secret store, never through arguments, the
	// ledger or a log. Keys are spelled as iceberg-go spells them.
	CatalogProps map[string]string
	// Types are the maintenance types the row runs, in chain order (the
	// row's spec has them too), for backends that name jobs by them.
	Types []policy.Type
	// JobOptions are the policy's non-sensitive jobOptions (resources,
	// queue, …) for backends that have a use for them (a Gravitino jobConf,
	// a command template). The local submitter ignores them.
	JobOptions map[string]string
}

// String describes the request without its CatalogProps.
func (r JobRequest) String() string {
	return fmt.Sprintf("job %d (fence %d, table %s, %d catalog props)", r.JobID, r.Fence, r.Table, len(r.CatalogProps))
}

// GoString is String, so %#v does not print CatalogProps either.
func (r JobRequest) GoString() string { return "submit.JobRequest{" + r.String() + "}" }

// validate checks the fields every submitter needs. Errors wrap
// ErrInvalidJobRequest and name the field, never a value of CatalogProps.
func (r JobRequest) validate() error {
	switch {
	case r.JobID <= 0:
		return fmt.Errorf("%w: JobID must be a positive ledger row id, got %d", ErrInvalidJobRequest, r.JobID)
	case r.Fence <= 0:
		return fmt.Errorf("%w: Fence must be positive, got %d", ErrInvalidJobRequest, r.Fence)
	case r.DBURL == "":
		return fmt.Errorf("%w: DBURL is required", ErrInvalidJobRequest)
	}
	return nil
}

// JobState is where a submitted job is.
type JobState string

// The job states. Succeeded, failed and cancelled are terminal; unknown is
// not, since the job may still be running somewhere the submitter cannot see.
const (
	// JobQueued: accepted, waiting for a slot (or for the backend to start it).
	JobQueued JobState = "queued"
	// JobRunning: the runner is running.
	JobRunning JobState = "running"
	// JobSucceeded: the runner exited 0; its row is closed.
	JobSucceeded JobState = "succeeded"
	// JobFailed: the runner exited non-zero (or could not be started, or was
	// killed by something other than Cancel). JobStatus.Message says why;
	// JobStatus.Fenced marks a runner that was fenced out.
	JobFailed JobState = "failed"
	// JobCancelled: Cancel (or shutdown) stopped the job, or removed it from
	// the queue before it started.
	JobCancelled JobState = "cancelled"
	// JobUnknown: the submitter has no record of the id: it was issued by
	// another coordinator process or before a restart, or the record was
	// forgotten. The reconciler treats unknown past a deadline as lost.
	JobUnknown JobState = "unknown"
)

// Terminal reports whether the job has ended: succeeded, failed or
// cancelled.
func (s JobState) Terminal() bool {
	switch s {
	case JobSucceeded, JobFailed, JobCancelled:
		return true
	}
	return false
}

// JobStatus is what Status reports about one external job.
type JobStatus struct {
	// State is where the job is.
	State JobState
	// ExitCode is the runner's exit code once it exited (0 ok, 1 failure,
	// 2 usage, 4 fenced; see internal/cli); -1 while it has not exited,
	// when it was killed by a signal, never started, or is unknown.
	ExitCode int
	// Fenced is true when the runner exited because it was fenced out (exit
	// code 4): the row's fence moved on or the row was already finished, so
	// whatever the row says was decided by someone else. State is JobFailed.
	Fenced bool
	// Message says why a job failed or was cancelled (for a local runner,
	// with the last line it printed), or why the state is unknown. Empty
	// for queued, running and succeeded jobs. It never holds a credential.
	Message string
	// PID is the local runner's process id while it runs (0 otherwise, and
	// for backends without a local process).
	PID int
	// SubmittedAt, StartedAt and FinishedAt are when the job was accepted,
	// started and ended; zero when not (yet) known.
	SubmittedAt, StartedAt, FinishedAt time.Time
}

// Kind names the kind of s as the ledger records it (the submitter column
// of table_maintenance_job) and `serve --job-submitter` spells it: "local",
// "command" or "gravitino". A submitter with a Kind() string method (a test
// double, a wrapper) names itself; any other type is "".
func Kind(s Submitter) string {
	if k, ok := s.(interface{ Kind() string }); ok {
		return k.Kind()
	}
	switch s.(type) {
	case *LocalSubmitter:
		return "local"
	case *CommandSubmitter:
		return "command"
	case *GravitinoSubmitter:
		return "gravitino"
	}
	return ""
}
