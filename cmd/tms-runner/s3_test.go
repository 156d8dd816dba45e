package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	arrowlib "github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/seaweedtest"
	"github.com/tms-dev/tms/testdata"
)

// The real binaries on object storage behind a SigV4 REST catalog
// (SeaweedFS): a day-partitioned table written through the catalog with
// many small appends and a merge-on-read delete is checksummed, compacted,
// its manifests rewritten and snapshots expired by `tms-runner replay`,
// with the credentials only in TMS_CATALOG_PROP_* variables. The rows are
// the test's own before and after, the table loads through the catalog
// after the chain, and the secret appears in no argv, output or ledger.
func TestReplayOnS3RESTCatalog(t *testing.T) {
	t.Parallel()
	s := seaweedtest.Start(t)
	ctx := t.Context()
	cat, err := catalogs.Open(ctx, "lake", s.Props())
	require.NoError(t, err)
	ident := seaweedtest.Ident("events")
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{ident[0]}, nil))
	sc := testdata.Schema()
	ts, _ := sc.FindFieldByName("ts")
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{ts.ID}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{}})
	tbl, err := cat.CreateTable(ctx, ident, sc, catalog.WithPartitionSpec(&spec), catalog.WithProperties(iceberg.Properties{
		"format-version": "2", table.WriteDeleteModeKey: table.WriteModeMergeOnRead,
	}))
	require.NoError(t, err)
	asc, err := table.SchemaToArrowSchema(sc, nil, true, false)
	require.NoError(t, err)
	var live []string
	for a := range 12 {
		var rows []string
		for i := range 30 {
			id := a*30 + i
			rows = append(rows, fmt.Sprintf(`{"id": %d, "category": "c%d", "amount": %d.5, "ts": "2024-01-0%dT0%d:00:00Z", "note": "n%d"}`, id, id%4, id, 1+id%3, id%10, id))
		}
		at, err := array.TableFromJSON(memory.DefaultAllocator, asc, []string{"[" + strings.Join(rows, ",") + "]"})
		require.NoError(t, err)
		tbl, err = tbl.AppendTable(ctx, at, int64(len(rows)), nil)
		at.Release()
		require.NoError(t, err)
		live = append(live, rows...)
	}
	tbl, err = tbl.Delete(ctx, iceberg.LessThan(iceberg.Reference("id"), int64(45)), nil)
	require.NoError(t, err)
	want := checksumOfJSON(t, sc, asc, live[45:])

	name := catalogs.IdentString(ident)
	var public []string
	for k, v := range s.PublicProps() {
		public = append(public, "--catalog-prop", k+"="+v)
	}
	env := []string{"TMS_CATALOG_PROP_s3.access-key-id=" + s.AccessKey, "TMS_CATALOG_PROP_s3.secret-access-key=" + s.SecretKey}
	var outputs []string
	runner := func(args ...string) result {
		args = append(args, public...)
		require.NotContains(t, strings.Join(args, " "), s.SecretKey, "no secret on argv")
		r := execRunner(t, env, args...)
		outputs = append(outputs, r.stdout, r.stderr)
		return r
	}
	sum := func() checksum.Result {
		r := runner("checksum", "--table", name, "--json")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		var res checksum.Result
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
		return res
	}
	require.Equal(t, want, sum(), "the binary reads the S3 table's rows")

	pdir := t.TempDir()
	policy := filepath.Join(pdir, "compaction.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{"type": "compaction", "content": {"minDataFileMse": 0}}`), 0o600))
	mpolicy := filepath.Join(pdir, "manifests.json")
	require.NoError(t, os.WriteFile(mpolicy, []byte(`{"type": "manifest-rewrite", "content": {"minManifestNumber": 2}}`), 0o600))
	epolicy := filepath.Join(pdir, "expiry.json")
	require.NoError(t, os.WriteFile(epolicy, []byte(`{"type": "snapshot-expiry", "content": {"older-than": "0s", "retain-last": 1}}`), 0o600))
	ledgerFile := filepath.Join(t.TempDir(), "replay.db")
	r := runner("replay", "--table", name, "--types", "compaction,manifest-rewrite,snapshot-expiry",
		"--policy", policy, "--policy", mpolicy, "--policy", epolicy, "--ledger", "sqlite://"+ledgerFile, "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var got replayJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	for _, ty := range got.Types {
		require.Equal(t, "done", ty.Outcome, "%s: %s", ty.Type, ty.Reason)
	}
	require.EqualValues(t, 33, got.Types[0].MetricsBefore["data-file-number"], "12 appends × 3 days, less the first append's 3 files the delete dropped whole")
	require.Positive(t, got.Types[0].MetricsBefore["delete-file-number"], "the second append's files have position deletes")
	require.EqualValues(t, 3, got.Types[0].MetricsAfter["data-file-number"], "one file per day")
	require.EqualValues(t, 0, got.Types[0].MetricsAfter["delete-file-number"])
	require.EqualValues(t, 1, got.Types[2].MetricsAfter["snapshot-number"])

	after, err := cat.LoadTable(ctx, ident)
	require.NoError(t, err, "the table loads through the catalog after the chain")
	res, err := checksum.Table(ctx, after, 0)
	require.NoError(t, err)
	require.Equal(t, want, res)
	require.Equal(t, want, sum())

	ledgerBytes, err := os.ReadFile(ledgerFile)
	require.NoError(t, err)
	for _, out := range append(outputs, string(ledgerBytes)) {
		require.NotContains(t, out, s.SecretKey, "the secret never reaches output or the ledger")
	}
}

// checksumOfJSON is the checksum of rows given as JSON objects.
func checksumOfJSON(t *testing.T, sc *iceberg.Schema, asc *arrowlib.Schema, rows []string) checksum.Result {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, asc, strings.NewReader("["+strings.Join(rows, ",")+"]"))
	require.NoError(t, err)
	defer rec.Release()
	res, err := checksum.Batches(sc, []arrowlib.RecordBatch{rec})
	require.NoError(t, err)
	return res
}
