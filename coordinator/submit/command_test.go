package submit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/policy"
)

// The command submitter runs real processes: small /bin/sh programs stand in
// for spark-submit and kubectl, recording the argv and environment they got.

func commandSubmitter(t *testing.T, cfg submit.CommandConfig) *submit.CommandSubmitter {
	t.Helper()
	s, err := submit.NewCommandSubmitter(cfg)
	require.NoError(t, err)
	return s
}

// TestCommandSubmitRendersArgvAndKeepsSecretsInTheEnvironment: every
// placeholder reaches the command as one argument (a value with spaces too),
// the ledger URL in argv has no password, and the credentials arrive only in
// the environment.
func TestCommandSubmitRendersArgvAndKeepsSecretsInTheEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	argvFile, envFile := filepath.Join(dir, "argv"), filepath.Join(dir, "env")
	script := coordtest.WriteScript(t, `for a in "$@"; do printf '%s\n' "$a"; done > `+argvFile+`
env > `+envFile+`
echo "  ext-$2  "
`)
	s := commandSubmitter(t, submit.CommandConfig{
		Submit: []string{script, "--job", "{{job_id}}", "--conf", "fence={{fence}} db={{ledger_url}}",
			"{{catalog_name}}", "{{table_identifier}}", "{{ types }}"},
		Status: []string{script, "{{external_id}}"}, Cancel: []string{script, "{{external_id}}"},
		Env: []string{"PATH=" + os.Getenv("PATH")},
	})
	secret := coordtest.SecretValue()
	id, err := s.Submit(t.Context(), submit.JobRequest{JobID: 42, Fence: 3, Table: "lake.db.sales.orders",
		DBURL:        "postgres://tms:" + secret + "@db:5432/ledger?sslmode=disable&password=" + secret,
		Types:        []policy.Type{policy.Compaction, policy.SnapshotExpiry},
		CatalogProps: map[string]string{"token": secret}})
	require.NoError(t, err)
	require.Equal(t, "ext-42", id)

	argv, err := os.ReadFile(argvFile)
	require.NoError(t, err)
	require.Equal(t, []string{"--job", "42", "--conf", "fence=3 db=postgres://tms@db:5432/ledger?sslmode=disable",
		"lake", "db.sales.orders", "compaction,snapshot-expiry"}, strings.Split(strings.TrimSpace(string(argv)), "\n"))
	require.NotContains(t, string(argv), secret)
	env, err := os.ReadFile(envFile)
	require.NoError(t, err)
	require.Contains(t, string(env), "TMS_CATALOG_PROP_token="+secret+"\n")
	require.Contains(t, string(env), "TMS_DB=postgres://tms:"+secret+"@db:5432/")
}

// TestCommandStatusAndCancel: the status word maps to the state, a non-zero
// exit is unknown, anything else is an error (not evidence about the job);
// cancel runs its command and reports its failure.
func TestCommandStatusAndCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The status command answers from a file named after the id, as a
	// platform's job store would; unknown ids exit 1.
	status := coordtest.WriteScript(t, `f=`+dir+`/"$1".state
[ -f "$f" ] || { echo "no such job $1" >&2; exit 1; }
cat "$f"
`)
	cancel := coordtest.WriteScript(t, `[ -f `+dir+`/"$1".state ] || { echo "no such job $1" >&2; exit 3; }
echo cancelled > `+dir+`/"$1".state
`)
	s := commandSubmitter(t, submit.CommandConfig{Submit: []string{"true"}, Status: []string{status, "{{external_id}}"},
		Cancel: []string{cancel, "{{external_id}}"}})
	for word, want := range map[string]submit.JobState{"queued\n": submit.JobQueued, "Running": submit.JobRunning,
		"succeeded\nextra line": submit.JobSucceeded, "failed": submit.JobFailed, "cancelled": submit.JobCancelled} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "j1.state"), []byte(word), 0o644))
		st, err := s.Status(t.Context(), "j1")
		require.NoError(t, err, "%q", word)
		require.Equal(t, want, st.State, "%q", word)
	}
	st, err := s.Status(t.Context(), "gone")
	require.NoError(t, err)
	require.Equal(t, submit.JobUnknown, st.State)
	require.Contains(t, st.Message, "no such job gone")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "j2.state"), []byte("exploded"), 0o644))
	_, err = s.Status(t.Context(), "j2")
	require.ErrorContains(t, err, `printed "exploded"`)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "j3.state"), []byte("running"), 0o644))
	require.NoError(t, s.Cancel(t.Context(), "j3"))
	st, err = s.Status(t.Context(), "j3")
	require.NoError(t, err)
	require.Equal(t, submit.JobCancelled, st.State)
	err = s.Cancel(t.Context(), "nope")
	require.ErrorContains(t, err, "cancel command")
	require.ErrorContains(t, err, "no such job nope")
}

// TestCommandSubmitID: the id comes from the first capture group of
// idRegex (kubectl prints `job.batch/NAME created`); a submit that prints
// no id, exits non-zero or hangs past the timeout is an error.
func TestCommandSubmitID(t *testing.T) {
	t.Parallel()
	kubectl := coordtest.WriteScript(t, `echo "job.batch/tms-job-$1 created"`)
	s := commandSubmitter(t, submit.CommandConfig{Submit: []string{kubectl, "{{job_id}}"}, Status: []string{"true"},
		Cancel: []string{"true"}, IDRegex: `job\.batch/(\S+) created`})
	req := submit.JobRequest{JobID: 7, Fence: 1, DBURL: "sqlite:///x.db", Table: "local.tms.t"}
	id, err := s.Submit(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, "tms-job-7", id)

	for name, tc := range map[string]struct {
		body, want string
		timeout    time.Duration
	}{
		"no id":    {`echo "submitted, somewhere"`, "printed no external id", 0},
		"silent":   {`exit 0`, "printed no external id", 0},
		"fails":    {`echo "cluster says no" >&2; exit 2`, "cluster says no", 0},
		"hangs":    {`exec sleep 30`, "deadline exceeded", 200 * time.Millisecond},
		"two ids?": {`echo "a b"`, "printed no external id", 0},
		"echoes":   {`echo "oops: token=$TMS_CATALOG_PROP_token" >&2; exit 1`, "oops: token=***", 0},
	} {
		s := commandSubmitter(t, submit.CommandConfig{Submit: []string{coordtest.WriteScript(t, tc.body)}, Status: []string{"true"},
			Cancel: []string{"true"}, Timeout: tc.timeout})
		secret := coordtest.SecretValue()
		req := req
		req.CatalogProps = map[string]string{"token": secret}
		_, err := s.Submit(t.Context(), req)
		require.ErrorContains(t, err, tc.want, name)
		require.NotContains(t, err.Error(), secret, "%s: an echoed credential is masked", name)
	}
	// The ledger password too.
	s = commandSubmitter(t, submit.CommandConfig{Submit: []string{coordtest.WriteScript(t, `echo "db is $TMS_DB"`)},
		Status: []string{"true"}, Cancel: []string{"true"}})
	req.DBURL = "postgres://u:hunter2-pw@db/ledger"
	_, err = s.Submit(t.Context(), req)
	require.ErrorContains(t, err, "db is postgres://u:***@db/ledger")
}

// TestCommandConfigErrors: templates are checked when the submitter is
// made, naming the template, the argument and the placeholder.
func TestCommandConfigErrors(t *testing.T) {
	t.Parallel()
	ok := []string{"true"}
	for _, tc := range []struct {
		cfg  submit.CommandConfig
		want string
	}{
		{submit.CommandConfig{Submit: []string{"x", "{{job}}"}, Status: ok, Cancel: ok}, "submit command: argument 1: unknown placeholder {{job}}; known: job_id, fence"},
		{submit.CommandConfig{Submit: []string{"x", "{{external_id}}"}, Status: ok, Cancel: ok}, "unknown placeholder {{external_id}}"},
		{submit.CommandConfig{Submit: ok, Status: []string{"x", "{{external_id"}, Cancel: ok}, `status command: argument 1 ("{{external_id"): unbalanced {{ }}`},
		{submit.CommandConfig{Submit: ok, Status: ok}, "cancel command: empty"},
		{submit.CommandConfig{Status: ok, Cancel: ok}, "submit command: empty"},
		{submit.CommandConfig{Submit: ok, Status: ok, Cancel: ok, IDRegex: `job-\d+`}, "has no capture group"},
		{submit.CommandConfig{Submit: ok, Status: ok, Cancel: ok, IDRegex: `(`}, "command idRegex"},
	} {
		_, err := submit.NewCommandSubmitter(tc.cfg)
		require.ErrorIs(t, err, submit.ErrInvalidJobRequest, tc.want)
		require.ErrorContains(t, err, tc.want)
	}
}
