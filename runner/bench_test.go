package runner

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/chain"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/sampler"
	"github.com/tms-dev/tms/testdata"
)

// BenchmarkChainOverhead replays the full chain (compaction,
// manifest-rewrite, snapshot-expiry) on a fresh tms.small_files and reports
// how much of the chain's wall time is the runner's bookkeeping rather than
// maintenance: sampling S0/S1 and the ledger writes and fence checks the
// hooks make. Goal: overhead-% ≤ 5.
//
// The hooks are timed directly. Sampling happens inside chain, so each
// sample is measured by sampling the same snapshot again from the Sampled
// hook; that duplicate's time is the estimate of the real sample's cost.
// The duplicate (and the table load before it, which chain needs for its
// work anyway and which is not counted) is taken out of the wall time. Drift
// checks (a metadata reload before each commit) are inside chain and not
// separately visible; they are counted as maintenance here.
//
// Two tables: the recipe itself (200 files of 1,000 rows, 3.5 MiB — all
// metadata and little data, the worst case for overhead, since sampling
// costs per manifest and compaction per byte) and a 200 × 10,000-row variant
// (~35 MiB), the shape of the compaction benchmark.
func BenchmarkChainOverhead(b *testing.B) {
	for _, bc := range []struct {
		name string
		rows int
	}{
		{"200x1k", 0},
		{"200x10k", 10_000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchChainOverhead(b, func(r *testdata.Recipe) {
				if bc.rows > 0 {
					r.RowsPerAppend = bc.rows
				}
			})
		})
	}
}

func benchChainOverhead(b *testing.B, adjust func(*testdata.Recipe)) {
	var ledger, sampling, wall time.Duration
	samples := 0
	for range b.N {
		b.StopTimer()
		dir := testdata.BuildAdjustedT(b, adjust, "tms.small_files")
		cat, err := catalogs.OpenLocal(b.Context(), dir, false)
		require.NoError(b, err)
		ident, _ := catalogs.ParseIdent("tms.small_files")
		var dupLoads time.Duration
		var lastSampled string
		timeHook := func(start time.Time) { ledger += time.Since(start) }
		opts := Options{wrapHooks: func(h chain.Hooks) chain.Hooks {
			sampled, beforeCommit, protected := h.Sampled, h.BeforeCommit, h.ProtectedSnapshots
			h.Sampled = func(ctx context.Context, t policy.Type, when string, r sampler.Result) error {
				loadStart := time.Now()
				tbl, err := catalogs.LoadTable(ctx, cat, ident)
				dupLoads += time.Since(loadStart)
				if err != nil {
					return err
				}
				// chain reuses the previous sample of the same metadata
				// file; such a sample costs nothing and is not counted.
				if loc := tbl.MetadataLocation(); loc != lastSampled {
					lastSampled = loc
					start := time.Now()
					_, err = sampler.Sample(ctx, tbl, r.SnapshotID, sampler.Options{})
					sampling += time.Since(start)
					samples++
					if err != nil {
						return err
					}
				}
				defer timeHook(time.Now())
				return sampled(ctx, t, when, r)
			}
			h.BeforeCommit = func(ctx context.Context, t policy.Type) error {
				defer timeHook(time.Now())
				return beforeCommit(ctx, t)
			}
			h.ProtectedSnapshots = func(ctx context.Context) ([]int64, error) {
				defer timeHook(time.Now())
				return protected(ctx)
			}
			return h
		}}
		ro := ReplayOptions{
			Ledger:  "sqlite://" + filepath.Join(b.TempDir(), "replay.db"),
			Catalog: CatalogSpec{WarehouseDir: dir}, Table: "tms.small_files",
			Steps: []StepSpec{{Type: policy.Compaction}, {Type: policy.ManifestRewrite}, {Type: policy.SnapshotExpiry}},
		}
		b.StartTimer()
		res, err := Replay(b.Context(), ro, opts)
		b.StopTimer()
		require.NoError(b, err)
		require.Equal(b, chain.Done, res.Report.Types[0].Outcome, res.Report.Types[0].Reason)
		wall += res.Report.Duration - dupLoads
		closeCatalog(cat)
	}
	chainOnly := wall - sampling
	b.ReportMetric(100*float64(ledger+sampling)/float64(chainOnly), "overhead-%")
	b.ReportMetric(float64(ledger.Milliseconds())/float64(b.N), "ledger-ms/op")
	b.ReportMetric(float64(sampling.Milliseconds())/float64(b.N), "sampling-ms/op")
	b.ReportMetric(float64(samples)/float64(b.N), "samples/op")
	b.ReportMetric(float64(chainOnly.Milliseconds())/float64(b.N), "chain-ms/op")
}
