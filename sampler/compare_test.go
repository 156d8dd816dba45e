package sampler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/sampler"
)

// Comparison is the outcome of compareWithPlanFiles: the mean wall time of
// one Sample and of one bare iceberg-go PlanFiles on the same snapshot.
type Comparison struct {
	// SnapshotID is the snapshot both were run against.
	SnapshotID int64
	// Iterations is how many timed runs of each were averaged.
	Iterations int
	// Sample is the mean duration of one Sample call.
	Sample time.Duration
	// PlanFiles is the mean duration of one
	// tbl.Scan(table.WithSnapshotID(id)).PlanFiles call.
	PlanFiles time.Duration
	// DataFiles is the number of data files in the snapshot, as sampled.
	DataFiles int64
	// Manifests is the number of manifests in the snapshot, as sampled.
	Manifests int64
}

// Ratio returns Sample / PlanFiles (the design goal is ≤ 1.2), or 0 when
// PlanFiles took no measurable time.
func (c Comparison) Ratio() float64 {
	if c.PlanFiles <= 0 {
		return 0
	}
	return float64(c.Sample) / float64(c.PlanFiles)
}

// String formats the comparison for `make bench` output.
func (c Comparison) String() string {
	return fmt.Sprintf("snapshot %d: %d data files in %d manifests: sample %v, PlanFiles %v, ratio %.2f (goal ≤ 1.20) over %d runs",
		c.SnapshotID, c.DataFiles, c.Manifests, c.Sample, c.PlanFiles, c.Ratio(), c.Iterations)
}

// compareWithPlanFiles times Sample against iceberg-go's own scan planning
// (the cheapest existing way to list a snapshot's files) on tbl's current
// snapshot. Both run once untimed to warm the file system cache, then
// iterations times each, interleaved so that drift in machine load affects
// both alike. It reads every manifest 2·(iterations+1) times.
func compareWithPlanFiles(ctx context.Context, tbl *table.Table, iterations int) (Comparison, error) {
	if iterations <= 0 {
		return Comparison{}, fmt.Errorf("%w: iterations %d must be positive", sampler.ErrInvalidArgument, iterations)
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return Comparison{}, fmt.Errorf("%w: table %s has no current snapshot to compare on", sampler.ErrInvalidArgument, tbl.Location())
	}
	c := Comparison{SnapshotID: snap.SnapshotID, Iterations: iterations}
	plan := func() error {
		tasks, err := tbl.Scan(table.WithSnapshotID(snap.SnapshotID)).PlanFiles(ctx)
		if err != nil {
			return fmt.Errorf("plan files: %w", err)
		}
		if int64(len(tasks)) < c.DataFiles {
			return fmt.Errorf("plan files returned %d tasks for %d data files", len(tasks), c.DataFiles)
		}
		return nil
	}
	sample := func() error {
		res, err := sampler.Sample(ctx, tbl, snap.SnapshotID, sampler.Options{})
		if err != nil {
			return err
		}
		c.DataFiles, c.Manifests = res.Metrics.DataFileNumber, res.Metrics.ManifestNumber
		return nil
	}
	if err := sample(); err != nil {
		return Comparison{}, err
	}
	if err := plan(); err != nil {
		return Comparison{}, err
	}
	var sampleTotal, planTotal time.Duration
	for range iterations {
		start := time.Now()
		if err := sample(); err != nil {
			return Comparison{}, err
		}
		sampleTotal += time.Since(start)
		start = time.Now()
		if err := plan(); err != nil {
			return Comparison{}, err
		}
		planTotal += time.Since(start)
	}
	c.Sample = sampleTotal / time.Duration(iterations)
	c.PlanFiles = planTotal / time.Duration(iterations)
	return c, nil
}
