package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/gravitinotest"
	"github.com/tms-dev/tms/internal/seaweedtest"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
	"github.com/tms-dev/tms/testdata"
)

// TestServeGravitinoSubmitter: serve with --job-submitter gravitino, from
// the config file only, against gravitinotest (Gravitino's documented job
// API; a real Gravitino is a JVM server that cannot run here) with basic
// auth, and the docs' shell template registered as written (the script's
// path aside). The table is on SeaweedFS behind its SigV4 REST catalog; the
// runner the run starts gets the S3 keys only as ircAuth references in
// jobConf, which it resolves itself. The first submit's connection is reset
// after Gravitino made the run: the ledger row still maps to exactly one
// run, the table is compacted with its rows unchanged (the test's own
// checksum, read through the catalog), and no secret (S3 secret key,
// ledger password, Gravitino password) is in any jobConf, argument,
// request, log or ledger row.
func TestServeGravitinoSubmitter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := seaweedtest.Start(t)
	cat := s.Catalog(t)
	sc := testdata.Schema()
	cf, _ := sc.FindFieldByName("category")
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{cf.ID}, FieldID: 1000, Name: "category", Transform: iceberg.IdentityTransform{}})
	ident, _ := seaweedtest.CreateTable(t, cat, "views", sc, catalog.WithPartitionSpec(&spec), catalog.WithProperties(iceberg.Properties{"format-version": "2"}))
	for n := range 6 {
		tbl, err := cat.LoadTable(ctx, ident)
		require.NoError(t, err)
		var rows []string
		for i := range 20 {
			id := n*20 + i
			rows = append(rows, fmt.Sprintf(`{"id": %d, "category": "c%d", "amount": %d.5, "ts": "2024-03-01T00:00:%02dZ", "note": "v%d"}`, id, id%2, id, i, id))
		}
		_, err = testdata.AppendJSON(ctx, tbl, rows)
		require.NoError(t, err)
	}
	checksumNow := func() (checksum.Result, int) {
		tbl, err := cat.LoadTable(ctx, ident)
		require.NoError(t, err)
		sum, err := checksum.Table(ctx, tbl, 0)
		require.NoError(t, err)
		tasks, err := tbl.Scan().PlanFiles(ctx)
		require.NoError(t, err)
		return sum, len(tasks)
	}
	before, files := checksumNow()
	require.Equal(t, 12, files)

	// Gravitino, with the docs' template.
	_, runner := binaries(t)
	gravPW := "grav-pw-" + strings.ToLower(rand.Text()[:8])
	grav := gravitinotest.Start(t, gravitinotest.Config{Metalakes: []string{"lake"}, Auth: gravitinotest.AuthBasic,
		Username: "tms", Password: gravPW, StrictPlaceholders: true,
		BaseEnv: append(os.Environ(), "TMS_RUNNER="+runner, "TMS_LOG_LEVEL=info")})
	var doc struct{ JobTemplate gravitinotest.JobTemplate }
	raw, err := os.ReadFile("../../docs/gravitino/tms-runner-template.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &doc))
	script, err := filepath.Abs("../../docs/gravitino/tms-runner-job.sh")
	require.NoError(t, err)
	require.Equal(t, "/opt/tms/tms-runner-job.sh", doc.JobTemplate.Executable)
	doc.JobTemplate.Executable = script
	require.NoError(t, grav.RegisterTemplate("lake", doc.JobTemplate))

	// The ledger URL carries a password (PostgreSQL here trusts local
	// connections, so the runner connects without it).
	u, err := url.Parse(testdb.PostgresURL(t))
	require.NoError(t, err)
	ledgerPW := "pw-" + strings.ToLower(rand.Text()[:10])
	u.User = url.UserPassword(u.User.Username(), ledgerPW)
	db := u.String()

	dir := t.TempDir()
	secrets := map[string]string{"key": s.AccessKey, "secret": s.SecretKey, "grav-pw": gravPW}
	for name, v := range secrets {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600))
	}
	var conf []string
	for k, v := range s.PublicProps() {
		conf = append(conf, configPrefix+"catalog.lake."+k+" = "+v)
	}
	sort.Strings(conf)
	conf = append(conf,
		configPrefix+"ircAuth.s3.access-key-id = file:"+filepath.Join(dir, "key"),
		configPrefix+"ircAuth.s3.secret-access-key = file:"+filepath.Join(dir, "secret"),
		configPrefix+"jobSubmitter.type = gravitino",
		configPrefix+"jobSubmitter.gravitino.uri = "+grav.URL(),
		configPrefix+"jobSubmitter.gravitino.metalake = lake",
		configPrefix+"jobSubmitter.gravitino.jobTemplateName = "+doc.JobTemplate.Name,
		configPrefix+"gravitinoAuth.authType = basic",
		configPrefix+"gravitinoAuth.user = tms",
		configPrefix+"gravitinoAuth.password = file:"+filepath.Join(dir, "grav-pw"),
	)
	confFile := filepath.Join(dir, "tms.conf")
	require.NoError(t, os.WriteFile(confFile, []byte(strings.Join(conf, "\n")+"\n"), 0o600))

	code, _, stderr := run(t, "migrate", "--db", db)
	require.Equal(t, cli.ExitOK, code, stderr)
	policy := filepath.Join(dir, "policy.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 3600000, "minDataFileMse": 0,
		"rewriteOptions": {"min-input-files": 2}, "jobOptions": {"spark.executor.memory": "2g"}}`), 0o600))
	code, _, stderr = run(t, "policy", "create", "--db", db, "--name", "compact", "--type", "compaction", "--content-file", policy)
	require.Equal(t, cli.ExitOK, code, stderr)
	code, _, stderr = run(t, "policy", "attach", "--db", db, "--name", "compact", "--object", "lake."+ident[0])
	require.Equal(t, cli.ExitOK, code, stderr)

	grav.Inject(gravitinotest.Fault{Method: "POST", Path: "/jobs/runs", Kind: gravitinotest.ResetAfterApply, Count: 1})
	n := serve(t, db, "", "--config", confFile)
	st := ledger(t, db)
	var j store.Job
	testkit.Eventually(t, 3*time.Minute, "the Gravitino-submitted job to finish", func() bool {
		row, err := st.FindTable(ctx, "lake", ident[0], ident[1])
		if err != nil {
			return false
		}
		js, err := st.ListJobs(ctx, row.ID, 10)
		require.NoError(t, err)
		if len(js) == 0 || js[0].InFlight() {
			return false
		}
		j = js[0]
		return true
	})
	n.stop(t)
	require.Equal(t, store.StatusSucceeded, j.Status, j.Error)
	require.Zero(t, grav.PendingFaults(), "the reset happened")
	runs := grav.Runs()
	require.Len(t, runs, 1, "one run for the row, although the submit's answer was lost")
	// The runner closes its row before its process exits, and Gravitino
	// marks the run succeeded only on that exit: wait for it.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r, err := grav.WaitForStatus(wctx, runs[0].JobID, gravitinotest.StatusSucceeded, gravitinotest.StatusFailed, gravitinotest.StatusCancelled)
	require.NoError(t, err)
	runs = grav.Runs()
	require.Equal(t, r.JobID, j.JobID, "the row's external id is the run")
	require.Equal(t, "gravitino", j.Submitter)
	require.Equal(t, gravitinotest.StatusSucceeded, r.Status)
	require.Equal(t, "tms", r.Creator)
	require.Equal(t, fmt.Sprint(j.ID), r.JobConf["job_id"])
	require.Equal(t, "2g", r.JobConf["spark.executor.memory"], "the policy's jobOptions reach jobConf")
	require.Equal(t, "lake."+ident[0]+"."+ident[1], r.EnvAdded["TMS_TABLE"])
	require.Contains(t, r.JobConf["catalog_secret_refs"], url.QueryEscape("file:"+filepath.Join(dir, "secret")))
	require.NotNil(t, j.BeforeSnapshotID)
	require.NotEqual(t, *j.BeforeSnapshotID, *j.AfterSnapshotID, "compacted")
	after, files := checksumNow()
	require.Equal(t, before, after, "no row lost or duplicated")
	require.Equal(t, 2, files, "one file per category")

	// The secrets reach nothing but the runner's memory.
	var texts []string
	for _, r := range runs {
		b, _ := json.Marshal(r)
		texts = append(texts, string(b))
		for _, f := range []string{r.StdoutPath, r.StderrPath} {
			out, err := os.ReadFile(f)
			require.NoError(t, err)
			texts = append(texts, string(out))
		}
	}
	for _, q := range grav.Requests() {
		texts = append(texts, q.Text())
	}
	texts = append(texts, n.logText(t), ledgerText(t, db))
	for _, text := range texts {
		for what, secret := range map[string]string{"S3 secret key": s.SecretKey, "ledger password": ledgerPW, "Gravitino password": gravPW} {
			require.NotContains(t, text, secret, "the %s", what)
		}
	}
}

// ledgerText is every row of the ledger's job table as text.
func ledgerText(t *testing.T, db string) string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), db)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT j::text FROM table_maintenance_job j`)
	require.NoError(t, err)
	var b strings.Builder
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		b.WriteString(s + "\n")
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, b.String())
	return b.String()
}

// TestServeGravitinoBadAnswers: a metalake Gravitino does not have, and an
// answer that is not JSON (a proxy's page), close the row failed with the
// reason; nothing is left in flight and no run was made.
func TestServeGravitinoBadAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, metalake string
		fault          gravitinotest.FaultKind
		want           string
	}{
		{"unknown metalake", "nope", 0, "NoSuchMetalakeException"},
		{"not JSON", "lake", gravitinotest.NotJSON, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := testdb.SQLiteURL(t)
			dir := setupFlow(t, db, []string{"tms.small_files"}, "compaction", `{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 3600000}`, "local.tms")
			grav := gravitinotest.Start(t, gravitinotest.Config{Metalakes: []string{"lake"}})
			require.NoError(t, grav.RegisterTemplate("lake", gravitinotest.JobTemplate{Name: "tms_runner", Executable: "/bin/true"}))
			if tc.fault != 0 {
				grav.Inject(gravitinotest.Fault{Method: "POST", Path: "/jobs/runs", Kind: tc.fault, Count: 1})
			}
			n := serve(t, db, dir, "--job-submitter", "gravitino", "--gravitino-uri", grav.URL(),
				"--gravitino-metalake", tc.metalake, "--gravitino-job-template", "tms_runner")
			st := ledger(t, db)
			tbl := registered(t, st, "tms.small_files")
			var j store.Job
			testkit.Eventually(t, time.Minute, "the row to be closed", func() bool {
				js, err := st.ListJobs(t.Context(), tbl.ID, 10)
				require.NoError(t, err)
				if len(js) == 0 || js[len(js)-1].InFlight() {
					return false
				}
				j = js[len(js)-1]
				return true
			})
			n.stop(t)
			require.Equal(t, store.StatusFailed, j.Status)
			require.Contains(t, j.Error, tc.want)
			require.Empty(t, j.JobID, "no external id")
			require.Empty(t, grav.Runs(), "no run was made")
			open, err := st.TableInFlightJobs(t.Context(), tbl.ID)
			require.NoError(t, err)
			require.Empty(t, open, "nothing left in flight")
		})
	}
}
