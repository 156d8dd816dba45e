package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/seaweedtest"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/testdata"
)

// serve on object storage behind a SigV4 REST catalog (SeaweedFS), with
// the catalog configured only in the config file and its keys only as
// file: references there. An onCommit compaction policy on the namespace;
// a webhook commit event compacts the table, and after a restart with
// --watch-interval a commit made through the catalog is seen by the
// watcher and compacts it again. Every compaction keeps the rows (the
// test's own checksum of the head before and after), the table loads
// through the catalog after each, and the secret appears in no log, runner
// log or ledger byte.
func TestServeOnS3RESTCatalog(t *testing.T) {
	t.Parallel()
	s := seaweedtest.Start(t)
	ctx := t.Context()
	cat := s.Catalog(t)
	sc := testdata.Schema()
	cf, _ := sc.FindFieldByName("category")
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{cf.ID}, FieldID: 1000, Name: "category", Transform: iceberg.IdentityTransform{}})
	ident, _ := seaweedtest.CreateTable(t, cat, "clicks", sc, catalog.WithPartitionSpec(&spec), catalog.WithProperties(iceberg.Properties{"format-version": "2"}))
	ns := ident[0]
	next := 0
	appendSmall := func(n int) {
		for range n {
			tbl, err := cat.LoadTable(ctx, ident)
			require.NoError(t, err)
			var rows []string
			for i := range 20 {
				id := next*20 + i
				rows = append(rows, fmt.Sprintf(`{"id": %d, "category": "c%d", "amount": %d.25, "ts": "2024-03-01T00:00:%02dZ", "note": "n%d"}`, id, id%2, id, i, id))
			}
			next++
			_, err = testdata.AppendJSON(ctx, tbl, rows)
			require.NoError(t, err)
		}
	}
	head := func() (*table.Table, checksum.Result) {
		tbl, err := cat.LoadTable(ctx, ident)
		require.NoError(t, err, "the table loads through the catalog")
		sum, err := checksum.Table(ctx, tbl, 0)
		require.NoError(t, err)
		return tbl, sum
	}
	dataFiles := func(tbl *table.Table) int {
		n := 0
		tasks, err := tbl.Scan().PlanFiles(ctx)
		require.NoError(t, err)
		for range tasks {
			n++
		}
		return n
	}
	appendSmall(6)

	// The config file: the catalog's public properties as keys, its
	// credentials as file: references (never the secret itself).
	dir := t.TempDir()
	keyFile, secretFile, tokenFile := filepath.Join(dir, "key"), filepath.Join(dir, "secret"), filepath.Join(dir, "commit-token")
	require.NoError(t, os.WriteFile(keyFile, []byte(s.AccessKey+"\n"), 0o600))
	require.NoError(t, os.WriteFile(secretFile, []byte(s.SecretKey+"\n"), 0o600))
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3-commit-token"), 0o600))
	var conf []string
	for k, v := range s.PublicProps() {
		conf = append(conf, configPrefix+"catalog.lake."+k+" = "+v)
	}
	sort.Strings(conf)
	conf = append(conf,
		configPrefix+"ircAuth.s3.access-key-id = file:"+keyFile,
		configPrefix+"ircAuth.s3.secret-access-key = file:"+secretFile,
		configPrefix+"http.commitToken = file:"+tokenFile,
		configPrefix+"commit.coalesceDelayMs = 200",
	)
	confFile := filepath.Join(dir, "tms.conf")
	require.NoError(t, os.WriteFile(confFile, []byte("# TMS on SeaweedFS\n"+strings.Join(conf, "\n")+"\n"), 0o600))
	require.NotContains(t, string(must(os.ReadFile(confFile))), s.SecretKey)

	db := "sqlite://" + filepath.Join(dir, "ledger.db")
	code, _, stderr := run(t, "migrate", "--db", db)
	require.Equal(t, cli.ExitOK, code, stderr)
	policy := filepath.Join(dir, "policy.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{"schedule": {"onCommit": true}, "minIntervalMs": 0, "minDataFileMse": 0, "rewriteOptions": {"min-input-files": 2}}`), 0o600))
	code, _, stderr = run(t, "policy", "create", "--db", db, "--name", "compact", "--type", "compaction", "--content-file", policy)
	require.Equal(t, cli.ExitOK, code, stderr)
	code, _, stderr = run(t, "policy", "attach", "--db", db, "--name", "compact", "--object", "lake."+ns)
	require.Equal(t, cli.ExitOK, code, stderr)
	st := ledger(t, db)

	var logs []string
	registeredIn := func() store.Table {
		var row store.Table
		var err error
		testkit.Eventually(t, time.Minute, "the S3 table registered", func() bool {
			row, err = st.FindTable(ctx, "lake", ns, ident[1])
			return err == nil
		})
		return row
	}
	// compacted waits for the table's nth job and checks it compacted the
	// table through the catalog with its rows unchanged.
	compacted := func(row store.Table, nth int, before checksum.Result, files int) {
		t.Helper()
		var jobs []store.Job
		testkit.Eventually(t, 3*time.Minute, fmt.Sprintf("job %d of the S3 table to finish", nth), func() bool {
			var err error
			jobs, err = st.ListJobs(ctx, row.ID, 10)
			require.NoError(t, err)
			return len(jobs) == nth && !jobs[0].InFlight()
		})
		j := jobs[0]
		require.Equal(t, store.StatusSucceeded, j.Status, j.Error)
		require.Equal(t, store.TriggerCommit, j.Trigger)
		require.NotNil(t, j.BeforeSnapshotID)
		require.NotNil(t, j.AfterSnapshotID)
		require.NotEqual(t, *j.BeforeSnapshotID, *j.AfterSnapshotID, "the table was compacted")
		tbl, sum := head()
		require.Equal(t, before, sum, "no row lost or duplicated")
		require.Equal(t, *j.AfterSnapshotID, tbl.CurrentSnapshot().SnapshotID)
		require.Equal(t, 2, dataFiles(tbl), "one file per category, from %d", files)
	}

	// A webhook commit event.
	_, before := head()
	n := serve(t, db, "", "--config", confFile, "--log-dir", filepath.Join(dir, "runner-logs-1"))
	base := n.httpAddr(t)
	testkit.Eventually(t, time.Minute, "/readyz ready", func() bool { return call(t, "GET", base+"/readyz", "", nil, nil) == http.StatusOK })
	row := registeredIn()
	event := map[string]any{"catalog": "lake", "namespace": ns, "table": ident[1], "eventId": "s3-1"}
	var results struct {
		Results []struct{ EventID, Status string }
	}
	require.Equal(t, http.StatusAccepted, call(t, "POST", base+"/v1/commit-events", "s3-commit-token", event, &results))
	require.Equal(t, "enqueued", results.Results[0].Status)
	compacted(row, 1, before, 12)
	n.stop(t)
	logs = append(logs, n.logText(t))

	// A commit seen by the catalog watcher.
	n = serve(t, db, "", "--config", confFile, "--log-dir", filepath.Join(dir, "runner-logs-2"), "--watch-interval", "500ms")
	testkit.Eventually(t, time.Minute, "the watcher to prime the S3 table", func() bool { return strings.Contains(n.logText(t), `"primed": 1`) })
	appendSmall(1) // one commit: the watcher must not see a half-written series
	_, before = head()
	compacted(row, 2, before, 2+2)
	require.Contains(t, n.logText(t), "catalog watcher: commit seen; commit-job enqueued")
	// The compaction's own commit (a replace snapshot) is seen and is not
	// turned into a third job, although minIntervalMs is 0.
	testkit.Eventually(t, time.Minute, "the watcher to see the compaction's commit", func() bool { return strings.Contains(n.logText(t), `"nodata": 1`) })
	jobs, err := st.ListJobs(ctx, row.ID, 10)
	require.NoError(t, err)
	require.Len(t, jobs, 2, "TMS's own commit enqueued no job")
	n.stop(t)
	logs = append(logs, n.logText(t))

	for _, d := range []string{"runner-logs-1", "runner-logs-2"} {
		files, err := filepath.Glob(filepath.Join(dir, d, "*"))
		require.NoError(t, err)
		require.NotEmpty(t, files, "runner logs in %s", d)
		for _, f := range files {
			logs = append(logs, string(must(os.ReadFile(f))))
		}
	}
	for _, f := range []string{"ledger.db", "ledger.db-wal"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			logs = append(logs, string(b))
		}
	}
	for _, l := range logs {
		require.NotContains(t, l, s.SecretKey, "the secret reaches no log and no ledger")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
