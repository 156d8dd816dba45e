package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/seaweedtest"
	"github.com/tms-dev/tms/testdata"
)

// BenchmarkS3RunnerPeakRSS runs the real tms-runner binary's compaction
// (`replay --types compaction`) on S3 behind SeaweedFS's REST catalog, on
// the two tables of chain's S3 benchmarks: 1,000 small files (~10 KB) in
// one partition and 200 files × 10,000 rows (~80 MB). It reports each
// run's peak RSS (GNU time's, /usr/bin/time: apt-get install time) and its
// files/s, process start and catalog load included. Issue 14's bound is
// 300 MB for both.
func BenchmarkS3RunnerPeakRSS(b *testing.B) {
	bin := runnerBinary(b)
	s := seaweedtest.Start(b)
	ctx := context.Background()
	cat := s.Catalog(b)
	small, tbl := seaweedtest.CreateTable(b, cat, "small", testdata.Schema(), catalog.WithProperties(iceberg.Properties{"format-version": "2"}))
	_, err := testdata.FillSmallFiles(ctx, tbl, 1000, 60)
	require.NoError(b, err)
	big := seaweedtest.Ident("c200")
	require.NoError(b, testdata.FillTable(ctx, cat, big, 200, 10_000, 0))

	args, env := s.CatalogArgs(), s.SecretEnv()
	ledger := "sqlite://" + filepath.Join(b.TempDir(), "ledger.db")
	type side struct {
		ident    table.Identifier
		files    int
		orig     int64
		peak     int64 // KiB
		took     time.Duration
		compacts int
	}
	sides := []*side{{ident: small, files: 1000}, {ident: big, files: 200}}
	for _, sd := range sides {
		t, err := cat.LoadTable(ctx, sd.ident)
		require.NoError(b, err)
		sd.orig = t.CurrentSnapshot().SnapshotID
	}
	run := func(sd *side) {
		b.StopTimer()
		t, err := cat.LoadTable(ctx, sd.ident)
		require.NoError(b, err)
		if t.CurrentSnapshot().SnapshotID != sd.orig {
			txn := t.NewTransaction()
			require.NoError(b, txn.RollbackToSnapshot(sd.orig))
			_, err = txn.Commit(ctx)
			require.NoError(b, err)
		}
		b.StartTimer()
		// GNU time reports the runner's own peak: the rusage of a child of
		// this (large) benchmark process would include the parent's pages
		// it shared until exec.
		rss := filepath.Join(b.TempDir(), "rss")
		cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", rss, bin, "replay",
			"--table", catalogs.IdentString(sd.ident), "--types", "compaction", "--ledger", ledger, "--json"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		start := time.Now()
		out, err := cmd.Output()
		sd.took += time.Since(start)
		require.NoError(b, err, "%s", out)
		var got replayJSON
		require.NoError(b, json.Unmarshal(out, &got), "%s", out)
		require.Equal(b, "done", got.Types[0].Outcome, got.Types[0].Reason)
		require.EqualValues(b, sd.files, got.Types[0].MetricsBefore["data-file-number"])
		kib, err := os.ReadFile(rss)
		require.NoError(b, err)
		n, err := strconv.ParseInt(strings.TrimSpace(string(kib)), 10, 64)
		require.NoError(b, err, "GNU time's %%M: %s", kib)
		sd.peak = max(sd.peak, n)
		sd.compacts++
	}
	for b.Loop() {
		for _, sd := range sides {
			run(sd)
		}
	}
	for _, sd := range []struct {
		unit string
		*side
	}{{"small-files", sides[0]}, {"200x10k", sides[1]}} {
		b.ReportMetric(float64(sd.peak)/1024, sd.unit+"-peak-MB")
		b.ReportMetric(float64(sd.files*sd.compacts)/sd.took.Seconds(), sd.unit+"-files/s")
	}
}
