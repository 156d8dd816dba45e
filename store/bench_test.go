package store_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/tms-dev/tms/store"
)

// BenchmarkLedger runs benchLedger with b.N job rows on each backend
// and reports rows/s. For the figure in the README run it with
// -benchtime=10000x.
func BenchmarkLedger(b *testing.B) {
	for _, bc := range []struct {
		name string
		url  func(testing.TB) string
	}{
		{"postgres", pgSchemaURL},
		{"sqlite", sqliteURL},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := openMigrated(b, bc.url(b))
			b.ResetTimer()
			rate, err := benchLedger(b.Context(), s, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(rate, "rows/s")
		})
	}
}

func TestBenchLedgerSmoke(t *testing.T) {
	t.Parallel()
	for _, s := range []store.Store{openMigrated(t, pgSchemaURL(t)), openMigrated(t, sqliteURL(t))} {
		rate, err := benchLedger(t.Context(), s, 20)
		if err != nil {
			t.Fatalf("%s: %v", s.Backend(), err)
		}
		if rate <= 0 {
			t.Fatalf("%s: rate %v", s.Backend(), rate)
		}
		_, err = benchLedger(t.Context(), s, 0)
		if err == nil {
			t.Fatalf("%s: n=0 accepted", s.Backend())
		}
	}
}

// benchLedger measures the ledger's write path on s and returns job rows per
// second. It registers a fresh table, then for each of n rows runs the full
// lifecycle a runner drives: CreateJob, StartJob and a fenced FinishJob. Rows
// use distinct policy ids (1..n), so the in-flight index never refuses one,
// and run one after another: the figure is single-writer latency, not
// throughput under concurrency. It writes n job rows that stay in the
// database; point it at a scratch database.
func benchLedger(ctx context.Context, s store.Store, n int) (rowsPerSec float64, err error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: bench needs n > 0, got %d", store.ErrInvalidArgument, n)
	}
	t, err := s.RegisterTable(ctx, store.TableRef{Catalog: "bench", Namespace: "bench", Name: "ledger", UUID: rand.Text()})
	if err != nil {
		return 0, err
	}
	types := []string{"compaction", "manifest-rewrite", "snapshot-expiry"}
	start := time.Now()
	for i := range n {
		j, err := s.CreateJob(ctx, store.NewJob{TableID: t.ID, PolicyID: int64(i + 1), Types: types, Trigger: store.TriggerCron})
		if err != nil {
			return 0, err
		}
		if err := s.StartJob(ctx, j.ID, j.Fence, time.Time{}); err != nil {
			return 0, err
		}
		after := int64(i)
		if err := s.FinishJob(ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded, AfterSnapshotID: &after}); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
