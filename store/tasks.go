package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// This file declares the coordinator's task table API (scheduled_tasks in
// the db-scheduler layout, and coordinator_node). Both backends implement
// Scheduler in tasks_postgres.go and tasks_sqlite.go; Store embeds it.

// TaskKey identifies one row of scheduled_tasks.
type TaskKey struct {
	// Name is the task kind, e.g. "cron-job".
	Name string
	// Instance tells rows of one kind apart, e.g. "table:12:7".
	Instance string
}

// String returns "name/instance".
func (k TaskKey) String() string { return k.Name + "/" + k.Instance }

// NewTask is what ScheduleTask and UpsertTask store.
type NewTask struct {
	TaskKey
	// Data is the task's payload (task_data), opaque to the store. Nil
	// stores NULL.
	Data []byte
	// ExecutionTime is when the task becomes due. Zero means now.
	ExecutionTime time.Time
	// Priority orders due rows: higher first, then earlier execution time.
	Priority int
}

// Task is a row of scheduled_tasks.
type Task struct {
	TaskKey
	Data          []byte
	ExecutionTime time.Time // UTC
	// Picked is true while a node holds a claim on the row.
	Picked bool
	// PickedBy is the node id holding the claim; empty when not picked.
	PickedBy            string
	LastSuccess         time.Time // zero if never
	LastFailure         time.Time // zero if never
	ConsecutiveFailures int
	// LastHeartbeat is when the claim holder last proved it was alive; zero
	// when not picked.
	LastHeartbeat time.Time
	// Version is the claim's fencing token: ClaimTasks increments it, and
	// every write made for a claim carries the value the claim returned.
	Version  int64
	Priority int
	// RerunAt is set when an upsert arrived while the row was picked: the
	// completion of the running claim puts the row back at this time instead
	// of deleting it. Zero if none.
	RerunAt time.Time
}

// ClaimRequest asks ClaimTasks for due rows.
type ClaimRequest struct {
	// Names are the task kinds the asking pool runs. At least one.
	Names []string
	// Node is the claiming node's id, stored in picked_by. Required.
	Node string
	// Limit is the most rows to claim, usually the pool's free threads.
	// Must be positive.
	Limit int
	// Now is the claimer's clock: rows with execution_time <= Now are due,
	// and it is the claim's first heartbeat.
	Now time.Time
}

// CompleteAction says what a completion does with the claimed row.
type CompleteAction int

// The completion actions.
const (
	// CompleteDelete ends a one-shot task: the row is deleted, unless an
	// upsert arrived during the run (RerunAt), in which case the row is
	// unpicked and due again at RerunAt, with last_success recorded.
	CompleteDelete CompleteAction = iota
	// CompleteReschedule records a success and makes the row due again at
	// Completion.Next (a recurring task's next instant), unpicked, with
	// consecutive_failures reset.
	CompleteReschedule
	// CompleteFailure records a failure (last_failure, consecutive_failures
	// + 1) and makes the row due again at Completion.Next, unpicked.
	CompleteFailure
	// CompleteRelease unpicks the row without recording an outcome, for a
	// node that shuts down before finishing a claim. The row is due again at
	// once (its execution_time is kept).
	CompleteRelease
)

// Completion is what a claim holder reports when it is done with a row.
type Completion struct {
	Action CompleteAction
	// Next is the new execution_time for CompleteReschedule and
	// CompleteFailure; must not be zero for them. An earlier RerunAt wins.
	Next time.Time
	// Data replaces task_data for CompleteReschedule when non-nil.
	Data []byte
	// WaitFor, for CompleteReschedule, records what the row waits for
	// (TableWaitKey): the event it names makes the row due at once, before
	// Next. Empty waits for nothing; every other completion clears it.
	WaitFor string
	// Now stamps last_success or last_failure. Zero means the store's clock.
	Now time.Time
}

// TxWriter is a handler's view of the transaction its guarded completion
// runs in: what it writes here commits together with the completion, or not
// at all if the claim's version was stale. It is valid only inside the
// callback it was passed to.
type TxWriter interface {
	// CreateJob opens a job row like Store.CreateJob.
	CreateJob(ctx context.Context, j NewJob) (Job, error)
	// ScheduleTask inserts a task unless its row exists, like
	// Scheduler.ScheduleTask.
	ScheduleTask(ctx context.Context, t NewTask, now time.Time) (created bool, err error)
	// ScheduleTasks inserts many tasks unless their rows exist, like
	// Scheduler.ScheduleTasks (one statement per few thousand rows).
	ScheduleTasks(ctx context.Context, ts []NewTask, now time.Time) (created int, err error)
	// UpsertTask inserts or coalesces a task, like Scheduler.UpsertTask.
	UpsertTask(ctx context.Context, t NewTask, now time.Time) (created bool, err error)
	// EnqueueTablesForPolicy inserts one task per table of the batch
	// Policies.TablesForPolicy(e.PolicyID, e.After, e.Limit) would return,
	// without the tables leaving the database, and returns how many rows
	// were new and the walk's next cursor (as TablesForPolicy's next).
	EnqueueTablesForPolicy(ctx context.Context, e PolicyEnqueue) (created int, next int64, err error)
	// MoveCompleted sets the execution time, and the task_data when data
	// is not nil, of the row this transaction completes with
	// CompleteReschedule, for a handler whose next run depends on what it
	// wrote (a cursor). An earlier rerun_at still wins. ErrInvalidArgument
	// after any other completion or for a zero time.
	MoveCompleted(ctx context.Context, at time.Time, data []byte) error
	// RecordCommitEvent stores the idempotency key of a commit event;
	// fresh is false, and nothing is written, when the event id is already
	// there. Recording it in the transaction that upserts the table's
	// commit-job means an event is never marked seen without its job.
	RecordCommitEvent(ctx context.Context, ev CommitEvent) (fresh bool, err error)
	// Driver returns the driver's transaction (pgx.Tx on PostgreSQL, *sql.Tx
	// on SQLite). It exists for store test code (package store/testdb) that
	// writes test-only tables; every other package runs no SQL and must not
	// call it.
	Driver() any
}

// Node is a row of coordinator_node.
type Node struct {
	ID            string
	StartedAt     time.Time // UTC
	LastHeartbeat time.Time // UTC
	// Catalogs are the catalog names the node said it is configured with
	// (SetNodeCatalogs), sorted; nil if it never said.
	Catalogs []string
}

// Scheduler is the task table. The coordinator's engine is its only user.
// Every method that takes now uses it as the time of the write, so the
// engine's injected clock decides what is due and what is stale; a zero now
// means the store's clock. Implementations are safe for concurrent use, also
// from several processes on one database.
type Scheduler interface {
	// ScheduleTask inserts t unless a row with its key exists; created says
	// which. It never changes an existing row (use UpsertTask or
	// RescheduleTask for that).
	ScheduleTask(ctx context.Context, t NewTask, now time.Time) (created bool, err error)
	// ScheduleTasks is ScheduleTask for many tasks at once (bulk loads,
	// benchmarks) and returns how many rows it created.
	ScheduleTasks(ctx context.Context, ts []NewTask, now time.Time) (created int, err error)
	// UpsertTask inserts t, or coalesces it into the existing row so that a
	// burst of upserts stays one row: an unpicked row keeps the earlier of
	// the two execution times and takes t's data; a picked row records the
	// earlier of its RerunAt and t's execution time as RerunAt (and t's
	// data), so the event is not lost when the running claim completes.
	UpsertTask(ctx context.Context, t NewTask, now time.Time) (created bool, err error)
	// RescheduleTask moves a row's execution time to at and, if data is not
	// nil, replaces its data. On a picked row it sets RerunAt instead, so the
	// running claim is not disturbed. ErrNotFound if there is no row.
	RescheduleTask(ctx context.Context, key TaskKey, at time.Time, data []byte) error
	// CancelTask deletes the row, picked or not; a claim holder's later
	// completion then fails with ErrStaleFence. ErrNotFound if there is no
	// row.
	CancelTask(ctx context.Context, key TaskKey) error
	// GetTask returns one row. ErrNotFound if there is none.
	GetTask(ctx context.Context, key TaskKey) (Task, error)
	// ListTasks returns the rows of kind name (all kinds if empty), by name
	// and instance, at most limit (positive).
	ListTasks(ctx context.Context, name string, limit int) ([]Task, error)
	// CountTasks returns how many rows exist and how many of them are picked.
	CountTasks(ctx context.Context) (total, picked int, err error)

	// ClaimTasks picks up to r.Limit due, unpicked rows of r.Names in one
	// atomic step: each returned row has picked set, picked_by = r.Node,
	// last_heartbeat = r.Now and its version incremented. Two concurrent
	// claimers never get the same row (PostgreSQL: FOR UPDATE SKIP LOCKED;
	// SQLite: the update re-checks picked and version under the write lock).
	ClaimTasks(ctx context.Context, r ClaimRequest) ([]Task, error)
	// HeartbeatTasks refreshes last_heartbeat of the claims node holds and
	// returns the keys of those it no longer holds (rescued, cancelled,
	// claimed again), whose callbacks should stop.
	HeartbeatTasks(ctx context.Context, node string, claims []Task, now time.Time) (lost []TaskKey, err error)
	// RescueTasks revives picked rows whose last heartbeat is before
	// staleBefore: they are unpicked, their version incremented (so the
	// vanished holder's writes are fenced out) and they stay due. It returns
	// the revived rows. Safe to run on every node at once: each row is
	// revived by exactly one of them.
	RescueTasks(ctx context.Context, staleBefore time.Time) ([]Task, error)
	// CompleteTask applies c to the row claim holds. It is guarded by
	// claim.Version: if the row's version moved on, the row is not picked or
	// is gone, nothing changes and the error wraps ErrStaleFence.
	CompleteTask(ctx context.Context, claim Task, c Completion) error
	// CompleteTasks applies CompleteDelete to many claims in one statement,
	// each row guarded by its own claim's version, and returns the keys of
	// the claims that were stale (nothing changed for those). It lets a node
	// group-commit the completions of many short tasks.
	CompleteTasks(ctx context.Context, claims []Task, now time.Time) (stale []TaskKey, err error)
	// CompleteAndClaim is CompleteTasks(done) followed by ClaimTasks(r) in
	// one transaction, so a busy pool pays one commit for finishing a batch
	// and taking the next. The deletes come first, each guarded by its own
	// claim's version; stale returns the keys of the done claims that were
	// stale (nothing changed for those). A row an upsert asked to run again
	// is put back unpicked, due at its rerun time; the same call may claim
	// it (SQLite) or leave it to the next one (PostgreSQL). With
	// r.Limit zero it only completes (r is not checked then); with done
	// empty it only claims.
	CompleteAndClaim(ctx context.Context, done []Task, now time.Time, r ClaimRequest) (claimed []Task, stale []TaskKey, err error)
	// CompleteTaskWith is CompleteTask plus fn, in one transaction: the
	// guarded completion runs first (and locks the row), then fn writes the
	// handler's own rows through tx. A stale claim returns ErrStaleFence
	// without calling fn; an error from fn rolls everything back and is
	// returned.
	CompleteTaskWith(ctx context.Context, claim Task, c Completion, fn func(ctx context.Context, tx TxWriter) error) error
	// WithTx runs fn in one transaction that completes no claim (commit
	// ingress: record an event and upsert its commit-job together). An
	// error from fn rolls everything back and is returned; MoveCompleted is
	// refused with ErrInvalidArgument there. fn may run more than once: a
	// transaction PostgreSQL aborts as a deadlock victim is retried.
	WithTx(ctx context.Context, fn func(ctx context.Context, tx TxWriter) error) error

	// RegisterNode records node as started at now (replacing an old row of
	// the same id).
	RegisterNode(ctx context.Context, node string, now time.Time) error
	// HeartbeatNode stamps the node's last_heartbeat. ErrNotFound if its row
	// is gone.
	HeartbeatNode(ctx context.Context, node string, now time.Time) error
	// RemoveNode deletes the node's row; no error if it is gone.
	RemoveNode(ctx context.Context, node string) error
	// ListNodes returns the node rows by id.
	ListNodes(ctx context.Context) ([]Node, error)
	// SetNodeCatalogs records the catalog names node is configured with.
	// ErrNotFound if the node has no row.
	SetNodeCatalogs(ctx context.Context, node string, catalogs []string) error

	// ListenTasks calls fn with a task name whenever another connection
	// scheduled a row of that kind due at once (at is zero then), or, for
	// UpsertTask, a row due later (at is its due time, so that every node
	// can look for it then: a coalescing commit-job), until ctx ends; it
	// returns ctx's error then, or the first connection error. ready (may
	// be nil) is called once the listener is in place: rows scheduled before
	// that were not announced, so the caller looks for due rows then. On
	// PostgreSQL it uses LISTEN/NOTIFY on a channel named after the current
	// schema, so nodes of one database wake each other. SQLite has no
	// cross-process notification: it returns ErrNotSupported at once.
	ListenTasks(ctx context.Context, ready func(), fn func(name string, at time.Time)) error
}

// ErrNotSupported means the backend cannot do what was asked (for example
// cross-node notifications on SQLite); callers fall back to polling.
var ErrNotSupported = errors.New("not supported by this backend")

// scheduleChunk bounds the rows of one bulk insert statement.
const scheduleChunk = 5000

// Compile-time checks that both backends implement Scheduler.
var (
	_ Scheduler = (*postgresStore)(nil)
	_ Scheduler = (*sqliteStore)(nil)
)

func validateNewTask(t NewTask) error {
	if err := validateTaskKey(t.TaskKey); err != nil {
		return err
	}
	return nil
}

func validateTaskKey(k TaskKey) error {
	if strings.TrimSpace(k.Name) == "" || k.Instance == "" {
		return fmt.Errorf("%w: task name and instance must not be empty (got %q)", ErrInvalidArgument, k.String())
	}
	return nil
}

func validateClaimRequest(r ClaimRequest) error {
	switch {
	case len(r.Names) == 0:
		return fmt.Errorf("%w: claim needs at least one task name", ErrInvalidArgument)
	case r.Node == "":
		return fmt.Errorf("%w: claim needs a node id", ErrInvalidArgument)
	case r.Limit <= 0:
		return fmt.Errorf("%w: claim limit must be positive, got %d", ErrInvalidArgument, r.Limit)
	}
	return nil
}

func validateCompletion(c Completion) error {
	switch c.Action {
	case CompleteDelete, CompleteRelease:
	case CompleteReschedule, CompleteFailure:
		if c.Next.IsZero() {
			return fmt.Errorf("%w: completion %d needs a next execution time", ErrInvalidArgument, c.Action)
		}
	default:
		return fmt.Errorf("%w: unknown completion action %d", ErrInvalidArgument, c.Action)
	}
	return nil
}

// staleClaim is the error of a guarded write whose claim is no longer held.
func staleClaim(op string, claim Task) error {
	return fmt.Errorf("%w: %s: task %s version %d is no longer held", ErrStaleFence, op, claim.TaskKey, claim.Version)
}

// earlier returns the earlier of two times, ignoring zero ones.
func earlier(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

func validateMove(c Completion, at time.Time) error {
	if c.Action != CompleteReschedule {
		return fmt.Errorf("%w: only a rescheduled task can be moved", ErrInvalidArgument)
	}
	if at.IsZero() {
		return fmt.Errorf("%w: move time must be set", ErrInvalidArgument)
	}
	return nil
}
