package store

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"
)

// BenchLedger measures the ledger's write path on s and returns job rows per
// second. It registers a fresh table, then for each of n rows runs the full
// lifecycle a runner drives: CreateJob, StartJob and a fenced FinishJob. Rows
// use distinct policy ids (1..n), so the in-flight index never refuses one,
// and run one after another: the figure is single-writer latency, not
// throughput under concurrency. It writes n job rows that stay in the
// database; point it at a scratch database.
func BenchLedger(ctx context.Context, s Store, n int) (rowsPerSec float64, err error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: bench needs n > 0, got %d", ErrInvalidArgument, n)
	}
	t, err := s.RegisterTable(ctx, TableRef{Catalog: "bench", Namespace: "bench", Name: "ledger", UUID: rand.Text()})
	if err != nil {
		return 0, err
	}
	types := []string{"compaction", "manifest-rewrite", "snapshot-expiry"}
	start := time.Now()
	for i := range n {
		j, err := s.CreateJob(ctx, NewJob{TableID: t.ID, PolicyID: int64(i + 1), Types: types, Trigger: TriggerCron})
		if err != nil {
			return 0, err
		}
		if err := s.StartJob(ctx, j.ID, j.Fence, time.Time{}); err != nil {
			return 0, err
		}
		after := int64(i)
		if err := s.FinishJob(ctx, j.ID, j.Fence, Finish{Status: StatusSucceeded, AfterSnapshotID: &after}); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
