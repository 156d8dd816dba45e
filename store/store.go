// Package store owns every SQL statement TMS runs: the maintenance ledger
// (maintained tables, job rows, per-snapshot metrics) and the schema
// migrations that create it. It has two backends behind one interface, Store:
// PostgreSQL through pgx/v5 (production, several coordinator nodes) and an
// embedded SQLite file through modernc.org/sqlite (pure Go, one node). Both
// pass the same conformance suite, package storetest.
//
// Rules the rest of TMS relies on:
//
//   - No other package runs SQL or imports a database driver; package
//     migrations only holds the migration text.
//   - Driver errors are mapped here to the sentinel errors below (ErrNotFound,
//     ErrStaleFence, ErrInFlight, ErrInvalidArgument, ErrSchemaBehind,
//     ErrSchemaAhead); callers test them with errors.Is and never look at
//     driver error types.
//   - Fenced writes check the fence inside the write itself (the UPDATE's
//     WHERE clause, in one transaction with the lookup that classifies a
//     failure), never by reading first and writing after.
//   - At most one in-flight job row per table (whatever its policy, trigger
//     or types) is enforced by a partial unique index, not by a
//     check-then-insert.
//   - Open never migrates; Migrate does, and is safe when several nodes run
//     it at once.
//
// The package does not log on its own: it logs only through the *zap.Logger
// it is given, and only for schema changes.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/migrations"
)

// Sentinel errors. Every error a Store returns for one of these conditions
// wraps the sentinel, so callers use errors.Is.
var (
	// ErrNotFound means the row asked for (table, job) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrStaleFence means a fenced write was rejected: the fence it carried is
	// no longer the row's fence, or the row is already finished. Nothing was
	// changed. The writer has been fenced out and must stop acting for the job.
	ErrStaleFence = errors.New("stale fence")
	// ErrInFlight means a job row of the same table is still in flight
	// (finished_at IS NULL), so no second one may be created. Losing that
	// race is an ordinary outcome: the caller defers its job.
	ErrInFlight = errors.New("job in flight")
	// ErrNotInFlight is CloseJob's answer for a row that was already
	// finished: nothing was written. It is an ErrStaleFence (a finished
	// row accepts no fenced write).
	ErrNotInFlight = fmt.Errorf("%w: the job row is no longer in flight", ErrStaleFence)
	// ErrInvalidArgument means the caller passed a value the store refuses
	// (an empty name, a non-object metrics value, an unknown URL scheme …).
	ErrInvalidArgument = invalid.New("invalid argument")
	// ErrSchemaBehind means the database's schema is older than this binary;
	// run `tms-coordinator migrate`.
	ErrSchemaBehind = errors.New("database schema is behind")
	// ErrSchemaAhead means the database's schema is newer than this binary
	// knows; the binary must be upgraded, and it must not write to it.
	ErrSchemaAhead = errors.New("database schema is ahead")
)

// Backend names returned by Store.Backend.
const (
	BackendPostgres = migrations.Postgres
	BackendSQLite   = migrations.SQLite
)

// NoPolicy is the policy id of job rows and metrics that belong to no policy:
// manual and replay runs.
const NoPolicy int64 = 0

// Trigger says why a job row was created.
type Trigger string

// The triggers a job row may have (enforced by a CHECK in the schema).
const (
	TriggerCron   Trigger = "cron"
	TriggerCommit Trigger = "commit"
	TriggerManual Trigger = "manual"
)

// JobStatus is the state of a job row. A row is created pending, becomes
// running when the runner starts, and ends in exactly one terminal status.
// New statuses only need a constant here: the schema does not constrain the
// column, so adding one needs no table rebuild on SQLite.
type JobStatus string

// The job statuses.
const (
	// StatusPending is the status of a created row whose runner has not started.
	StatusPending JobStatus = "pending"
	// StatusRunning is set by StartJob.
	StatusRunning JobStatus = "running"
	// StatusSucceeded means the chain ran to the end.
	StatusSucceeded JobStatus = "succeeded"
	// StatusFailed means the runner reported an error.
	StatusFailed JobStatus = "failed"
	// StatusSkipped means the runner decided there was nothing to do (for
	// example the table drifted or is below every threshold).
	StatusSkipped JobStatus = "skipped"
	// StatusCancelled means an operator or the coordinator cancelled the job.
	StatusCancelled JobStatus = "cancelled"
	// StatusLost means the reconciler closed the row because its job is gone
	// or was not heard of past a deadline; no result is known.
	StatusLost JobStatus = "lost"
)

// Terminal reports whether s is a status FinishJob accepts: succeeded,
// failed, skipped, cancelled or lost.
func (s JobStatus) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusSkipped, StatusCancelled, StatusLost:
		return true
	}
	return false
}

// TableRef identifies one incarnation of an Iceberg table.
type TableRef struct {
	// Catalog is the catalog name as configured in TMS.
	Catalog string
	// Namespace is the table's namespace, levels joined with ".".
	Namespace string
	// Name is the table name inside the namespace.
	Name string
	// UUID is the Iceberg table-uuid. A dropped and recreated table has a new
	// one, and therefore a new Table row.
	UUID string
}

// Table is a row of maintained_table.
type Table struct {
	TableRef
	// ID is the row id, referenced by job rows and metrics.
	ID int64
	// CreatedAt is when TMS first registered this incarnation, in UTC.
	CreatedAt time.Time
}

// TableFacts are what a runner records of a table each time it loads it.
type TableFacts struct {
	// Location is the table's location; must not be empty.
	Location string
	// GCEnabled is the table property gc.enabled (default true).
	GCEnabled bool
}

// TableLocation is a table row and the location recorded for it.
type TableLocation struct {
	TableRef
	ID int64
	// Location is empty when only OutsideFolders were recorded.
	Location string
	// OutsideFolders are the folders outside Location the table
	// references (RecordOutsideFolders); nil when none or not recorded.
	OutsideFolders []string
}

// NewJob is what CreateJob needs to open a job row.
type NewJob struct {
	// TableID is the maintained_table row the job works on.
	TableID int64
	// PolicyID is the policy that asked for the job; NoPolicy (0) for manual
	// and replay runs. Must not be negative.
	PolicyID int64
	// Types is the maintenance chain in order, e.g. compaction,
	// manifest-rewrite. At least one; no element may be empty or contain a
	// comma or white space (the column stores them comma-joined).
	Types []string
	// Trigger says why the job exists.
	Trigger Trigger
	// JobID is the external job id, if already known. Usually empty here and
	// set later with SetJobID once the job was submitted.
	JobID string
	// Spec is the job spec JSON the runner reads. Optional; if set it must
	// be valid JSON.
	Spec json.RawMessage
	// Node is the coordinator node that creates the row and submits its
	// job; empty for manual and replay runs. The reconciler closes the
	// in-flight rows of a node that died (see DeadNodes).
	Node string
}

// Job is a row of table_maintenance_job.
type Job struct {
	ID       int64
	JobID    string // external job id; empty until known
	TableID  int64
	PolicyID int64 // NoPolicy (0) for manual and replay runs
	Types    []string
	Trigger  Trigger
	Status   JobStatus
	// Fence is the row's current fencing token. It starts at 1; BumpFence
	// increments it. Every fenced write must carry the current value.
	Fence            int64
	BeforeSnapshotID *int64 // nil until SetBeforeSnapshot
	AfterSnapshotID  *int64 // nil unless FinishJob recorded one
	Error            string // empty unless FinishJob recorded one
	// Spec is the job spec JSON, nil if none. It is semantically equal to
	// what was stored, not necessarily byte-equal (PostgreSQL normalises jsonb).
	Spec json.RawMessage
	// Outcomes is the per-type outcome list FinishJob recorded (a JSON
	// array of Outcome; see DecodeOutcomes), nil if none. Semantically
	// equal to what was stored.
	Outcomes  json.RawMessage
	CreatedAt time.Time // UTC
	StartedAt time.Time // UTC; zero until StartJob
	// FinishedAt is the time the row was closed, in UTC. Zero means the job
	// is in flight.
	FinishedAt time.Time
	// Node is the coordinator node that created the row; empty for manual
	// and replay runs and rows older than schema version 7.
	Node string
	// Submitter is the submitter kind that started the job: local, command
	// or gravitino; empty for rows from before migration 8 and manual runs
	// (and until SetJobID).
	Submitter string
}

// InFlight reports whether the job row is still open (finished_at IS NULL).
func (j Job) InFlight() bool { return j.FinishedAt.IsZero() }

// Finish is the outcome FinishJob records.
type Finish struct {
	// Status must be terminal (see JobStatus.Terminal).
	Status JobStatus
	// AfterSnapshotID is the table's snapshot after the chain; nil if the job
	// committed nothing or the outcome is unknown.
	AfterSnapshotID *int64
	// Error is the failure message; empty for none.
	Error string
	// Outcomes is the per-type outcome list, a JSON array of Outcome (one
	// per maintenance type of the row). Optional; nil stores NULL. Anything
	// that is not a JSON array is rejected with ErrInvalidArgument.
	Outcomes json.RawMessage
	// At is the finish time. Zero means the store's clock now.
	At time.Time
}

// SnapshotMetrics is a row of table_snapshot_metrics: the sampler's metrics
// for one table at one snapshot, for one policy.
type SnapshotMetrics struct {
	TableID    int64
	PolicyID   int64 // NoPolicy (0) if not tied to a policy
	SnapshotID int64
	// Value is a JSON object (see docs/architecture.md, Metrics). Anything else is
	// rejected with ErrInvalidArgument. Read back it is semantically equal,
	// not necessarily byte-equal (PostgreSQL normalises jsonb).
	Value json.RawMessage
	// RecordedAt is when the metrics were taken, in UTC. Zero on upsert means
	// the store's clock now.
	RecordedAt time.Time
}

// Store is the ledger and everything else TMS keeps in its database: the
// job ledger itself (the methods below), the task table (Scheduler), the
// policies (Policies), the policy-expand pick (Expander), the operators'
// reads (LedgerQueries) and the plan's bulk reads (PlanReads). Both backends
// implement all of it; the capability interfaces stay named types so that a
// caller that needs one of them can take just that. Implementations are safe
// for concurrent use by many goroutines. Times go in and come out in UTC,
// truncated to microseconds.
type Store interface {
	Scheduler
	Policies
	Expander
	LedgerQueries
	PlanReads

	// Backend returns "postgres" or "sqlite".
	Backend() string
	// Close releases the database connections. The Store must not be used
	// afterwards.
	Close() error

	// RegisterTable records a table incarnation and returns its row. It is
	// idempotent: registering the same (catalog, namespace, name, uuid) again,
	// even concurrently, returns the existing row. A new uuid under the same
	// name makes a new row.
	RegisterTable(ctx context.Context, ref TableRef) (Table, error)
	// RegisterTables registers up to 10,000 table incarnations in one
	// transaction, each as RegisterTable would, and returns how many rows
	// were new. Any invalid ref fails the call before anything is written.
	RegisterTables(ctx context.Context, refs []TableRef) (created int, err error)
	// FindTable returns the newest row registered under catalog, namespace
	// and name, i.e. the live incarnation. ErrNotFound if there is none.
	FindTable(ctx context.Context, catalog, namespace, name string) (Table, error)
	// GetTable returns the table row id. ErrNotFound if it does not exist.
	GetTable(ctx context.Context, id int64) (Table, error)
	// RecordTableFacts records what the table of row id says of itself now
	// (its location, gc.enabled). ErrNotFound if the row does not exist.
	RecordTableFacts(ctx context.Context, id int64, f TableFacts) error
	// RecordOutsideFolders records the folders outside its location that
	// the table of row id references now (sampler.Result.OutsideFolders);
	// nil or empty records "none". ErrNotFound if the row does not exist,
	// ErrInvalidArgument for an empty folder.
	RecordOutsideFolders(ctx context.Context, id int64, folders []string) error
	// TableLocations returns every table row with a recorded location or
	// outside folders, in id order: what orphan cleanup leaves alone under
	// a table's folders.
	TableLocations(ctx context.Context) ([]TableLocation, error)

	// CreateJob opens a job row with status pending and fence 1. It returns
	// ErrInFlight if a row of the same table is still in flight, and
	// ErrNotFound if the table does not exist.
	CreateJob(ctx context.Context, j NewJob) (Job, error)
	// GetJob returns job row id. ErrNotFound if it does not exist.
	GetJob(ctx context.Context, id int64) (Job, error)
	// StartJob marks the job running and records started_at (zero at means
	// now). Fenced: see the package doc; ErrStaleFence if fence is not the
	// row's fence or the row is finished, ErrNotFound if there is no row. It
	// also returns ErrStaleFence for a row that is already running: a job
	// starts once per fence, so a duplicate launch of the same job (a retried
	// submit, a restarted pod) cannot run beside the first.
	StartJob(ctx context.Context, id, fence int64, at time.Time) error
	// SetBeforeSnapshot records the snapshot the runner sampled (S0). Fenced
	// like StartJob.
	SetBeforeSnapshot(ctx context.Context, id, fence, snapshotID int64) error
	// SetJobID records the external job id and the kind of submitter that
	// submitted the job (local, command or gravitino; see submit.Kind) once
	// the job was submitted. An empty jobID or submitter is stored as
	// unknown. Fenced like StartJob.
	SetJobID(ctx context.Context, id, fence int64, jobID, submitter string) error
	// CheckFence reports, without writing, whether fence is still the row's
	// fence and the row is still in flight: nil if so, ErrStaleFence if the
	// fence moved on or the row is finished, ErrNotFound if there is no row.
	// The runner calls it right before every Iceberg commit, so a runner that
	// was fenced out stops before changing the table; the check is advisory
	// (a bump may land just after it), the fenced ledger writes are not.
	CheckFence(ctx context.Context, id, fence int64) error
	// InFlightBaseSnapshots returns the distinct before_snapshot_id values of
	// the table's in-flight job rows other than excludeJobID, ascending. They
	// are the snapshots other runners planned from, which snapshot expiry
	// must not expire. Rows without a before snapshot are left out; an
	// unknown table has none (empty, no error).
	InFlightBaseSnapshots(ctx context.Context, tableID, excludeJobID int64) ([]int64, error)
	// FinishJob closes the row: status (terminal), after snapshot, error,
	// per-type outcomes and finished_at. Fenced like StartJob; once finished
	// a row accepts no further fenced write, so the first finish decides.
	// In the same transaction it makes the scheduled tasks waiting for the
	// row's table (Completion.WaitFor = TableWaitKey) due at once.
	FinishJob(ctx context.Context, id, fence int64, f Finish) error
	// BumpFence increments the row's fence and returns the new value, so a
	// runner still holding the old one (a zombie) is fenced out. The
	// reconciler bumps, then finishes with the new fence. It also bumps a
	// finished row (harmless: finished rows reject fenced writes anyway).
	// ErrNotFound if there is no row.
	BumpFence(ctx context.Context, id int64) (newFence int64, err error)
	// CloseJob fences the row out and finishes it with f, in one
	// transaction: the fence is bumped (its runner, queued or running, is
	// fenced out at its next write) and the row closed as FinishJob closes
	// it. It returns the closed row. A row already finished is left as it
	// is and returned with ErrNotInFlight; ErrNotFound if there is none.
	// The reconciler, the API, the CLI and the console close rows this
	// way (admin.CloseJob).
	CloseJob(ctx context.Context, id int64, f Finish) (Job, error)
	// ListJobs returns up to limit job rows of a table, newest first (by id).
	// limit must be positive. An unknown table has no rows: empty, no error.
	ListJobs(ctx context.Context, tableID int64, limit int) ([]Job, error)
	// AddPendingDeletes records, fenced like StartJob, files that job id is
	// about to delete for its table (snapshot expiry's deletion plan), so
	// that a runner that dies while deleting leaves a plan the next run of
	// the table finishes. A path already recorded for the table is kept
	// once. Empty or blank paths are ErrInvalidArgument.
	AddPendingDeletes(ctx context.Context, id, fence int64, paths []string) error
	// PendingDeletes returns the table's recorded deletion plan, in path
	// order. An unknown table has none.
	PendingDeletes(ctx context.Context, tableID int64) ([]string, error)
	// DonePendingDeletes removes paths from the table's deletion plan: they
	// were deleted, or found referenced again. Unknown paths are ignored.
	DonePendingDeletes(ctx context.Context, tableID int64, paths []string) error
	// LastFinished returns the newest finished_at of the (table, policy)
	// job rows, zero if none finished: the cooldown (minIntervalMs) is
	// measured from it.
	LastFinished(ctx context.Context, tableID, policyID int64) (time.Time, error)
	// TableInFlightJobs returns the in-flight job rows of one table, by id.
	// The coordinator's gates start no job on a table that has one.
	TableInFlightJobs(ctx context.Context, tableID int64) ([]Job, error)
	// ListInFlightJobs returns up to limit in-flight job rows of all tables
	// with id > afterID, by id ascending: the reconciler's sweep, in pages.
	ListInFlightJobs(ctx context.Context, afterID int64, limit int) ([]Job, error)
	// LatestJobs returns the newest job row of up to limit (positive)
	// tables, newest first.
	LatestJobs(ctx context.Context, limit int) ([]Job, error)
	// TaskCounts returns the queue depth of scheduled_tasks per task kind at
	// now (zero: the store's clock), by kind name.
	TaskCounts(ctx context.Context, now time.Time) ([]KindCount, error)
	// PurgeJobs deletes finished job rows as p says and returns how many.
	PurgeJobs(ctx context.Context, p Purge) (int64, error)
	// PurgeCommitEvents deletes the commit-event idempotency keys received
	// before before and returns how many. A purged event id is accepted as
	// new again, so keep keys longer than senders retry.
	PurgeCommitEvents(ctx context.Context, before time.Time) (int64, error)
	// JobStats counts the ledger for metrics: in-flight job rows, and the
	// finished rows' outcomes per maintenance type (see JobStats).
	JobStats(ctx context.Context) (JobStats, error)

	// UpsertSnapshotMetrics stores metrics for (table, policy, snapshot),
	// replacing the value and recorded_at of an existing row. ErrNotFound if
	// the table does not exist.
	UpsertSnapshotMetrics(ctx context.Context, m SnapshotMetrics) error
	// ListSnapshotMetrics returns a table's metrics rows oldest first (by
	// recorded_at, then policy and snapshot id).
	ListSnapshotMetrics(ctx context.Context, tableID int64) ([]SnapshotMetrics, error)
}

// OpenOptions tunes OpenWith.
type OpenOptions struct {
	// SkipSchemaCheck opens the database without comparing its schema version
	// with the binary's. Only tools that inspect or migrate the schema should
	// set it. Defaults to false: Open refuses a database that is behind
	// (ErrSchemaBehind) or ahead (ErrSchemaAhead).
	SkipSchemaCheck bool
	// Now is the clock that stamps created_at, and started_at, finished_at
	// and recorded_at when the caller passes a zero time. Defaults to
	// time.Now.
	Now func() time.Time
}

// Open opens the database url names and checks its schema version:
// postgres:// or postgresql:// uses PostgreSQL, sqlite://PATH an SQLite file
// (sqlite://./tms.db, sqlite:///var/lib/tms/tms.db). Open does not migrate;
// a database behind the binary is refused with ErrSchemaBehind, one ahead of
// it with ErrSchemaAhead. log may be nil.
func Open(ctx context.Context, url string, log *zap.Logger) (Store, error) {
	return OpenWith(ctx, url, log, OpenOptions{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, url string, log *zap.Logger, opts OpenOptions) (Store, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b, err := openBackend(ctx, url, log, opts.Now, !opts.SkipSchemaCheck)
	if err != nil {
		return nil, err
	}
	if !opts.SkipSchemaCheck {
		if err := checkSchema(ctx, b, url); err != nil {
			_ = b.Close()
			return nil, err
		}
	}
	return b, nil
}

// backend is what each implementation offers beyond Store: schema version
// reading and migrating, used by Open, Migrate and MigrationStatus.
type backend interface {
	Store
	// schemaVersion returns the highest applied migration, 0 if none.
	schemaVersion(ctx context.Context) (int, error)
	// migrate applies every migration after the current version, each in
	// its own transaction with its version row, safely against concurrent
	// migrators, and returns the versions it applied.
	migrate(ctx context.Context, ms []migrations.Migration) ([]int, error)
}

// openBackend picks the backend from url's scheme. mustExist makes a missing
// SQLite file an ErrSchemaBehind instead of creating it.
func openBackend(ctx context.Context, dbURL string, log *zap.Logger, now func() time.Time, mustExist bool) (backend, error) {
	scheme, rest, ok := strings.Cut(dbURL, "://")
	if !ok {
		return nil, fmt.Errorf("%w: database URL %q has no scheme; want postgres://…, postgresql://… or sqlite://PATH", ErrInvalidArgument, redact(dbURL))
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return openPostgres(ctx, dbURL, log, now)
	case "sqlite":
		return openSQLite(ctx, rest, log, now, mustExist)
	default:
		return nil, fmt.Errorf("%w: unsupported database URL scheme %q; want postgres://, postgresql:// or sqlite://", ErrInvalidArgument, scheme)
	}
}

// checkSchema compares the database's version with the binary's.
func checkSchema(ctx context.Context, b backend, dbURL string) error {
	current, err := b.schemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("store: read schema version: %w", err)
	}
	return compareVersions(current, migrations.Latest(), dbURL)
}

func compareVersions(current, latest int, dbURL string) error {
	switch {
	case current < latest:
		return fmt.Errorf("%w: database at version %d, binary expects %d: run `tms-coordinator migrate --db '%s'`",
			ErrSchemaBehind, current, latest, redact(dbURL))
	case current > latest:
		return schemaAheadError(current, latest)
	}
	return nil
}

func schemaAheadError(current, latest int) error {
	return fmt.Errorf("%w: database schema version %d is newer than this binary (%d); upgrade tms",
		ErrSchemaAhead, current, latest)
}

// redact hides a password in a database URL before it goes into an error.
func redact(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil || u.User == nil {
		return dbURL
	}
	return u.Redacted()
}

// tableWaitPrefix starts the wait key of a table (see TableWaitKey).
const tableWaitPrefix = "table:"

// TableWaitKey is the Completion.WaitFor of a task deferred because the
// table had a job in flight: finishing the table's job row makes the task
// due at once.
func TableWaitKey(tableID int64) string { return tableWaitPrefix + strconv.FormatInt(tableID, 10) }

// inFlightError is CreateJob's ErrInFlight for nj.
func inFlightError(nj NewJob) error {
	return fmt.Errorf("%w: table %d already has a job in flight", ErrInFlight, nj.TableID)
}

// utc normalises a time to what both backends store: UTC, microseconds.
func utc(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// orNow returns t normalised, or now() normalised if t is zero.
func orNow(t time.Time, now func() time.Time) time.Time {
	if t.IsZero() {
		return utc(now())
	}
	return utc(t)
}
