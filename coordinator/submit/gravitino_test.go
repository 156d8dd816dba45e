package submit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/gravitinotest"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/policy"
)

// The gravitino submitter runs against gravitinotest, a server that
// implements Gravitino's documented job API and runs a shell template's
// executable for real: here a /bin/sh program that records its argv and
// environment, sleeps as long as its jobConf says and exits with its code.

const gravMetalake, gravTemplate = "lake", "tms_runner"

type gravBundle struct {
	srv  *gravitinotest.Server
	sub  *submit.GravitinoSubmitter
	logs string // the folder the job program writes into
}

func gravitinoSetup(t *testing.T, srvCfg gravitinotest.Config, cfg submit.GravitinoConfig) *gravBundle {
	t.Helper()
	b := &gravBundle{logs: t.TempDir()}
	if srvCfg.Metalakes == nil {
		srvCfg.Metalakes = []string{gravMetalake}
	}
	srvCfg.CancelGrace = cmpOr(srvCfg.CancelGrace, time.Second)
	b.srv = gravitinotest.Start(t, srvCfg)
	script := coordtest.WriteScript(t, `for a in "$@"; do printf '%s\n' "$a"; done > `+b.logs+`/argv-$1
env > `+b.logs+`/env-$1
trap 'exit 143' TERM
i=0; while [ "$i" -lt "${SLEEP_TENTHS:-0}" ]; do sleep 0.1; i=$((i+1)); done
exit "${EXIT_CODE:-0}"
`)
	require.NoError(t, b.srv.RegisterTemplate(gravMetalake, gravitinotest.JobTemplate{Name: gravTemplate, Executable: script,
		Arguments:    []string{"{{job_id}}", "{{fence}}", "{{ledger_url}}"},
		Environments: map[string]string{"TMS_CATALOG_SECRET_REFS": "{{catalog_secret_refs}}", "SLEEP_TENTHS": "{{sleep}}", "EXIT_CODE": "{{exit}}"}}))
	cfg.URI = cmpOr(cfg.URI, b.srv.URL())
	cfg.Metalake = cmpOr(cfg.Metalake, gravMetalake)
	cfg.JobTemplateName = cmpOr(cfg.JobTemplateName, gravTemplate)
	cfg.RetryWaitMin = cmpOr(cfg.RetryWaitMin, 20*time.Millisecond)
	cfg.RetryWaitMax = cmpOr(cfg.RetryWaitMax, 100*time.Millisecond)
	var err error
	b.sub, err = submit.NewGravitinoSubmitter(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.sub.Close(context.Background()) })
	return b
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// gravRequest is job id's request: a ledger URL with a password, a catalog
// credential, and jobOptions that say how long the program runs.
func gravRequest(id int64, sleepTenths, exit int) submit.JobRequest {
	return submit.JobRequest{JobID: id, Fence: 3, DBURL: "postgres://tms:hunter2-pw@db:5432/ledger?sslmode=disable",
		Table: "lake.sales.orders", Types: []policy.Type{policy.Compaction, policy.SnapshotExpiry},
		CatalogProps: map[string]string{"s3.secret-access-key": "s3-secret-value"},
		JobOptions:   map[string]string{"spark.executor.memory": "4g", "sleep": fmt.Sprint(sleepTenths), "exit": fmt.Sprint(exit)}}
}

func waitState(t *testing.T, s submit.Submitter, id string, want submit.JobState) submit.JobStatus {
	t.Helper()
	var st submit.JobStatus
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("run %s to be %s", id, want), func() bool {
		var err error
		st, err = s.Status(t.Context(), id)
		require.NoError(t, err)
		return st.State == want
	})
	return st
}

// TestGravitinoSubmitRunsTheTemplate: a submit is one run of the template
// whose jobConf holds TMS's keys, the jobOptions and the catalog
// credentials' references, never a secret; the program gets them as the
// template says; status follows the run to succeeded and to failed.
func TestGravitinoSubmitRunsTheTemplate(t *testing.T) {
	t.Parallel()
	refs := map[string]string{"s3.secret-access-key": "file:/run/secrets/s3", "s3.access-key-id": "env:S3_KEY"}
	b := gravitinoSetup(t, gravitinotest.Config{StrictPlaceholders: true}, submit.GravitinoConfig{CatalogSecretRefs: refs})

	id, err := b.sub.Submit(t.Context(), gravRequest(7, 0, 0))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(id, "job-"), id)
	waitState(t, b.sub, id, submit.JobSucceeded)
	runs := b.srv.Runs()
	require.Len(t, runs, 1)
	conf := runs[0].JobConf
	wantRefs := "s3.access-key-id=env%3AS3_KEY&s3.secret-access-key=file%3A%2Frun%2Fsecrets%2Fs3"
	require.Equal(t, map[string]string{"job_id": "7", "fence": "3", "ledger_url": "postgres://tms@db:5432/ledger?sslmode=disable",
		"catalog_name": "lake", "table_identifier": "sales.orders", "types": "compaction,snapshot-expiry",
		"catalog_secret_refs": wantRefs, "spark.executor.memory": "4g", "sleep": "0", "exit": "0"}, conf)
	argv, err := os.ReadFile(filepath.Join(b.logs, "argv-7"))
	require.NoError(t, err)
	require.Equal(t, "7\n3\npostgres://tms@db:5432/ledger?sslmode=disable\n", string(argv))
	env, err := os.ReadFile(filepath.Join(b.logs, "env-7"))
	require.NoError(t, err)
	require.Contains(t, string(env), "TMS_CATALOG_SECRET_REFS="+wantRefs)
	for _, r := range b.srv.Requests() {
		require.NotContains(t, r.Text(), "hunter2-pw", "no request carries the ledger password")
		require.NotContains(t, r.Text(), "s3-secret-value", "nor a catalog credential")
	}

	id, err = b.sub.Submit(t.Context(), gravRequest(8, 0, 3))
	require.NoError(t, err)
	st := waitState(t, b.sub, id, submit.JobFailed)
	require.Contains(t, st.Message, id)
}

// TestGravitinoStatusAndCancel: a queued and a started run map to queued and
// running; cancel stops the running one (cancelling, then cancelled) and
// removes the queued one; an id Gravitino does not have is unknown to
// Status and ErrUnknownJob to Cancel.
func TestGravitinoStatusAndCancel(t *testing.T) {
	t.Parallel()
	b := gravitinoSetup(t, gravitinotest.Config{MaxRunning: 1}, submit.GravitinoConfig{})
	running, err := b.sub.Submit(t.Context(), gravRequest(1, 600, 0))
	require.NoError(t, err)
	queued, err := b.sub.Submit(t.Context(), gravRequest(2, 0, 0))
	require.NoError(t, err)
	waitState(t, b.sub, running, submit.JobRunning)
	waitState(t, b.sub, queued, submit.JobQueued)

	require.NoError(t, b.sub.Cancel(t.Context(), queued))
	waitState(t, b.sub, queued, submit.JobCancelled)
	require.NoError(t, b.sub.Cancel(t.Context(), running))
	waitState(t, b.sub, running, submit.JobCancelled)
	r, ok := b.srv.Run(running)
	require.True(t, ok)
	require.True(t, r.CancelRequested)
	require.True(t, r.Exited, "the program was stopped")
	require.NoError(t, b.sub.Cancel(t.Context(), running), "cancelling an ended run is not an error")

	st, err := b.sub.Status(t.Context(), "job-404")
	require.NoError(t, err)
	require.Equal(t, submit.JobUnknown, st.State)
	require.ErrorIs(t, b.sub.Cancel(t.Context(), "job-404"), submit.ErrUnknownJob)
	require.True(t, b.sub.Authoritative())
}

// TestGravitinoFaults: 503 bursts and slow answers are retried, a reset
// after the server made the run and an answer slower than the timeout are
// found again by listing the runs: every submit maps to exactly one run. A
// 401, an answer that is not JSON and an unknown metalake are errors that
// name the cause, sent once.
func TestGravitinoFaults(t *testing.T) {
	t.Parallel()
	b := gravitinoSetup(t, gravitinotest.Config{}, submit.GravitinoConfig{Timeout: 500 * time.Millisecond})
	runsOf := func(jobID int64) []string {
		var ids []string
		for _, r := range b.srv.Runs() {
			if r.JobConf["job_id"] == fmt.Sprint(jobID) {
				ids = append(ids, r.JobID)
			}
		}
		return ids
	}
	post := gravitinotest.Fault{Method: "POST", Path: "/jobs/runs"}
	fault := func(f gravitinotest.Fault, kind gravitinotest.FaultKind, count int, delay time.Duration) gravitinotest.Fault {
		f.Kind, f.Count, f.Delay = kind, count, delay
		return f
	}
	list := gravitinotest.Fault{Method: "GET", Path: "/jobs/runs"}
	for i, tc := range []struct {
		name   string
		faults []gravitinotest.Fault
	}{
		{"503 burst", []gravitinotest.Fault{fault(post, gravitinotest.Status503, 3, 0)}},
		{"reset after the run was made", []gravitinotest.Fault{fault(post, gravitinotest.ResetAfterApply, 1, 0)}},
		{"reset, then 503s on the search", []gravitinotest.Fault{fault(post, gravitinotest.ResetAfterApply, 1, 0), fault(list, gravitinotest.Status503, 2, 0)}},
		{"slow, within the timeout", []gravitinotest.Fault{fault(post, gravitinotest.Slow, 1, 200*time.Millisecond)}},
		{"slower than the timeout", []gravitinotest.Fault{fault(post, gravitinotest.Slow, 1, 1500*time.Millisecond)}},
	} {
		jobID := int64(100 + i)
		for _, f := range tc.faults {
			b.srv.Inject(f)
		}
		id, err := b.sub.Submit(t.Context(), gravRequest(jobID, 0, 0))
		require.NoError(t, err, tc.name)
		require.Equal(t, []string{id}, runsOf(jobID), "%s: exactly one run, and it is the one returned", tc.name)
		require.Zero(t, b.srv.PendingFaults(), tc.name)
	}

	for _, tc := range []struct {
		fault gravitinotest.FaultKind
		want  string
	}{
		{gravitinotest.Status401, "HTTP 401"},
		{gravitinotest.NotJSON, "not JSON"},
	} {
		f := post
		f.Kind, f.Count = tc.fault, 1
		b.srv.Inject(f)
		b.srv.ClearRequests()
		_, err := b.sub.Submit(t.Context(), gravRequest(200, 0, 0))
		require.ErrorContains(t, err, tc.want)
		require.Len(t, b.srv.Requests(), 1, "%s: sent once", tc.fault)
	}
	require.Empty(t, runsOf(200))

	other, err := submit.NewGravitinoSubmitter(submit.GravitinoConfig{URI: b.srv.URL(), Metalake: "nope", JobTemplateName: gravTemplate})
	require.NoError(t, err)
	defer other.Close(context.Background())
	_, err = other.Submit(t.Context(), gravRequest(201, 0, 0))
	require.ErrorContains(t, err, "NoSuchMetalakeException")
	_, err = other.Status(t.Context(), "job-1")
	require.ErrorContains(t, err, "NoSuchMetalakeException", "an unknown metalake is not an unknown job")
}

// TestGravitinoConcurrentSubmitsWithLostAnswers: submits eight at a time
// while the server resets connections after making their runs and answers
// 503 to others. A lost answer among answered ones is found again: every
// job id ends with exactly one run, the one its submit returned. Then three
// answers are lost at once: the runs cannot be told apart (Gravitino's job
// answers carry no jobConf), so those submits fail without sending again,
// and no job id ever has two runs.
func TestGravitinoConcurrentSubmitsWithLostAnswers(t *testing.T) {
	t.Parallel()
	b := gravitinoSetup(t, gravitinotest.Config{}, submit.GravitinoConfig{})
	submitAll := func(first, n int) []string {
		got := make([]string, n)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i := range n {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				id, err := b.sub.Submit(t.Context(), gravRequest(int64(first+i), 0, 0))
				if err != nil {
					id = "error: " + err.Error()
				}
				got[i] = id
			})
		}
		wg.Wait()
		return got
	}
	runsByJob := func() map[string][]string {
		m := map[string][]string{}
		for _, r := range b.srv.Runs() {
			m[r.JobConf["job_id"]] = append(m[r.JobConf["job_id"]], r.JobID)
		}
		return m
	}

	b.srv.Inject(gravitinotest.Fault{Method: "POST", Path: "/jobs/runs", Kind: gravitinotest.Status503, Count: 3})
	got := submitAll(300, 8) // the 503s first, then one lost answer mid-stream
	b.srv.Inject(gravitinotest.Fault{Method: "POST", Path: "/jobs/runs", Kind: gravitinotest.ResetAfterApply, Count: 1})
	got = append(got, submitAll(308, 16)...)
	byJob := runsByJob()
	for i, id := range got {
		require.Equal(t, []string{id}, byJob[fmt.Sprint(300+i)], "job %d", 300+i)
	}
	require.Zero(t, b.srv.PendingFaults())

	// Lost answers at once: three resets; then, ten times, a 503 (not
	// applied) beside a reset (applied), the pair that once let the 503's
	// search take the other job's run, so that job ran twice. Whatever
	// fails, fails safe: no job is sent twice, and a submit that returns
	// returns its own job's run.
	safe := func(first int, got []string) {
		t.Helper()
		byJob := runsByJob()
		for i, id := range got {
			job := fmt.Sprint(first + i)
			require.LessOrEqual(t, len(byJob[job]), 1, "job %s was never sent twice", job)
			if strings.HasPrefix(id, "error: ") {
				require.Contains(t, id, "not sent again")
				continue
			}
			require.Equal(t, []string{id}, byJob[job], "job %s", job)
		}
	}
	b.srv.Inject(gravitinotest.Fault{Method: "POST", Path: "/jobs/runs", Kind: gravitinotest.ResetAfterApply, Count: 3})
	safe(400, submitAll(400, 3))
	for round := range 10 {
		first := 500 + 10*round
		b.srv.Inject(gravitinotest.Fault{Method: "POST", Path: "/jobs/runs", Kind: gravitinotest.Status503, Count: 1})
		b.srv.Inject(gravitinotest.Fault{Method: "POST", Path: "/jobs/runs", Kind: gravitinotest.ResetAfterApply, Count: 1})
		safe(first, submitAll(first, 2))
		require.Zero(t, b.srv.PendingFaults())
	}
}

// TestGravitinoAuth: simple, basic and oauth2 (client credentials, the
// token fetched once and reused) reach the server as it expects them; a
// wrong password is a 401 error.
func TestGravitinoAuth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		srv     gravitinotest.Config
		auth    submit.GravitinoAuth
		creator string
	}{
		{"simple", gravitinotest.Config{Auth: gravitinotest.AuthSimple}, submit.GravitinoAuth{Type: "simple", User: "tms"}, "tms"},
		{"basic", gravitinotest.Config{Auth: gravitinotest.AuthBasic, Username: "tms", Password: "pw"},
			submit.GravitinoAuth{Type: "basic", User: "tms", Password: "pw"}, "tms"},
		{"oauth2", gravitinotest.Config{Auth: gravitinotest.AuthOAuth2, OAuth2ClientID: "tms-client", OAuth2ClientSecret: "cs", OAuth2Scope: "jobs"},
			submit.GravitinoAuth{Type: "oauth2", OAuthCredential: "tms-client:cs", OAuthScope: "jobs"}, "tms-client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b *gravBundle
			if tc.auth.Type == "oauth2" {
				// The token endpoint is the server's own: known once it runs.
				placeholder := tc.auth
				placeholder.OAuth2ServerURI = "http://placeholder:1"
				b = gravitinoSetup(t, tc.srv, submit.GravitinoConfig{Auth: placeholder})
				tc.auth.OAuth2ServerURI = b.srv.URL()
				var err error
				b.sub, err = submit.NewGravitinoSubmitter(submit.GravitinoConfig{URI: b.srv.URL(), Metalake: gravMetalake,
					JobTemplateName: gravTemplate, Auth: tc.auth})
				require.NoError(t, err)
			} else {
				b = gravitinoSetup(t, tc.srv, submit.GravitinoConfig{Auth: tc.auth})
			}
			for i := range 2 {
				id, err := b.sub.Submit(t.Context(), gravRequest(int64(i+1), 0, 0))
				require.NoError(t, err)
				r, ok := b.srv.Run(id)
				require.True(t, ok)
				require.Equal(t, tc.creator, r.Creator)
			}
			tokens := 0
			for _, r := range b.srv.Requests() {
				if strings.HasSuffix(r.Path, "/oauth2/token") {
					tokens++
				}
			}
			if tc.auth.Type == "oauth2" {
				require.Equal(t, 1, tokens, "the token is reused")
			}
		})
	}
	b := gravitinoSetup(t, gravitinotest.Config{Auth: gravitinotest.AuthBasic, Username: "tms", Password: "pw"},
		submit.GravitinoConfig{Auth: submit.GravitinoAuth{Type: "basic", User: "tms", Password: "wrong"}})
	_, err := b.sub.Submit(t.Context(), gravRequest(9, 0, 0))
	require.ErrorContains(t, err, "HTTP 401")
	require.Empty(t, b.srv.Runs())
}

// TestGravitinoConfigErrors: each bad setting is refused naming its key.
func TestGravitinoConfigErrors(t *testing.T) {
	t.Parallel()
	ok := submit.GravitinoConfig{URI: "http://g:8090", Metalake: "m", JobTemplateName: "t"}
	for _, tc := range []struct {
		edit func(*submit.GravitinoConfig)
		want string
	}{
		{func(c *submit.GravitinoConfig) { c.URI = "" }, "jobSubmitter.gravitino.uri is required"},
		{func(c *submit.GravitinoConfig) { c.URI = "g:8090" }, "want http(s)://host:port"},
		{func(c *submit.GravitinoConfig) { c.Metalake = "" }, "jobSubmitter.gravitino.metalake is required"},
		{func(c *submit.GravitinoConfig) { c.JobTemplateName = "" }, "jobSubmitter.gravitino.jobTemplateName is required"},
		{func(c *submit.GravitinoConfig) { c.Auth.Type = "kerberos" }, `gravitinoAuth.authType "kerberos"`},
		{func(c *submit.GravitinoConfig) { c.Auth.Type = "basic" }, "gravitinoAuth.user is required"},
		{func(c *submit.GravitinoConfig) { c.Auth.Type = "oauth2" }, "gravitinoAuth.oauth2ServerUri is required"},
		{func(c *submit.GravitinoConfig) {
			c.Auth = submit.GravitinoAuth{Type: "oauth2", OAuth2ServerURI: "http://o"}
		},
			"gravitinoAuth.oauthCredential must be client_id:client_secret"},
		{func(c *submit.GravitinoConfig) { c.CatalogSecretRefs = map[string]string{"token": "abc"} }, "catalog credential token: the gravitino submitter passes references only"},
	} {
		c := ok
		tc.edit(&c)
		_, err := submit.NewGravitinoSubmitter(c)
		require.ErrorIs(t, err, submit.ErrInvalidJobRequest)
		require.ErrorContains(t, err, tc.want)
	}
	s, err := submit.NewGravitinoSubmitter(ok)
	require.NoError(t, err)
	req := gravRequest(1, 0, 0)
	req.JobOptions = map[string]string{"spark.hadoop.fs.s3a.secret.key": "x"}
	_, err = s.Submit(t.Context(), req)
	require.ErrorContains(t, err, `jobOptions key "spark.hadoop.fs.s3a.secret.key" is credential-shaped`)
	req.JobOptions = map[string]string{"spark.driver.extraJavaOptions": "-Dhome=$HOME"}
	_, err = s.Submit(t.Context(), req)
	require.ErrorContains(t, err, "jobConf spark.driver.extraJavaOptions holds '\\' or '$'")
}
