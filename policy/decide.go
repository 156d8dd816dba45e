package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table/compaction"

	"github.com/tms-dev/tms/sampler"
)

// This file is each type's threshold decision on a sample's metrics: the
// one the runner takes on S0 before it works (chain), and the one the
// coordinator's plan takes on the latest recorded sample (nothing runs).

// Verdict is a type's threshold decision on one sample.
type Verdict struct {
	// Work says the thresholds call for work. For snapshot-expiry and
	// orphan-cleanup it says only that nothing rules work out from the
	// metrics: what they remove is decided from the table's metadata and
	// its files, which the metrics do not hold.
	Work bool
	// Reason says which threshold was met, or why none was.
	Reason string
}

// Decide parses content as maintenance type t's options and decides on m.
func Decide(t Type, content json.RawMessage, m sampler.Metrics) (Verdict, error) {
	switch t {
	case Compaction:
		p, err := ParseCompaction(content)
		return p.Decide(m), err
	case DeleteRewrite:
		p, err := ParseDeleteRewrite(content)
		return p.Decide(m), err
	case ManifestRewrite:
		p, err := ParseManifests(content)
		return p.Decide(m), err
	case SnapshotExpiry:
		p, err := ParseExpiry(content)
		return p.Decide(m), err
	case OrphanCleanup:
		p, err := ParseOrphans(content)
		return p.Decide(m), err
	}
	return Verdict{}, fmt.Errorf("%w: unknown maintenance type %q (want one of %s)", ErrInvalid, t, TypeList())
}

// Decide is delete-rewrite's threshold, from the table's totals: at least
// minPositionDeleteFileNumber position-delete files that are not deletion
// vectors, and as many in one partition (max-partition-delete-file-number
// counts equality deletes too, so the chain decides per partition from the
// manifests).
func (p DeleteRewriteOptions) Decide(m sampler.Metrics) Verdict {
	n := m.PositionDeleteFileNumber - m.DeletionVectorNumber
	switch {
	case n < p.MinPositionDeleteFileNumber:
		return Verdict{Reason: fmt.Sprintf("%d position-delete files (deletion vectors aside) < minPositionDeleteFileNumber %d", n, p.MinPositionDeleteFileNumber)}
	case m.MaxPartitionDeleteFileNumber > 0 && m.MaxPartitionDeleteFileNumber < p.MinPositionDeleteFileNumber:
		return Verdict{Reason: fmt.Sprintf("at most %d delete files in one partition < minPositionDeleteFileNumber %d", m.MaxPartitionDeleteFileNumber, p.MinPositionDeleteFileNumber)}
	}
	return Verdict{Work: true, Reason: fmt.Sprintf("%d position-delete files ≥ minPositionDeleteFileNumber %d", n, p.MinPositionDeleteFileNumber)}
}

// Decide is compaction's threshold: data-file-mse at least minDataFileMse,
// or at least minDeleteFileNumber (and at least one) delete files. A table
// without data files has nothing to compact.
func (p CompactionOptions) Decide(m sampler.Metrics) Verdict {
	if m.DataFileNumber == 0 {
		return Verdict{Reason: "table has no data files"}
	}
	var why []string
	if m.DataFileMSE >= p.MinDataFileMse {
		why = append(why, fmt.Sprintf("data-file-mse %.3g ≥ minDataFileMse %.3g", m.DataFileMSE, p.MinDataFileMse))
	}
	if m.DeleteFileNumber > 0 && m.DeleteFileNumber >= p.MinDeleteFileNumber {
		why = append(why, fmt.Sprintf("delete-file-number %d ≥ minDeleteFileNumber %d", m.DeleteFileNumber, p.MinDeleteFileNumber))
	}
	if len(why) == 0 {
		return Verdict{Reason: fmt.Sprintf("below thresholds: data-file-mse %.3g < minDataFileMse %.3g, delete-file-number %d < minDeleteFileNumber %d",
			m.DataFileMSE, p.MinDataFileMse, m.DeleteFileNumber, max(p.MinDeleteFileNumber, 1))}
	}
	return Verdict{Work: true, Reason: strings.Join(why, ", ")}
}

// FewCandidates says, from the metrics alone, when a compaction whose
// thresholds are met will most likely find no file group: iceberg-go's
// planner rewrites only groups of at least min-input-files candidate files
// of one partition (spec id and partition tuple), a candidate being a small
// file, an oversized one (over 1.8 × the target, which the metrics do not
// count) or one with delete files. Without delete files, and with fewer
// small files than min-input-files in every partition, only oversized
// files could make a group. The per-partition count is
// max-partition-small-file-number; a row sampled before that metric existed
// has only the table's small-file-number, which is an upper bound of it.
// The runner plans the groups itself; the coordinator's plan uses this to
// say skip.
func (p CompactionOptions) FewCandidates(m sampler.Metrics) (string, bool) {
	minInput := p.MinInputFiles
	if minInput == 0 {
		minInput = int64(compaction.DefaultMinInputFiles)
	}
	if m.DeleteFileNumber > 0 {
		return "", false
	}
	if m.SmallFileNumber < minInput {
		return fmt.Sprintf("no file group likely qualifies: %d small data files and no delete files, and a group needs min-input-files %d candidates in one partition",
			m.SmallFileNumber, minInput), true
	}
	// Small files but a zero maximum: the row predates the metric.
	if m.MaxPartitionSmallFileNumber == 0 || m.MaxPartitionSmallFileNumber >= minInput {
		return "", false
	}
	return fmt.Sprintf("no file group likely qualifies: %d small data files in %d partitions, at most %d in one, and no delete files, and a group needs min-input-files %d candidates in one partition",
		m.SmallFileNumber, m.PartitionNumber, m.MaxPartitionSmallFileNumber, minInput), true
}

// Decide is manifest-rewrite's threshold: at least maxManifestNumber
// manifests of any size, or at least minManifestNumber averaging under
// maxAvgManifestSizeBytes.
func (p ManifestOptions) Decide(m sampler.Metrics) Verdict {
	switch {
	case m.ManifestNumber >= p.MaxManifestNumber:
		return Verdict{Work: true, Reason: fmt.Sprintf("manifest-number %d ≥ maxManifestNumber %d", m.ManifestNumber, p.MaxManifestNumber)}
	case m.ManifestNumber >= p.MinManifestNumber && m.AvgManifestSize < float64(p.MaxAvgManifestSizeBytes):
		return Verdict{Work: true, Reason: fmt.Sprintf("manifest-number %d ≥ minManifestNumber %d and avg-manifest-size %.0f < maxAvgManifestSizeBytes %d",
			m.ManifestNumber, p.MinManifestNumber, m.AvgManifestSize, p.MaxAvgManifestSizeBytes)}
	}
	return Verdict{Reason: fmt.Sprintf("below thresholds: manifest-number %d (min %d, or %d at any size), avg-manifest-size %.0f (max %d)",
		m.ManifestNumber, p.MinManifestNumber, p.MaxManifestNumber, m.AvgManifestSize, p.MaxAvgManifestSizeBytes)}
}

// Decide is what the metrics say about snapshot expiry. It has no
// threshold of its own: the runner plans the expiry from the metadata
// (branches, tags, retain-last) and skips when nothing expires. The
// metrics rule it out only when there is no snapshot, or when the policy
// sets an age and the oldest snapshot is younger: nothing is old enough.
// Without a policy age the table's history.expire.max-snapshot-age-ms
// (Iceberg's default 5 days) applies, which only the runner reads.
func (p ExpiryOptions) Decide(m sampler.Metrics) Verdict {
	age := time.Duration(m.OldestSnapshotAgeMs) * time.Millisecond
	switch {
	case m.SnapshotNumber == 0:
		return Verdict{Reason: "table has no snapshot"}
	case p.HasOlderThan && age < p.OlderThan:
		return Verdict{Reason: fmt.Sprintf("oldest snapshot is %s old, younger than older-than %s: nothing can expire", age.Round(time.Second), p.OlderThan)}
	case p.HasOlderThan:
		return Verdict{Work: true, Reason: fmt.Sprintf("%d snapshots, the oldest %s old ≥ older-than %s; the runner picks what expires (retain-last, branches and tags keep some)",
			m.SnapshotNumber, age.Round(time.Second), p.OlderThan)}
	}
	return Verdict{Work: true, Reason: fmt.Sprintf("%d snapshots, the oldest %s old; the retention is the table's history.expire.* properties (Iceberg's default: 5 days, keep 1), which the runner reads",
		m.SnapshotNumber, age.Round(time.Second))}
}

// Decide is what the metrics say about orphan cleanup: nothing. Orphans
// are files under the table location that no metadata references, found
// only by listing it, so the runner always lists.
func (p OrphanOptions) Decide(sampler.Metrics) Verdict {
	return Verdict{Work: true, Reason: fmt.Sprintf("the runner lists the table location for unreferenced files older than %s", p.OlderThan)}
}
