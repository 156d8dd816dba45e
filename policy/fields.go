package policy

import (
	"fmt"
	"strconv"
	"time"
)

// This file is the one description of every content field: the option
// parsers (options.go) read their names, defaults and ranges from it, and
// docs/policies.md is generated from it (reference.go), so the reference
// cannot drift from what is accepted.

// Kind is the JSON value a content field takes. Gravitino stores
// rewriteOptions values as strings, so integers, numbers and booleans are
// accepted as JSON strings too ("5" or 5).
type Kind string

// The kinds of content fields.
const (
	KindInteger  Kind = "integer"
	KindNumber   Kind = "number"
	KindBoolean  Kind = "boolean"
	KindString   Kind = "string"
	KindDuration Kind = "duration"     // "72h", "90m", "5d"
	KindMillis   Kind = "milliseconds" // an integer
	KindObject   Kind = "object"
	KindAny      Kind = "any"
)

// Range is the values an integer field accepts, as the reference writes it.
type Range string

// The ranges of integer fields.
const (
	AnyValue    Range = ""
	Positive    Range = "> 0"
	NonNegative Range = ">= 0"
	// Fraction is for number fields: 0 to 1, both included.
	Fraction Range = "0 to 1"
)

// check returns what is wrong with v for r, or "".
func (r Range) check(v int64) string {
	switch {
	case r == Positive && v <= 0:
		return "must be positive"
	case r == NonNegative && v < 0:
		return "must be >= 0"
	}
	return ""
}

// Field describes one field of a policy's content.
type Field struct {
	// Name is the field's path in the content, the spelling the reference
	// leads with: "minDataFileMse", "rewriteOptions.target-file-size-bytes".
	Name string
	// Aliases are other accepted spellings, looked for in this order after
	// Name (Spark's and Gravitino's, top level or under rewriteOptions).
	Aliases []string
	Kind    Kind
	// Default is the value that applies when the field is absent, written
	// as a policy would write it; empty when what applies is not a value
	// (then Unset says what it is).
	Default string
	// Unset says what applies when the field is absent and Default is empty.
	Unset string
	// Range is what an integer field accepts; Min, for a duration, the
	// shortest age accepted.
	Range Range
	Min   time.Duration
	// Values are the accepted values of an enumeration.
	Values []string
	// Doc says what the field means.
	Doc string
}

// withDoc returns f with another Doc: one definition of a field's
// spellings, kind, default and values serves two types whose meaning of it
// differs in detail.
func (f Field) withDoc(doc string) Field {
	f.Doc = doc
	return f
}

// names returns Name and then the aliases.
func (f Field) names() []string { return append([]string{f.Name}, f.Aliases...) }

// commonFields are the fields every policy type takes; the coordinator acts
// on them (ParseContent) and the runner ignores them.
var commonFields = []Field{
	{Name: "schedule.onCommit", Kind: KindBoolean, Default: "false",
		Doc: "Run after commits to the table (a webhook commit event or the catalog watcher), subject to the type's thresholds and minIntervalMs. Not allowed for orphan-cleanup."},
	{Name: "schedule.crontab", Kind: KindString, Unset: "no crontab",
		Doc: "Run at every instant of this crontab: five fields (minute hour day-of-month month day-of-week), six with seconds first, or a descriptor such as @hourly or @every 30s. A schedule needs onCommit: true, a crontab, or both; orphan-cleanup needs a crontab."},
	{Name: "schedule.timezone", Kind: KindString, Default: "UTC",
		Doc: "The IANA time zone the crontab is read in (Europe/Berlin: DST included). A CRON_TZ= prefix in the crontab is refused; give the zone here."},
	{Name: "minIntervalMs", Kind: KindMillis, Range: NonNegative, Unset: "the coordinator's task.<type>.minIntervalMs, else 1 h (24 h for orphan-cleanup)",
		Doc: "The cooldown after a run of this (table, policy): a trigger inside it is deferred to its end, not dropped. 0 disables it."},
	{Name: "jobOptions", Kind: KindObject, Unset: "no options",
		Doc: "Non-sensitive job properties such as Spark resources (string, number or boolean values), handed to the job submitter; for a commit chain the types' options are merged, a numeric value taking the larger. The local submitter does not use them. A credential-shaped key or a URL with a password is refused."},
}

// gravitinoIgnored are Gravitino content keys that concern its own
// optimizer, not TMS: accepted, so Gravitino's documents load, and ignored.
var gravitinoIgnored = []Field{
	{Name: "strategy.type", Kind: KindAny, Doc: "Gravitino's; accepted and ignored."},
	{Name: "job.template-name", Kind: KindAny, Doc: "Gravitino's; accepted and ignored."},
	{Name: "trigger-expr", Kind: KindAny, Doc: "Gravitino's; accepted and ignored."},
	{Name: "score-expr", Kind: KindAny, Doc: "Gravitino's; accepted and ignored."},
}

// Gravitino's compaction defaults (org.apache.gravitino.policy.
// IcebergCompactionContent), kept so a policy written for Gravitino triggers
// the same way here.
const (
	// DefaultMinDataFileMse is Gravitino's DEFAULT_MIN_DATA_FILE_MSE: about
	// (512 MiB − 492 MiB)², i.e. data files on average ~20 MiB short of the
	// 512 MiB target.
	DefaultMinDataFileMse = 405323966463344
	// DefaultMinDeleteFileNumber is Gravitino's DEFAULT_MIN_DELETE_FILE_NUMBER:
	// one live delete file triggers compaction.
	DefaultMinDeleteFileNumber = 1
	// DefaultMaxPartitionNum is Gravitino's DEFAULT_MAX_PARTITION_NUM.
	DefaultMaxPartitionNum = 50
	// DefaultMaxConcurrentGroups mirrors Iceberg's
	// max-concurrent-file-group-rewrites default.
	DefaultMaxConcurrentGroups = 5
	// DefaultMaxCommits mirrors Iceberg's partial-progress.max-commits.
	DefaultMaxCommits = 10
)

// Manifest rewrite defaults.
const (
	DefaultMinManifestNumber       = 100
	DefaultMaxAvgManifestSizeBytes = 8 << 20
	DefaultMaxManifestNumber       = 500
)

// Orphan cleanup ages: the default, and the floor below which a policy is
// rejected because a writer may still be about to commit such a file.
const (
	DefaultOrphanOlderThan = 72 * time.Hour
	MinOrphanOlderThan     = time.Hour
)

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// The compaction fields, in the order they are read (the first bad one is
// the one reported).
var (
	fMinDataFileMse = Field{Name: "minDataFileMse", Kind: KindNumber, Default: itoa(DefaultMinDataFileMse), Range: NonNegative,
		Doc: "Compact when the data files' mean squared error against the target size (data-file-mse, sampled at S0) is at least this. Gravitino's default: files on average ~20 MiB short of 512 MiB."}
	fMinDeleteFileNumber = Field{Name: "minDeleteFileNumber", Kind: KindInteger, Default: itoa(DefaultMinDeleteFileNumber), Range: NonNegative,
		Doc: "Compact when the table has at least one live delete file and at least this many."}
	fDataFileMseWeight = Field{Name: "dataFileMseWeight", Kind: KindInteger, Default: "1", Range: NonNegative,
		Doc: "Gravitino's scoring weight of data-file-mse; accepted for compatibility."}
	fDeleteFileNumberWeight = Field{Name: "deleteFileNumberWeight", Kind: KindInteger, Default: "100", Range: NonNegative,
		Doc: "Gravitino's scoring weight of delete files; accepted for compatibility."}
	fMaxPartitionNum = Field{Name: "maxPartitionNum", Aliases: []string{"max-partition-num"}, Kind: KindInteger, Default: itoa(DefaultMaxPartitionNum), Range: Positive,
		Doc: "At most this many partitions are compacted in one run, those with the most candidate files first."}
	fTargetFileSize = Field{Name: "rewriteOptions.target-file-size-bytes", Kind: KindInteger, Range: Positive, Unset: "the table's write.target-file-size-bytes",
		Doc: "The size of the files compaction writes; also the target data-file-mse is sampled against."}
	fMinInputFiles = Field{Name: "rewriteOptions.min-input-files", Kind: KindInteger, Range: Positive, Unset: "iceberg-go's default, 5",
		Doc: "A file group is rewritten only when it has at least this many files."}
	fPartialProgress = Field{Name: "rewriteOptions.partial-progress.enabled", Kind: KindBoolean, Default: "false",
		Doc: "Commit file groups in several commits (up to partial-progress.max-commits) instead of one."}
	fMaxCommits = Field{Name: "rewriteOptions.partial-progress.max-commits", Kind: KindInteger, Default: itoa(DefaultMaxCommits), Range: Positive,
		Doc: "The most commits a partial-progress compaction makes."}
	fMaxConcurrent = Field{Name: "rewriteOptions.max-concurrent-file-group-rewrites", Kind: KindInteger, Default: itoa(DefaultMaxConcurrentGroups), Range: Positive,
		Doc: "File groups rewritten at once, capped at GOMAXPROCS (a group's writer is CPU bound)."}
	fDeleteFileThreshold = Field{Name: "rewriteOptions.delete-file-threshold", Kind: KindInteger, Range: Positive, Unset: "iceberg-go's default, 5",
		Doc: "A data file with at least this many delete files applying to it is rewritten whatever its size."}
	fDeleteRatioThreshold = Field{Name: "rewriteOptions.delete-ratio-threshold", Kind: KindNumber, Default: "0.3", Range: Fraction,
		Doc: "A data file whose deletion vector or file-scoped position deletes remove at least this share of its rows is rewritten whatever its size (Spark's option; 0 turns it off). Equality deletes do not count: how many rows they remove is not known from metadata."}
	fRemoveDangling = Field{Name: "rewriteOptions.remove-dangling-deletes", Kind: KindBoolean, Default: "true",
		Doc: "A compaction commit also removes every delete file (and deletion vector) that applies to no live data file any more, each proved against the snapshot it commits on. Spark's option, whose default is false; TMS's is true because the removal is checked."}
	fWhere = Field{Name: "rewriteOptions.where", Kind: KindString, Unset: "the whole table",
		Doc: "Compact only the data files that may hold matching rows: comparisons (= == != <> < <= > >=) of a column with a quoted string, a number or true/false, joined by AND, e.g. `ts >= '2024-01-05T00:00:00+00:00' AND category = 'books'`. Selected files are rewritten whole, so no row is dropped."}

	compactionFields = []Field{fMinDataFileMse, fMinDeleteFileNumber, fDataFileMseWeight, fDeleteFileNumberWeight, fMaxPartitionNum,
		fTargetFileSize, fMinInputFiles, fPartialProgress, fMaxCommits, fMaxConcurrent, fDeleteFileThreshold, fDeleteRatioThreshold, fRemoveDangling, fWhere}
)

// The delete-rewrite fields.
var (
	fMinPositionDeleteFileNumber = Field{Name: "minPositionDeleteFileNumber", Aliases: []string{"rewriteOptions.min-input-files"}, Kind: KindInteger,
		Default: itoa(DefaultMinPositionDeleteFileNumber), Range: Positive,
		Doc: "Merge the position-delete files of a partition when it holds at least this many (Spark's min-input-files; deletion vectors do not count)."}

	deleteRewriteFields = []Field{fMinPositionDeleteFileNumber}
)

// The manifest-rewrite fields.
var (
	fMinManifestNumber = Field{Name: "minManifestNumber", Kind: KindInteger, Default: itoa(DefaultMinManifestNumber), Range: Positive,
		Doc: "Rewrite when the current snapshot has at least this many manifests and their average size is below maxAvgManifestSizeBytes."}
	fMaxAvgManifestSize = Field{Name: "maxAvgManifestSizeBytes", Kind: KindInteger, Default: itoa(DefaultMaxAvgManifestSizeBytes), Range: Positive,
		Doc: "See minManifestNumber."}
	fMaxManifestNumber = Field{Name: "maxManifestNumber", Kind: KindInteger, Default: itoa(DefaultMaxManifestNumber), Range: Positive,
		Doc: "Rewrite when the current snapshot has at least this many manifests, whatever their size."}
	fTargetManifestSize = Field{Name: "rewriteOptions.target-manifest-size-bytes", Kind: KindInteger, Range: Positive, Unset: "the table's commit.manifest.target-size-bytes",
		Doc: "The size of the manifests the rewrite writes."}

	manifestFields = []Field{fMinManifestNumber, fMaxAvgManifestSize, fMaxManifestNumber, fTargetManifestSize}
)

// The snapshot-expiry fields.
var (
	fExpireOlderThan = Field{Name: "rewriteOptions.older-than", Aliases: []string{"older-than", "olderThan"}, Kind: KindDuration,
		Unset: "olderThanMs, else the table's history.expire.max-snapshot-age-ms (Iceberg: 5 days)",
		Doc:   "Expire snapshots older than this age, such as 120h or 5d; never the current snapshot, nor one another in-flight job planned from."}
	fExpireOlderThanMs = Field{Name: "rewriteOptions.older-than-ms", Aliases: []string{"olderThanMs", "older-than-ms"}, Kind: KindMillis, Range: NonNegative,
		Unset: "the table's history.expire.max-snapshot-age-ms (Iceberg: 5 days)",
		Doc:   "The same age in milliseconds; refused as an unknown option when older-than is also given."}
	fRetainLast = Field{Name: "rewriteOptions.retain-last", Aliases: []string{"retain-last", "retainLast"}, Kind: KindInteger, Range: Positive,
		Unset: "the table's history.expire.min-snapshots-to-keep (Iceberg: 1)",
		Doc:   "Keep at least this many of the newest snapshots, whatever their age."}
	fCleanExpiredFiles = Field{Name: "rewriteOptions.clean-expired-files", Aliases: []string{"cleanExpiredFiles"}, Kind: KindBoolean, Default: "true",
		Doc: "Delete the files only the expired snapshots referenced."}

	// fExpiryPrefixMismatch is the orphan field (same spellings, values
	// and default) with what the mode means for an expiry.
	fExpiryPrefixMismatch = fPrefixMismatch.withDoc("What to do when a file only the expired snapshots reference is the same object as a file the retained snapshots reference under another spelling (file:/p and file:///p, s3a:// and s3:// by default), or the same path under a scheme or authority equal-schemes and equal-authorities do not map: error fails the type before it commits, naming both spellings, so no snapshot is expired and nothing deleted; ignore keeps such files and expires; delete acts as ignore, because an expiry never deletes a file a retained snapshot may read. A location that cannot be parsed is kept too.")

	expiryFields = []Field{fExpireOlderThan, fExpireOlderThanMs, fRetainLast, fCleanExpiredFiles,
		fEqualSchemes, fEqualAuthorities, fExpiryPrefixMismatch}
)

// The orphan-cleanup fields.
var (
	fOrphanOlderThan = Field{Name: "rewriteOptions.older-than", Aliases: []string{"older-than", "olderThan"}, Kind: KindDuration,
		Default: shortDuration(DefaultOrphanOlderThan), Min: MinOrphanOlderThan,
		Doc: "Delete unreferenced files older than this age only; files younger than the minimum may belong to a commit in flight."}
	fOrphanOlderThanMs = Field{Name: "rewriteOptions.older-than-ms", Aliases: []string{"olderThanMs", "older-than-ms"}, Kind: KindMillis,
		Default: itoa(DefaultOrphanOlderThan.Milliseconds()), Min: MinOrphanOlderThan,
		Doc: "The same age in milliseconds; refused as an unknown option when older-than is also given."}
	fEqualSchemes = Field{Name: "rewriteOptions.equal-schemes", Aliases: []string{"equal-schemes", "equalSchemes"}, Kind: KindObject,
		Default: `{"s3a,s3n": "s3"}`,
		Doc:     `Schemes that name the same objects, as Spark's remove_orphan_files takes them: a JSON object (or a string holding one) from comma-separated names to the canonical one, e.g. {"s3a,s3n": "s3"}. Adds to the default.`}
	fEqualAuthorities = Field{Name: "rewriteOptions.equal-authorities", Aliases: []string{"equal-authorities", "equalAuthorities"}, Kind: KindObject,
		Unset: "none",
		Doc:   `Authorities that name the same storage, e.g. {"host-a:8020,host-b:8020": "nameservice1"}.`}
	fPrefixMismatch = Field{Name: "rewriteOptions.prefix-mismatch-mode", Aliases: []string{"prefix-mismatch-mode", "prefixMismatchMode"}, Kind: KindString,
		Default: "error", Values: []string{"error", "ignore", "delete"},
		Doc: "What to do with a listed file whose path a reference names under another scheme or authority: error fails the type and deletes nothing, ignore keeps the file, delete treats it as an orphan."}

	fOrphanScope = Field{Name: "rewriteOptions.scope", Aliases: []string{"scope"}, Kind: KindString,
		Default: OrphanScopeTablePaths, Values: []string{OrphanScopeTablePaths, OrphanScopeLocation},
		Doc: "What orphan cleanup lists. table-paths lists only the table's own folders: write.data.path (default <location>/data), write.metadata.path (default <location>/metadata), write.object-storage.path and write.folder-storage.path when set, and every folder under the location that the table's metadata references a file in; other files under the location (another table created inside it, exported files) are left alone and counted in the detail. location lists the whole location, as Iceberg Java does; it is refused for a table whose location is a bucket root, a filesystem root or the catalog's warehouse, and for a table whose data or metadata path lies outside its location. Under either scope nothing below another table's root (a folder holding another table's metadata) is planned, and a file another table the ledger knows references (add_files from inside this table's folders) is kept."}

	orphanFields = []Field{fOrphanOlderThan, fOrphanOlderThanMs, fEqualSchemes, fEqualAuthorities, fPrefixMismatch, fOrphanScope}
)

// Fields returns the content fields of policy type t: the common ones
// first, then the type's own, in reference order; nil for an unknown t.
func Fields(t Type) []Field {
	var own []Field
	switch t {
	case Compaction:
		own = compactionFields
	case DeleteRewrite:
		own = deleteRewriteFields
	case ManifestRewrite:
		own = manifestFields
	case SnapshotExpiry:
		own = expiryFields
	case OrphanCleanup:
		own = orphanFields
	default:
		return nil
	}
	return append(append([]Field(nil), commonFields...), own...)
}

// rangeText is the range column of the reference.
func (f Field) rangeText() string {
	switch {
	case f.Min > 0:
		return fmt.Sprintf(">= %s", shortDuration(f.Min))
	case f.Kind == KindDuration:
		return ">= 0"
	case len(f.Values) > 0:
		return ""
	}
	return string(f.Range)
}

// shortDuration writes 1h0m0s as 1h and 72h0m0s as 72h.
func shortDuration(d time.Duration) string {
	s := d.String()
	for _, suffix := range []string{"m0s", "h0m"} {
		if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
			s = s[:len(s)-len(suffix)+1]
		}
	}
	return s
}
