package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store/testdb"
)

// migrated returns a migrated database of the backend.
func migrated(t *testing.T, newURL func(testing.TB) string) string {
	t.Helper()
	db := newURL(t)
	code, _, stderr := run(t, "migrate", "--db", db)
	require.Equal(t, cli.ExitOK, code, stderr)
	return db
}

// contentFile writes a content file and returns its path.
func contentFile(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "content.json")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	return path
}

// ok runs a command that must succeed and returns its stdout.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	code, out, stderr := run(t, args...)
	require.Equal(t, cli.ExitOK, code, "%v: %s", args, stderr)
	return out
}

type listedPolicy struct {
	Name            string          `json:"name"`
	PolicyType      string          `json:"policyType"`
	MaintenanceType string          `json:"maintenanceType"`
	Enabled         bool            `json:"enabled"`
	Version         int             `json:"version"`
	Comment         string          `json:"comment"`
	Content         json.RawMessage `json:"content"`
	Attachments     []struct {
		Level, Object string
	} `json:"attachments"`
}

func listPolicies(t *testing.T, db string) []listedPolicy {
	t.Helper()
	var ps []listedPolicy
	require.NoError(t, json.Unmarshal([]byte(ok(t, "policy", "list", "--db", db, "--json")), &ps))
	return ps
}

type effective struct {
	Table    string `json:"table"`
	Policies []struct {
		MaintenanceType string       `json:"maintenanceType"`
		Policy          listedPolicy `json:"policy"`
		Via             struct {
			Level, Object string
		} `json:"via"`
	} `json:"policies"`
}

func showEffectiveJSON(t *testing.T, db, table string) map[string]string {
	t.Helper()
	var e effective
	require.NoError(t, json.Unmarshal([]byte(ok(t, "policy", "show", "--db", db, "--json", "--effective", table)), &e))
	require.Equal(t, table, e.Table)
	got := map[string]string{}
	for _, p := range e.Policies {
		got[p.MaintenanceType] = p.Policy.Name + "@" + p.Via.Level + ":" + p.Via.Object
	}
	return got
}

func TestPolicyCommands(t *testing.T) {
	t.Parallel()
	for name, newURL := range map[string]func(testing.TB) string{
		"postgres": testdb.PostgresURL,
		"sqlite":   testdb.SQLiteURL,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := migrated(t, newURL)
			compaction := contentFile(t, `{
				"schedule": {"onCommit": true, "crontab": "0 3 * * *", "timezone": "Europe/Berlin"},
				"minIntervalMs": 600000, "minDataFileMse": 1000,
				"jobOptions": {"spark.executor.instances": 4}}`)
			expiry := contentFile(t, `{"schedule": {"crontab": "@daily"}, "retainLast": 5}`)

			out := ok(t, "policy", "create", "--db", db, "--name", "compact-hot", "--type", "compaction",
				"--content-file", compaction, "--comment", "hot tables")
			require.Contains(t, out, `created policy "compact-hot" (system_iceberg_compaction, version 1, enabled)`)
			ok(t, "policy", "create", "--db", db, "--name", "compact-all", "--type", "system_iceberg_compaction",
				"--content-file", compaction)
			ok(t, "policy", "create", "--db", db, "--name", "expire", "--type", "system_iceberg_snapshot_expiration",
				"--content-file", expiry, "--disabled")

			out = ok(t, "policy", "attach", "--db", db, "--name", "compact-all", "--object", "lake")
			require.Equal(t, "attached policy \"compact-all\" to catalog lake\n", out)
			out = ok(t, "policy", "attach", "--db", db, "--name", "compact-all", "--object", "lake")
			require.Equal(t, "policy \"compact-all\" was already attached to catalog lake\n", out)
			ok(t, "policy", "attach", "--db", db, "--name", "compact-hot", "--object", "lake.sales")
			ok(t, "policy", "attach", "--db", db, "--name", "expire", "--object", "lake.sales.eu", "--level", "namespace")
			out = ok(t, "policy", "attach", "--db", db, "--name", "compact-all", "--object", "lake.sales.eu.orders")
			require.Equal(t, "attached policy \"compact-all\" to table lake.sales.eu.orders\n", out)

			require.Equal(t, map[string]string{
				"compaction":      "compact-all@table:lake.sales.eu.orders",
				"snapshot-expiry": "expire@namespace:lake.sales.eu",
			}, showEffectiveJSON(t, db, "lake.sales.eu.orders"))
			require.Equal(t, map[string]string{
				"compaction":      "compact-hot@namespace:lake.sales",
				"snapshot-expiry": "expire@namespace:lake.sales.eu",
			}, showEffectiveJSON(t, db, "lake.sales.eu.items"))
			require.Equal(t, map[string]string{"compaction": "compact-all@catalog:lake"}, showEffectiveJSON(t, db, "lake.web.clicks"))
			require.Empty(t, showEffectiveJSON(t, db, "other.sales.orders"))

			out = ok(t, "policy", "show", "--db", db, "--effective", "lake.sales.eu.items")
			require.Contains(t, out, "table lake.sales.eu.items")
			require.Regexp(t, `compaction\s+compact-hot\s+1\s+true\s+on commit, cron 0 3 \* \* \* \(Europe/Berlin\)\s+namespace lake.sales`, out)
			require.Regexp(t, `snapshot-expiry\s+expire\s+1\s+false\s+cron @daily\s+namespace lake.sales.eu`, out)
			out = ok(t, "policy", "show", "--db", db, "--effective", "other.x.y")
			require.Contains(t, out, "no policy is attached")

			// alter makes a new version; enable and disable report changes.
			newer := contentFile(t, `{"schedule": {"onCommit": true}, "minIntervalMs": 0}`)
			out = ok(t, "policy", "alter", "--db", db, "--name", "compact-hot", "--content-file", newer, "--comment", "cooler")
			require.Equal(t, "altered policy \"compact-hot\" (version 2)\n", out)
			require.Equal(t, "policy \"expire\" enabled\n", ok(t, "policy", "enable", "--db", db, "--name", "expire"))
			require.Equal(t, "policy \"expire\" was already enabled\n", ok(t, "policy", "enable", "--db", db, "--name", "expire"))
			require.Equal(t, "policy \"compact-all\" disabled\n", ok(t, "policy", "disable", "--db", db, "--name", "compact-all"))

			ps := listPolicies(t, db)
			require.Len(t, ps, 3)
			require.Equal(t, "compact-all", ps[0].Name)
			require.False(t, ps[0].Enabled)
			require.Len(t, ps[0].Attachments, 2)
			hot := ps[1]
			require.Equal(t, "compact-hot", hot.Name)
			require.Equal(t, "system_iceberg_compaction", hot.PolicyType)
			require.Equal(t, "compaction", hot.MaintenanceType)
			require.Equal(t, 2, hot.Version)
			require.Equal(t, "cooler", hot.Comment)
			require.JSONEq(t, `{"schedule": {"onCommit": true}, "minIntervalMs": 0}`, string(hot.Content))
			require.True(t, ps[2].Enabled)

			out = ok(t, "policy", "list", "--db", db)
			require.Regexp(t, `compact-hot\s+compaction\s+true\s+2\s+on commit\s+lake.sales`, out)
			out = ok(t, "policy", "show", "--db", db, "--name", "compact-all")
			require.Contains(t, out, "system_iceberg_compaction (compaction)")
			require.Contains(t, out, "table lake.sales.eu.orders")
			require.Contains(t, out, `"minDataFileMse": 1000`)

			// detach hands the table to the next nearest policy; delete
			// removes the policy and its attachments.
			out = ok(t, "policy", "detach", "--db", db, "--name", "compact-all", "--object", "lake.sales.eu.orders")
			require.Equal(t, "detached policy \"compact-all\" from table lake.sales.eu.orders\n", out)
			require.Equal(t, "compact-hot@namespace:lake.sales", showEffectiveJSON(t, db, "lake.sales.eu.orders")["compaction"])
			require.Equal(t, "deleted policy \"compact-hot\" and its attachments\n", ok(t, "policy", "delete", "--db", db, "--name", "compact-hot"))
			require.Equal(t, "compact-all@catalog:lake", showEffectiveJSON(t, db, "lake.sales.eu.orders")["compaction"])
			require.Len(t, listPolicies(t, db), 2)

			// --json on a mutation prints the policy.
			var created listedPolicy
			require.NoError(t, json.Unmarshal([]byte(ok(t, "policy", "create", "--db", db, "--json", "--name", "compact-hot",
				"--type", "compaction", "--content-file", newer)), &created))
			require.Equal(t, 1, created.Version, "a deleted policy's name starts over")
			require.True(t, created.Enabled)
		})
	}
}

func TestPolicyCommandsRefuseBadInput(t *testing.T) {
	t.Parallel()
	db := migrated(t, testdb.SQLiteURL)
	good := contentFile(t, `{"schedule": {"onCommit": true}}`)
	ok(t, "policy", "create", "--db", db, "--name", "taken", "--type", "compaction", "--content-file", good)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no command", []string{}, "missing policy command"},
		{"unknown command", []string{"rename"}, `unknown policy command "rename"`},
		{"no name", []string{"create", "--type", "compaction", "--content-file", good}, "--name is required"},
		{"bad name", []string{"create", "--name", "a b", "--type", "compaction", "--content-file", good}, "--name:"},
		{"no type", []string{"create", "--name", "x", "--content-file", good}, "--type is required"},
		{"unknown type", []string{"create", "--name", "x", "--type", "vacuum", "--content-file", good}, "system_iceberg_orphan_file_removal"},
		{"no content", []string{"create", "--name", "x", "--type", "compaction"}, "--content-file is required"},
		{"missing file", []string{"create", "--name", "x", "--type", "compaction", "--content-file", "/nonexistent/c.json"}, "--content-file"},
		{"bad crontab", []string{"create", "--name", "x", "--type", "compaction", "--content-file",
			contentFile(t, `{"schedule": {"crontab": "61 * * * *"}}`)}, "content.schedule.crontab:"},
		{"bad time zone", []string{"create", "--name", "x", "--type", "compaction", "--content-file",
			contentFile(t, `{"schedule": {"crontab": "@daily", "timezone": "Nowhere/Land"}}`)}, "content.schedule.timezone:"},
		{"orphan onCommit", []string{"create", "--name", "x", "--type", "orphan-cleanup", "--content-file",
			contentFile(t, `{"schedule": {"onCommit": true, "crontab": "@daily"}}`)}, "content.schedule.onCommit:"},
		{"credential", []string{"create", "--name", "x", "--type", "compaction", "--content-file",
			contentFile(t, `{"schedule": {"onCommit": true}, "jobOptions": {"s3.secret-access-key": "abc"}}`)}, "content.jobOptions.s3.secret-access-key:"},
		{"threshold", []string{"create", "--name", "x", "--type", "compaction", "--content-file",
			contentFile(t, `{"schedule": {"onCommit": true}, "maxPartitionNum": -3}`)}, "content.maxPartitionNum:"},
		{"negative interval", []string{"create", "--name", "x", "--type", "compaction", "--content-file",
			contentFile(t, `{"schedule": {"onCommit": true}, "minIntervalMs": -1}`)}, "content.minIntervalMs:"},
		{"duplicate", []string{"create", "--name", "taken", "--type", "compaction", "--content-file", good}, `"taken" already exists`},
		{"alter unknown", []string{"alter", "--name", "nope", "--content-file", good}, `policy "nope"`},
		{"alter nothing", []string{"alter", "--name", "taken"}, "nothing to alter"},
		{"alter bad content", []string{"alter", "--name", "taken", "--content-file",
			contentFile(t, `{"schedule": {"onCommit": true}, "rewriteOptions": {"token": "x"}}`)}, "content.rewriteOptions.token:"},
		{"enable unknown", []string{"enable", "--name", "nope"}, `policy "nope"`},
		{"attach no object", []string{"attach", "--name", "taken"}, "--object is required"},
		{"attach empty segment", []string{"attach", "--name", "taken", "--object", "lake..t"}, "empty segment"},
		{"attach bad level", []string{"attach", "--name", "taken", "--object", "lake.db", "--level", "schema"}, "--level"},
		{"attach level mismatch", []string{"attach", "--name", "taken", "--object", "lake.db", "--level", "table"}, "CATALOG.NAMESPACE.TABLE"},
		{"attach unknown policy", []string{"attach", "--name", "nope", "--object", "lake"}, `policy "nope"`},
		{"detach not attached", []string{"detach", "--name", "taken", "--object", "lake"}, "not attached"},
		{"show both", []string{"show", "--name", "taken", "--effective", "a.b.c"}, "exactly one"},
		{"show neither", []string{"show"}, "exactly one"},
		{"effective too short", []string{"show", "--effective", "lake.db"}, "CATALOG.NAMESPACE.TABLE"},
		{"stray argument", []string{"list", "extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"policy"}, tc.args...)
			if len(tc.args) > 0 && tc.name != "unknown command" {
				args = append(args, "--db", db)
			}
			code, out, stderr := run(t, args...)
			require.Equal(t, cli.ExitUsage, code, stderr)
			require.Empty(t, out)
			require.Contains(t, stderr, tc.want)
		})
	}

	// Nothing was written by any of them.
	ps := listPolicies(t, db)
	require.Len(t, ps, 1)
	require.Equal(t, "taken", ps[0].Name)
	require.Equal(t, 1, ps[0].Version)
	require.Empty(t, ps[0].Attachments)

	// A database that was never migrated is refused, not created.
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	code, _, stderr := run(t, "policy", "list", "--db", "sqlite://"+fresh)
	require.Equal(t, cli.ExitFailure, code)
	require.Contains(t, stderr, "migrate")
	_, err := os.Stat(fresh)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// noSubmitter is the submitter of an API that cancels nothing in these tests.
type noSubmitter struct{}

func (noSubmitter) Submit(context.Context, submit.JobRequest) (string, error) {
	return "", submit.ErrSubmitterClosed
}

func (noSubmitter) Status(context.Context, string) (submit.JobStatus, error) {
	return submit.JobStatus{State: submit.JobUnknown, ExitCode: -1}, nil
}

func (noSubmitter) Cancel(context.Context, string) error { return submit.ErrUnknownJob }

// TestPolicyHTTPMatchesCLI checks that the HTTP API refuses bad content
// with the CLI's message and creates the same policy-expand row.
func TestPolicyHTTPMatchesCLI(t *testing.T) {
	t.Parallel()
	db := migrated(t, testdb.SQLiteURL)
	st := ledger(t, db)
	api, err := httpapi.NewResources(httpapi.ResourcesConfig{Store: st, Submitter: noSubmitter{}})
	require.NoError(t, err)
	post := func(body string) (int, string) {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "POST", "/v1/policies", strings.NewReader(body)))
		var e struct{ Error string }
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		return rec.Code, e.Error
	}

	for _, tc := range []struct{ typ, content string }{
		{"compaction", `{"schedule": {"crontab": "61 * * * *"}}`},
		{"compaction", `{"schedule": {"crontab": "@daily", "timezone": "Nowhere/Land"}}`},
		{"orphan-cleanup", `{"schedule": {"onCommit": true, "crontab": "@daily"}}`},
		{"compaction", `{"schedule": {"onCommit": true}, "jobOptions": {"s3.secret-access-key": "abc"}}`},
		{"compaction", `{"schedule": {"onCommit": true}, "maxPartitionNum": -3}`},
		{"snapshot-expiry", `{"schedule": {}}`},
	} {
		code, httpErr := post(`{"name": "x", "policyType": "` + tc.typ + `", "content": ` + tc.content + `}`)
		require.Equal(t, http.StatusBadRequest, code, tc.content)
		require.Regexp(t, `^content[.:]`, httpErr)
		file := contentFile(t, tc.content)
		code, _, stderr := run(t, "policy", "create", "--db", db, "--name", "x", "--type", tc.typ, "--content-file", file)
		require.Equal(t, cli.ExitUsage, code)
		require.Contains(t, stderr, "--content-file "+file+": "+httpErr, "the CLI says the same after naming its file")
	}

	// The same policy created both ways gets the same policy-expand row.
	content := `{"schedule": {"crontab": "0 0 1 1 *", "timezone": "Europe/Berlin"}}`
	ok(t, "policy", "create", "--db", db, "--name", "via-cli", "--type", "snapshot-expiry", "--content-file", contentFile(t, content))
	code, msg := post(`{"name": "via-http", "policyType": "system_iceberg_snapshot_expiration", "content": ` + content + `}`)
	require.Equal(t, http.StatusCreated, code, msg)
	rows, err := st.ListTasks(t.Context(), flow.KindPolicyExpand, 10)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, rows[0].ExecutionTime, rows[1].ExecutionTime)
	require.JSONEq(t, string(rows[0].Data), string(rows[1].Data))
	ps := listPolicies(t, db)
	require.Len(t, ps, 2)
	require.JSONEq(t, string(ps[0].Content), string(ps[1].Content))
}
