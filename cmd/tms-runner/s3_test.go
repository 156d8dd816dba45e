package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	arrowlib "github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/seaweedtest"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/testdata"
)

// The real binaries on object storage behind a SigV4 REST catalog
// (SeaweedFS): a day-partitioned table written through the catalog with
// many small appends and a merge-on-read delete is checksummed, compacted,
// its manifests rewritten and snapshots expired by `tms-runner replay`,
// with the credentials only in TMS_CATALOG_PROP_* variables. The rows are
// the test's own before and after, the table loads through the catalog
// after the chain; orphan cleanup deletes exactly the orphans made old
// through SeaweedFS's filer; and the secret appears in no argv, output or ledger.
func TestReplayOnS3RESTCatalog(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	s := seaweedtest.Start(t)
	ctx := t.Context()
	cat := s.Catalog(t)
	sc := testdata.Schema()
	ts, _ := sc.FindFieldByName("ts")
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{ts.ID}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{}})
	ident, tbl := seaweedtest.CreateTable(t, cat, "events", sc, catalog.WithPartitionSpec(&spec), catalog.WithProperties(iceberg.Properties{
		"format-version": "2", table.WriteDeleteModeKey: table.WriteModeMergeOnRead,
	}))
	var live []string
	for a := range 12 {
		var rows []string
		for i := range 30 {
			id := a*30 + i
			rows = append(rows, fmt.Sprintf(`{"id": %d, "category": "c%d", "amount": %d.5, "ts": "2024-01-0%dT0%d:00:00Z", "note": "n%d"}`, id, id%4, id, 1+id%3, id%10, id))
		}
		var err error
		tbl, err = testdata.AppendJSON(ctx, tbl, rows)
		require.NoError(t, err)
		live = append(live, rows...)
	}
	tbl, err := tbl.Delete(ctx, iceberg.LessThan(iceberg.Reference("id"), int64(45)), nil)
	require.NoError(t, err)
	want := checksumOfJSON(t, sc, live[45:])

	name := catalogs.IdentString(ident)
	public, env := s.CatalogArgs(), s.SecretEnv()
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
	// One type per replay, in the chain's order, so that the table is
	// loaded through the catalog and its rows checked after every type.
	var got replayJSON
	var after *table.Table
	for _, step := range []struct{ typ, policy string }{
		{"compaction", policy}, {"manifest-rewrite", mpolicy}, {"snapshot-expiry", epolicy},
	} {
		r := runner("replay", "--table", name, "--types", step.typ, "--policy", step.policy, "--ledger", "sqlite://"+ledgerFile, "--json")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
		ty := got.Types[0]
		require.Equal(t, "done", ty.Outcome, "%s: %s", ty.Type, ty.Reason)
		switch step.typ {
		case "compaction":
			require.EqualValues(t, 33, ty.MetricsBefore["data-file-number"], "12 appends × 3 days, less the first append's 3 files the delete dropped whole")
			require.Positive(t, ty.MetricsBefore["delete-file-number"], "the second append's files have position deletes")
			require.EqualValues(t, 3, ty.MetricsAfter["data-file-number"], "one file per day")
			require.EqualValues(t, 0, ty.MetricsAfter["delete-file-number"])
		case "snapshot-expiry":
			require.EqualValues(t, 1, ty.MetricsAfter["snapshot-number"])
		}
		after, err = cat.LoadTable(ctx, ident)
		require.NoError(t, err, "the table loads through the catalog after %s", step.typ)
		require.Equal(t, ty.AfterSnapshotID, after.CurrentSnapshot().SnapshotID, "%s", step.typ)
		res, err := checksum.Table(ctx, after, 0)
		require.NoError(t, err)
		require.Equal(t, want, res, "rows after %s", step.typ)
		require.Equal(t, want, sum(), "the binary's checksum after %s", step.typ)
	}

	// Orphan cleanup lists the table's objects on S3: a fresh orphan (S3
	// cannot backdate it) is kept, and so is everything referenced.
	fsys, err := after.FS(ctx)
	require.NoError(t, err)
	orphan := after.Location() + "/data/ts_day=2024-01-01/00000-0-fresh-orphan.parquet"
	require.NoError(t, fsys.(iceio.WriteFileIO).WriteFile(orphan, []byte("PAR1 not really PAR1")))
	r := runner("replay", "--table", name, "--types", "orphan-cleanup", "--ledger", "sqlite://"+ledgerFile, "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Equal(t, "skipped", got.Types[0].Outcome, got.Types[0].Reason)
	require.Contains(t, got.Types[0].Reason, "no orphan files older than 72h")
	_, err = fsys.Open(orphan)
	require.NoError(t, err, "the fresh orphan is kept")
	require.Equal(t, want, sum())

	// Old orphans, made old through SeaweedFS's filer API, are deleted
	// exactly: in a partition folder, in metadata/ and directly in data/
	// (a table bucket refuses objects elsewhere under the table). Referenced
	// objects made just as old, and the fresh orphan, stay.
	old := []string{
		after.Location() + "/data/ts_day=2024-01-02/00000-7-old-orphan.parquet",
		after.Location() + "/metadata/00009-old-orphan.metadata.json",
		after.Location() + "/data/00001-3-old-orphan.parquet",
	}
	for _, p := range old {
		require.NoError(t, fsys.(iceio.WriteFileIO).WriteFile(p, []byte("written by a failed job")))
	}
	var referenced []string
	tasks, err := after.Scan().PlanFiles(ctx)
	require.NoError(t, err)
	for _, task := range tasks {
		referenced = append(referenced, task.File.FilePath())
	}
	referenced = append(referenced, after.MetadataLocation(), after.CurrentSnapshot().ManifestList)
	longAgo := time.Now().Add(-30 * 24 * time.Hour)
	s.SetModTime(t, longAgo, append(slices.Clone(old), referenced...)...)
	r = runner("replay", "--table", name, "--types", "orphan-cleanup", "--ledger", "sqlite://"+ledgerFile, "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Equal(t, "done", got.Types[0].Outcome, got.Types[0].Reason)
	for _, p := range old {
		_, err := fsys.Open(p)
		require.ErrorIs(t, err, fs.ErrNotExist, "the old orphan %s is deleted", p)
	}
	for _, p := range append([]string{orphan}, referenced...) {
		_, err := fsys.Open(p)
		require.NoError(t, err, "%s is kept", p)
	}
	after, err = cat.LoadTable(ctx, ident)
	require.NoError(t, err)
	res, err := checksum.Table(ctx, after, 0)
	require.NoError(t, err)
	require.Equal(t, want, res)

	ledgerBytes, err := os.ReadFile(ledgerFile)
	require.NoError(t, err)
	for _, out := range append(outputs, string(ledgerBytes)) {
		require.NotContains(t, out, s.SecretKey, "the secret never reaches output or the ledger")
	}
}

// checksumOfJSON is the checksum of rows given as JSON objects.
func checksumOfJSON(t *testing.T, sc *iceberg.Schema, rows []string) checksum.Result {
	t.Helper()
	asc, err := table.SchemaToArrowSchema(sc, nil, true, false)
	require.NoError(t, err)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, asc, strings.NewReader("["+strings.Join(rows, ",")+"]"))
	require.NoError(t, err)
	defer rec.Release()
	res, err := checksum.Batches(sc, []arrowlib.RecordBatch{rec})
	require.NoError(t, err)
	return res
}

// Bad object-storage and catalog input through the real binary: each run
// fails with an error naming the catalog, exits 1, and leaves no job row.
// (SeaweedFS does not check the SigV4 signing name, so a signing-name
// mismatch cannot be tested against it.)
func TestReplayOnS3BadInput(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	s := seaweedtest.Start(t)
	ident, _ := seaweedtest.CreateTable(t, s.Catalog(t), "events", testdata.Schema())
	name := catalogs.IdentString(ident)
	ledgerFile := filepath.Join(t.TempDir(), "replay.db")
	for _, tc := range []struct {
		name   string
		change func(p iceberg.Properties)
		code   int
		want   string
	}{
		{"bad secret", func(p iceberg.Properties) { p["s3.secret-access-key"] = "wrong" }, cli.ExitFailure, "signature"},
		{"wrong endpoint", func(p iceberg.Properties) { p["uri"] = "http://127.0.0.1:1" }, cli.ExitFailure, "connection refused"},
		{"missing warehouse bucket", func(p iceberg.Properties) { p["warehouse"] = "s3://no-such-bucket/" }, cli.ExitFailure, "does not exist"},
		{"key without secret", func(p iceberg.Properties) { delete(p, "s3.secret-access-key") }, cli.ExitUsage, "s3.access-key-id and s3.secret-access-key must be given together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := s.Props()
			tc.change(props)
			var args []string
			var env []string
			for k, v := range props {
				if strings.Contains(k, "secret") || strings.Contains(k, "access-key") {
					env = append(env, "TMS_CATALOG_PROP_"+k+"="+v)
					continue
				}
				args = append(args, "--catalog-prop", k+"="+v)
			}
			r := execRunner(t, env, append([]string{"replay", "--catalog-name", "lake", "--table", name, "--types", "compaction",
				"--ledger", "sqlite://" + ledgerFile}, args...)...)
			require.Equal(t, tc.code, r.code, r.stderr)
			require.Contains(t, r.stderr, `catalog "lake"`)
			require.Contains(t, r.stderr, tc.want)
			require.NotContains(t, r.stderr+r.stdout, s.SecretKey)
		})
	}
	if _, err := os.Stat(ledgerFile); err == nil {
		st, err := store.Open(t.Context(), "sqlite://"+ledgerFile, nil)
		require.NoError(t, err)
		defer st.Close()
		if row, err := st.FindTable(t.Context(), "lake", ident[0], ident[1]); err == nil {
			jobs, err := st.ListJobs(t.Context(), row.ID, 10)
			require.NoError(t, err)
			require.Empty(t, jobs, "no job row for a run that could not reach its table")
		}
	}
}

// The REST catalog through OAuth2 instead of SigV4, as SeaweedFS's catalog
// offers it (POST /v1/oauth/tokens, client_credentials with the access key
// as client id): `credential` (id:secret) given only as a
// TMS_CATALOG_PROP_* variable lets the real binary read the table and
// compact it, and a pre-issued `token` given only in a
// --catalog-props-file lets it read the table; a wrong credential fails
// naming the catalog.
func TestReplayOnS3OAuth2(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	s := seaweedtest.Start(t)
	ctx := t.Context()
	cat := s.Catalog(t)
	sc := testdata.Schema()
	ident, tbl := seaweedtest.CreateTable(t, cat, "oauth", sc, catalog.WithProperties(iceberg.Properties{"format-version": "2"}))
	var live []string
	for a := range 6 {
		var rows []string
		for i := range 10 {
			id := a*10 + i
			rows = append(rows, fmt.Sprintf(`{"id": %d, "category": "c%d", "amount": %d.5, "ts": "2024-01-01T00:00:%02dZ", "note": "o%d"}`, id, id%3, id, i, id))
		}
		var err error
		tbl, err = testdata.AppendJSON(ctx, tbl, rows)
		require.NoError(t, err)
		live = append(live, rows...)
	}
	want := checksumOfJSON(t, sc, live)

	// A token issued by the catalog's own OAuth2 endpoint.
	resp, err := http.PostForm(s.RESTURI+"/v1/oauth/tokens", url.Values{
		"grant_type": {"client_credentials"}, "client_id": {s.AccessKey}, "client_secret": {s.SecretKey}})
	require.NoError(t, err)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tok))
	resp.Body.Close()
	require.NotEmpty(t, tok.AccessToken)

	public := []string{"--catalog-name", "lake"}
	for k, v := range s.PublicProps() {
		if strings.HasPrefix(k, "rest.") {
			continue // no SigV4: the bearer token authenticates
		}
		public = append(public, "--catalog-prop", k+"="+v)
	}
	s3keys := s.SecretEnv()
	name := catalogs.IdentString(ident)
	ledgerFile := filepath.Join(t.TempDir(), "replay.db")
	policy := filepath.Join(t.TempDir(), "compaction.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{"type": "compaction", "content": {"minDataFileMse": 0}}`), 0o600))
	for i, auth := range []string{"credential=" + s.AccessKey + ":" + s.SecretKey, "token=" + tok.AccessToken} {
		t.Run(strings.SplitN(auth, "=", 2)[0], func(t *testing.T) {
			// The credential through TMS_CATALOG_PROP_* variables, the
			// token through a --catalog-props-file.
			env := append([]string{"TMS_CATALOG_PROP_" + auth}, s3keys...)
			args := public
			if i == 1 {
				file := filepath.Join(t.TempDir(), "lake.properties")
				lines := []string{auth}
				for k, v := range s.SecretProps() {
					lines = append(lines, k+"="+v)
				}
				require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
				env, args = nil, append(slices.Clone(public), "--catalog-props-file", file)
			}
			r := execRunner(t, env, append([]string{"checksum", "--table", name, "--json"}, args...)...)
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			var res checksum.Result
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
			require.Equal(t, want, res)
			if i == 0 {
				r = execRunner(t, env, append([]string{"replay", "--table", name, "--types", "compaction", "--policy", policy,
					"--ledger", "sqlite://" + ledgerFile, "--json"}, public...)...)
				require.Equal(t, cli.ExitOK, r.code, r.stderr)
				var got replayJSON
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
				require.Equal(t, "done", got.Types[0].Outcome, got.Types[0].Reason)
				require.EqualValues(t, 1, got.Types[0].MetricsAfter["data-file-number"])
			}
			require.NotContains(t, r.stdout+r.stderr, s.SecretKey)
			require.NotContains(t, r.stdout+r.stderr, tok.AccessToken)
		})
	}
	r := execRunner(t, append([]string{"TMS_CATALOG_PROP_credential=" + s.AccessKey + ":wrong"}, s3keys...),
		append([]string{"checksum", "--table", name}, public...)...)
	require.Equal(t, cli.ExitFailure, r.code, r.stderr)
	require.Contains(t, r.stderr, `catalog "lake"`)
	require.NotContains(t, r.stderr, s.SecretKey)
	after, err := cat.LoadTable(ctx, ident)
	require.NoError(t, err)
	res, err := checksum.Table(ctx, after, 0)
	require.NoError(t, err)
	require.Equal(t, want, res)
}
