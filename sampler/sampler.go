// Package sampler computes the health metrics of an Iceberg table at one
// snapshot (docs/architecture.md, Metrics): file counts, small files, the one-sided data
// file MSE against the target file size, manifest and snapshot counts, and the
// number of partitions.
//
// It owns reading table METADATA only: the snapshot's manifest list and its
// manifests. It must never open a data or delete file, never write anything and
// never log; a sample of a table with millions of rows costs the same as one
// with a handful, and only grows with the number of files.
package sampler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/internal/invalid"
)

// ErrNoSuchSnapshot is wrapped by Sample's error when the requested snapshot
// id is not in the table's metadata (never existed, or expired).
var ErrNoSuchSnapshot = errors.New("snapshot not found")

// ErrInvalidArgument is wrapped by Sample's error for a bad option or a bad
// table property (for example a negative target file size).
var ErrInvalidArgument = invalid.New("invalid argument")

// DefaultTargetFileSize is the target file size T used when neither the
// options nor the table property write.target-file-size-bytes give one
// (512 MiB, iceberg-go's and Iceberg Java's default).
const DefaultTargetFileSize int64 = table.WriteTargetFileSizeBytesDefault

// Metrics are the per-snapshot metrics written to table_snapshot_metrics. The
// JSON keys are Gravitino's names without the `custom-` prefix.
//
// "Data files" are the live entries (status ADDED or EXISTING) of the
// snapshot's data manifests; "delete files" are the live entries of its delete
// manifests. Deletion vectors (v3 Puffin position deletes) count as position
// delete files. A delete file counts while its manifest entry is live, even if
// the data files it applies to are gone (Iceberg keeps such files until a
// rewrite drops them, and they still cost a read).
type Metrics struct {
	// FileNumber is the number of live files, data plus delete files.
	FileNumber int64 `json:"file-number"`
	// DataFileNumber is the number of live data files.
	DataFileNumber int64 `json:"data-file-number"`
	// PositionDeleteFileNumber is the number of live position delete files,
	// deletion vectors included.
	PositionDeleteFileNumber int64 `json:"position-delete-file-number"`
	// EqualityDeleteFileNumber is the number of live equality delete files.
	EqualityDeleteFileNumber int64 `json:"equality-delete-file-number"`
	// DeleteFileNumber is PositionDeleteFileNumber + EqualityDeleteFileNumber.
	DeleteFileNumber int64 `json:"delete-file-number"`
	// SmallFileNumber is the number of data files smaller than 75 % of
	// TargetFileSize, the size below which iceberg-go's compaction planner
	// rewrites a file.
	SmallFileNumber int64 `json:"small-file-number"`
	// DataFileMSE is the one-sided mean squared error of the data file sizes
	// against the target: the mean over data files of (T − min(T, size))², in
	// bytes². Files at or above T contribute 0; it is 0 without data files.
	DataFileMSE float64 `json:"data-file-mse"`
	// AvgFileSize is TotalFileSize / DataFileNumber (data files only), 0
	// without data files.
	AvgFileSize float64 `json:"avg-file-size"`
	// TotalFileSize is the sum of the data file sizes in bytes; delete files
	// are not included.
	TotalFileSize int64 `json:"total-file-size"`
	// RecordCount is the sum of the data files' record counts as written in
	// the manifests. Rows removed by delete files are NOT subtracted, so this
	// is an upper bound on the live row count of a merge-on-read table.
	RecordCount int64 `json:"record-count"`
	// ManifestNumber is the number of manifests (data and delete) in the
	// snapshot's manifest list.
	ManifestNumber int64 `json:"manifest-number"`
	// AvgManifestSize is the mean manifest length in bytes as recorded in the
	// manifest list, 0 without manifests.
	AvgManifestSize float64 `json:"avg-manifest-size"`
	// SnapshotNumber is the number of snapshots in the table metadata (all
	// branches and tags, not only ancestors of the sampled snapshot).
	SnapshotNumber int64 `json:"snapshot-number"`
	// OldestSnapshotAgeMs is Now minus the timestamp of the oldest snapshot in
	// the metadata, in milliseconds; 0 without snapshots, and never negative
	// (a snapshot stamped in the future by a skewed clock counts as age 0).
	OldestSnapshotAgeMs int64 `json:"oldest-snapshot-age-ms"`
	// PartitionNumber is the number of distinct (partition spec id, partition
	// tuple) pairs among the live data files. An unpartitioned table with data
	// has 1.
	PartitionNumber int64 `json:"partition-number"`
	// MaxPartitionSmallFileNumber is the most small data files in one
	// (partition spec id, partition tuple): SmallFileNumber on an
	// unpartitioned table. iceberg-go's compaction planner groups files by
	// that pair, so a partition with fewer small files than min-input-files
	// gives no group from small files alone. Not one of Gravitino's names;
	// rows written before it was added lack it (read as 0).
	MaxPartitionSmallFileNumber int64 `json:"max-partition-small-file-number"`
	// TargetFileSize is the target file size T, in bytes, that SmallFileNumber
	// and DataFileMSE were computed against.
	TargetFileSize int64 `json:"target-file-size-bytes"`

	// The delete debt of a merge-on-read table, from manifests only. Not
	// Gravitino's names; rows sampled before they were added lack them
	// (read as 0).

	// PositionDeleteRecordCount is the sum of the record counts of the live
	// position delete files: the positions they delete (a deletion
	// vector's record count is its cardinality).
	PositionDeleteRecordCount int64 `json:"position-delete-record-count"`
	// EqualityDeleteRecordCount is the sum of the record counts of the live
	// equality delete files: the keys they delete, each of which may match
	// any number of rows.
	EqualityDeleteRecordCount int64 `json:"equality-delete-record-count"`
	// DeletionVectorNumber is the number of live deletion vectors (v3
	// Puffin position deletes, one per data file), counted in
	// PositionDeleteFileNumber too.
	DeletionVectorNumber int64 `json:"deletion-vector-number"`
	// DeleteRatio is (PositionDeleteRecordCount + EqualityDeleteRecordCount)
	// / RecordCount, at most 1, and 0 without data rows: an estimate of the
	// share of the rows a reader reads only to drop. It overstates when a
	// delete names a row already gone and understates when an equality key
	// matches several rows.
	DeleteRatio float64 `json:"delete-ratio"`
	// MaxPartitionDeleteFileNumber is the most live delete files in one
	// (partition spec id, partition tuple) of the delete files' own specs.
	MaxPartitionDeleteFileNumber int64 `json:"max-partition-delete-file-number"`
}

// Result is a sample: the snapshot that was measured and its metrics.
type Result struct {
	// SnapshotID is the snapshot that was sampled; 0 for a table without a
	// current snapshot.
	SnapshotID int64
	// Metrics are the metrics at SnapshotID.
	Metrics Metrics
	// Tasks are whole-file scan tasks of the live data files, in manifest
	// order, when Options.ScanTasks asked for them and the snapshot has no
	// delete files (nil otherwise). Their DataFiles come from the same
	// projected manifest read as the metrics: no column statistics.
	Tasks []table.FileScanTask
	// OutsideFolders are the folders, as the metadata spells them, of the
	// files the snapshot references (its manifest list, manifests, live
	// data and delete files) that lie outside the table's location: files
	// brought in with add_files, a write.data.path or write.metadata.path
	// elsewhere. Another table's orphan cleanup must not delete them when
	// they lie under its folders. Sorted, none below another, at most
	// MaxOutsideFolders (more are named by their parents); nil when the
	// snapshot references nothing outside.
	OutsideFolders []string
}

// Options tune Sample. The zero value is ready to use.
type Options struct {
	// TargetFileSize is the target file size T in bytes. Zero means the table
	// property write.target-file-size-bytes, or DefaultTargetFileSize (512 MiB)
	// when the property is unset. Negative is an error.
	TargetFileSize int64
	// Now is the clock for OldestSnapshotAgeMs. Defaults to time.Now.
	Now func() time.Time
	// Concurrency is the number of manifests read at once. Defaults to
	// runtime.GOMAXPROCS(0); negative is an error.
	Concurrency int
	// ScanTasks also returns the live data files as Result.Tasks, so that a
	// compaction can plan from this one manifest read instead of a second
	// one (a file scan plan of a table without delete files is exactly its
	// live data files, whole).
	ScanTasks bool
}

// Sample computes the metrics of tbl at snapshotID (0 = the current
// snapshot) from the manifest list and manifests only.
//
// A table without a current snapshot samples as zero metrics with
// SnapshotID 0 (TargetFileSize is still filled in). An unknown snapshot id is
// an error wrapping ErrNoSuchSnapshot; an unreadable manifest list or
// manifest is an error naming the file.
func Sample(ctx context.Context, tbl *table.Table, snapshotID int64, opts Options) (Result, error) {
	if tbl == nil {
		return Result{}, fmt.Errorf("%w: nil table", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	meta := tbl.Metadata()
	target, err := targetFileSize(opts.TargetFileSize, meta)
	if err != nil {
		return Result{}, err
	}
	if opts.Concurrency < 0 {
		return Result{}, fmt.Errorf("%w: concurrency %d is negative", ErrInvalidArgument, opts.Concurrency)
	}
	concurrency := opts.Concurrency
	if concurrency == 0 {
		concurrency = runtime.GOMAXPROCS(0)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}

	m := Metrics{TargetFileSize: target}
	m.SnapshotNumber = int64(len(meta.Snapshots()))
	m.OldestSnapshotAgeMs = OldestSnapshotAgeMs(meta, now())

	var snap *table.Snapshot
	if snapshotID == 0 {
		snap = meta.CurrentSnapshot()
		if snap == nil {
			return Result{Metrics: m}, nil
		}
	} else if snap = meta.SnapshotByID(snapshotID); snap == nil {
		return Result{}, fmt.Errorf("%w: table %s has no snapshot %d",
			ErrNoSuchSnapshot, identString(tbl), snapshotID)
	}

	fs, err := tbl.FS(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("open file IO of table %s: %w", identString(tbl), err)
	}
	manifests, err := snap.Manifests(fs)
	if err != nil {
		return Result{}, fmt.Errorf("read manifest list %s of snapshot %d: %w", snap.ManifestList, snap.SnapshotID, err)
	}
	out := newOutsideFilter(meta.Location())
	t, err := tallyManifests(ctx, fs, meta, manifests, target, concurrency, opts.ScanTasks, out)
	if err != nil {
		return Result{}, err
	}
	out.note(&t.folders, snap.ManifestList)
	for _, mf := range manifests {
		out.note(&t.folders, mf.FilePath())
	}
	t.fill(&m)
	var manifestBytes int64
	for _, mf := range manifests {
		manifestBytes += mf.Length()
	}
	m.ManifestNumber = int64(len(manifests))
	if len(manifests) > 0 {
		m.AvgManifestSize = float64(manifestBytes) / float64(len(manifests))
	}
	res := Result{SnapshotID: snap.SnapshotID, Metrics: m, OutsideFolders: outsideFolders(t.folders)}
	if opts.ScanTasks && m.DeleteFileNumber == 0 {
		res.Tasks = t.tasks
	}
	return res, nil
}

// targetFileSize resolves T: the option, else the table property, else the
// default.
func targetFileSize(opt int64, meta table.Metadata) (int64, error) {
	switch {
	case opt < 0:
		return 0, fmt.Errorf("%w: target file size %d is negative", ErrInvalidArgument, opt)
	case opt > 0:
		return opt, nil
	}
	raw, ok := meta.Properties()[table.WriteTargetFileSizeBytesKey]
	if !ok || raw == "" {
		return DefaultTargetFileSize, nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%w: table property %s=%q is not a positive integer",
			ErrInvalidArgument, table.WriteTargetFileSizeBytesKey, raw)
	}
	return v, nil
}

// identString names tbl in messages: its identifier, else its location.
func identString(tbl *table.Table) string {
	if ident := tbl.Identifier(); len(ident) > 0 {
		return strings.Join(ident, ".")
	}
	return tbl.Location()
}

// OldestSnapshotAgeMs is now minus the timestamp of meta's oldest snapshot,
// never negative, 0 without snapshots: the one metric that changes with the
// clock rather than with the table, so a caller that reuses a sample of
// unchanged metadata refreshes it with this.
func OldestSnapshotAgeMs(meta table.Metadata, now time.Time) int64 {
	snaps := meta.Snapshots()
	if len(snaps) == 0 {
		return 0
	}
	oldest := snaps[0].TimestampMs
	for _, s := range snaps[1:] {
		oldest = min(oldest, s.TimestampMs)
	}
	return max(0, now.UnixMilli()-oldest)
}
