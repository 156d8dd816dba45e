package chain

import (
	"context"
	"encoding/json"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/sampler"
)

// Type is a maintenance type. The types, their chain order and their
// options are defined in package policy, with the policies that configure
// them; chain names them for its own API.
type Type = policy.Type

// The maintenance types, in chain order.
const (
	Compaction      = policy.Compaction
	DeleteRewrite   = policy.DeleteRewrite
	ManifestRewrite = policy.ManifestRewrite
	SnapshotExpiry  = policy.SnapshotExpiry
	OrphanCleanup   = policy.OrphanCleanup
)

// ErrInvalidPolicy is policy.ErrInvalid: wrapped by every error about a
// step's type or policy content.
var ErrInvalidPolicy = policy.ErrInvalid

// Outcome is how one type of a chain ended.
type Outcome string

// The outcomes of a type.
const (
	// Done: the type committed its work (or, for orphan cleanup, deleted
	// exactly its plan).
	Done Outcome = "done"
	// Skipped: the thresholds were not met, there was nothing to do, or the
	// run was a dry run. Reason says which.
	Skipped Outcome = "skipped"
	// EndedDrift: HEAD moved after S0, so the plan was abandoned before
	// committing; the files it wrote were deleted.
	EndedDrift Outcome = "ended-drift"
	// Conflict: the commit lost a race with a concurrent writer; the files it
	// wrote were deleted and nothing was committed.
	Conflict Outcome = "conflict"
	// Failed: an error that is not a conflict; nothing was committed and the
	// files it wrote were deleted.
	Failed Outcome = "failed"
)

// Step is one type of a chain with its policy content.
type Step struct {
	// Type is the maintenance type.
	Type Type
	// Policy is the Gravitino-shaped policy content for Type (the "content"
	// object of the policy: thresholds, rewriteOptions, …). Nil means the
	// defaults.
	Policy json.RawMessage
}

// Hooks let the caller (the runner) observe and gate a chain without chain
// knowing about the ledger. Every hook may be nil.
type Hooks struct {
	// Sampled is called with when WhenBefore ("before", S0 of every type
	// that got as far as sampling) or WhenAfter ("after", S1, once after
	// each type that committed at least once). S0 is reported once the type
	// passed its drift gate, before it writes anything (so the caller's
	// ledger write is not inside the window in which a concurrent commit
	// ends the type ended-drift), or, for a type that never reached the
	// gate, when its work returns. The runner writes table_snapshot_metrics
	// and before_snapshot_id from it. An error ends the type Failed (a
	// WhenAfter error leaves the committed outcome) and stops the chain; Run
	// returns it wrapped.
	Sampled func(ctx context.Context, t Type, when string, r sampler.Result) error
	// BeforeCommit is called immediately before every Iceberg commit (and
	// before orphan cleanup deletes files). A non-nil error (e.g. the runner's
	// fence went stale) aborts that commit: nothing is committed, files the
	// attempt wrote are deleted, the type ends Failed with that error, the
	// chain stops, and Run returns the error wrapped so errors.Is works.
	BeforeCommit func(ctx context.Context, t Type) error
	// ProtectedSnapshots returns the snapshot ids that other in-flight jobs
	// planned from (from the ledger); snapshot expiry never expires them.
	ProtectedSnapshots func(ctx context.Context) ([]int64, error)
	// PlanDeletes records, before snapshot expiry commits, the files it
	// will delete once the commit lands (the runner writes them to the
	// ledger, fenced). An error fails the type before it commits. Without
	// it nothing is recorded and an interrupted deletion is left to orphan
	// cleanup.
	PlanDeletes func(ctx context.Context, paths []string) error
	// DeletesDone clears recorded paths that were deleted or found
	// referenced again.
	DeletesDone func(ctx context.Context, paths []string) error
	// PendingDeletes returns the paths an earlier run recorded and did not
	// clear; Run finishes them before its first type (deleting what no
	// snapshot, branch or tag references any more).
	PendingDeletes func(ctx context.Context) ([]string, error)
	// FileDeleted, when set, is called after each file snapshot expiry
	// deletes (progress; the runner's crash-recovery tests stop the
	// process from it).
	FileDeleted func(path string)
	// OtherTables returns the other tables the caller knows and where they
	// live (the ledger's registered tables); orphan cleanup plans nothing
	// below one that lies under the folders it lists, also when that
	// table's metadata is elsewhere and no metadata folder marks it. An
	// error fails the cleanup before anything is deleted.
	OtherTables func(ctx context.Context) ([]Neighbour, error)
}

// Neighbour is another table and its location.
type Neighbour struct {
	// Name names the table in messages (catalog.namespace.table).
	Name     string
	Location string
	// Folders are the folders outside Location the table references
	// (sampler.Result.OutsideFolders, as last recorded). Orphan cleanup
	// of a table whose listed folders meet one loads the table with Load
	// and keeps every file it references; when Load is nil or fails, it
	// keeps everything under those folders.
	Folders []string
	Load    func(ctx context.Context) (*table.Table, error)
}

// Options tune Run. The zero value is ready to use.
type Options struct {
	// DryRun decides and plans but writes nothing: every type that would work
	// ends Skipped with a reason "dry run: would …".
	DryRun bool
	// Now is the clock for snapshot and orphan ages. Defaults to time.Now.
	Now func() time.Time
	// Log receives progress (per file group: files, bytes, elapsed). Defaults
	// to zap.NewNop().
	Log *zap.Logger
	// Hooks connect the chain to its caller.
	Hooks Hooks
	// Warehouse is the catalog's warehouse location (its "warehouse"
	// property), when the caller knows it: orphan cleanup refuses scope
	// location for a table whose location is the warehouse, as it does for
	// a table at a bucket or filesystem root, which it recognises without
	// it. The catalog.Catalog interface does not expose its properties.
	Warehouse string
}

// Sample moments passed to Hooks.Sampled.
const (
	WhenBefore = "before"
	WhenAfter  = "after"
)

// TypeReport is how one type of a chain went.
type TypeReport struct {
	Type    Type    `json:"type"`
	Outcome Outcome `json:"outcome"`
	// Reason explains the decision or the outcome in one line.
	Reason string `json:"reason"`
	// BeforeSnapshotID is S0 of this type; AfterSnapshotID is the snapshot
	// after it (equal to BeforeSnapshotID when it committed nothing).
	BeforeSnapshotID int64 `json:"before_snapshot_id"`
	AfterSnapshotID  int64 `json:"after_snapshot_id"`
	// MetricsBefore are the metrics at S0; MetricsAfter at S1 (equal to
	// MetricsBefore when the type committed nothing).
	MetricsBefore sampler.Metrics `json:"metrics_before"`
	MetricsAfter  sampler.Metrics `json:"metrics_after"`
	// Duration is the wall time of the type, sampling included. It is
	// encoded in JSON as duration_ms.
	Duration time.Duration `json:"-"`
	// Err is the error message of a Failed or Conflict type.
	Err string `json:"error,omitempty"`
	// Detail is type-specific: the compaction groups, or the orphan plan.
	Detail any `json:"detail,omitempty"`
}

// MarshalJSON encodes r with Duration as integer milliseconds "duration_ms".
func (r TypeReport) MarshalJSON() ([]byte, error) {
	type plain TypeReport
	return json.Marshal(struct {
		plain
		DurationMs int64 `json:"duration_ms"`
	}{plain(r), r.Duration.Milliseconds()})
}

// Report is how a chain went.
type Report struct {
	// Table is the table identifier joined with dots.
	Table     string `json:"table"`
	TableUUID string `json:"table_uuid"`
	// BeforeSnapshotID is S0 of the first type; AfterSnapshotID is the
	// current snapshot at the end.
	BeforeSnapshotID int64        `json:"before_snapshot_id"`
	AfterSnapshotID  int64        `json:"after_snapshot_id"`
	Types            []TypeReport `json:"types"`
	// FinishedDeletes counts the files of an earlier, interrupted snapshot
	// expiry's deletion plan that this run found unreferenced and made sure
	// are gone (deleted now, or already), before its first type.
	FinishedDeletes int `json:"finished_deletes,omitempty"`
	// Duration is the wall time of the chain, encoded as duration_ms.
	Duration time.Duration `json:"-"`
}

// MarshalJSON encodes r with Duration as integer milliseconds "duration_ms".
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		plain
		DurationMs int64 `json:"duration_ms"`
	}{plain(r), r.Duration.Milliseconds()})
}

// Failed reports whether any type of the chain ended Failed.
func (r Report) Failed() bool {
	for _, t := range r.Types {
		if t.Outcome == Failed {
			return true
		}
	}
	return false
}

// Run runs steps in order on the table ident of cat and reports how each
// went. Steps must be in chain order without duplicates (as ParseTypes
// returns them); otherwise Run returns an error before touching the table.
//
// A type that fails, conflicts or drifts does not stop the chain: its
// outcome says so and the next type runs. Run returns a non-nil error only
// when the chain could not go on: a Hooks.BeforeCommit or Hooks.Sampled
// error (wrapped, so errors.Is works), a cancelled ctx, or invalid steps.
// The Report is filled in as far as the chain got, even then.
func Run(ctx context.Context, cat catalog.Catalog, ident table.Identifier, steps []Step, opts Options) (Report, error) {
	return run(ctx, cat, ident, steps, opts)
}
