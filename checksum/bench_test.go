package checksum_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/testdata"
)

// BenchmarkTable measures checksum throughput on testdata's tms.small_files
// (200,000 rows in 200 files), reported as rows/s.
func BenchmarkTable(b *testing.B) {
	ctx := context.Background()
	dir := testdata.BuildT(b, "tms.small_files")
	cat, err := catalogs.OpenLocal(ctx, dir, false)
	require.NoError(b, err)
	ident, err := catalogs.ParseIdent("tms.small_files")
	require.NoError(b, err)
	tbl, err := cat.LoadTable(ctx, ident)
	require.NoError(b, err)

	var rows int64
	start := time.Now()
	for b.Loop() {
		res, err := checksum.Table(ctx, tbl, 0)
		if err != nil {
			b.Fatal(err)
		}
		rows += res.Rows
	}
	b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "rows/s")
}
