package config

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/policy"
)

// serve parses args as serve's command line and applies the file at
// path ("" for none), as runServe does.
func serve(t *testing.T, path string, args ...string) (*Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	c := &Config{}
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse(append(args, "--config", path)))
	return c, c.Apply(fs)
}

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tms.conf")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// TestConfigFile: the file's keys fill the flags the command line left
// unset, a TMS_* variable wins over the file, a flag over both; catalogs
// and their ircAuth references come out resolved, cooldowns by type.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("tok-from-file\n"), 0o600))
	conf := write(t, `
# comments and blank lines are fine
! so is this
gravitino.maintenance.db = sqlite://from-file.db   # a comment after the value
gravitino.maintenance.node.id = file-node	! a tab, then a comment
gravitino.maintenance.jobSubmitter.local.maxRunning = 7 #
gravitino.maintenance.scheduler.pollIntervalMs = 2500
gravitino.maintenance.expand.enqueueBatchSize = 50
gravitino.maintenance.task.compaction.minIntervalMs = 7200000
gravitino.maintenance.catalog.prod.type = rest
gravitino.maintenance.catalog.prod.uri = http://catalog:8181/#not-a-comment
gravitino.maintenance.catalog.prod.warehouse = "s3://lake/ #kept" # quoted: the # inside is the value's
gravitino.maintenance.catalog.lake.warehouseDir = /data/lake
gravitino.maintenance.ircAuth.token = file:`+tokenFile+`
gravitino.maintenance.gravitinoAuth.password = env:TMS_TEST_GRAVITINO_PW
gravitino.maintenance.gravitinoAuth.authType = basic
`)
	t.Setenv("TMS_TEST_GRAVITINO_PW", "pw")
	t.Setenv("TMS_DB", "")
	require.NoError(t, os.Unsetenv("TMS_DB"))
	t.Setenv("TMS_MAX_RUNNING", "3") // the variable wins over the file

	c, err := serve(t, conf, "--node-id", "flag-node", "--min-interval", "snapshot-expiry=30m") // the flag wins over the file
	require.NoError(t, err)
	require.Equal(t, "sqlite://from-file.db", c.DB)
	require.Equal(t, "flag-node", c.NodeID)
	require.Equal(t, 3, c.MaxRunning)
	require.Equal(t, 50, c.ExpandBatch)
	require.Equal(t, 2500*time.Millisecond, c.PollInterval)
	require.Equal(t, time.Minute, c.HeartbeatInterval, "unset everywhere: the default")
	require.Equal(t, 5, c.File().Line(Prefix+"node.id"), "the file says where")
	require.Empty(t, c.Validate())

	res, err := c.Resolve()
	require.NoError(t, err)
	require.Equal(t, []flow.CatalogConfig{
		{Name: "lake", WarehouseDir: "/data/lake"},
		{Name: "prod", Properties: map[string]string{"type": "rest", "uri": "http://catalog:8181/#not-a-comment", "warehouse": "s3://lake/ #kept"},
			Secrets: map[string]string{"token": "tok-from-file"}},
	}, res.Catalogs)
	require.Equal(t, map[policy.Type]time.Duration{policy.Compaction: 2 * time.Hour, policy.SnapshotExpiry: 30 * time.Minute}, res.MinInterval)
	require.Equal(t, submit.GravitinoAuth{Type: "basic", Password: "pw"}, res.GravitinoAuth)

	// A catalog named by the flags and by the file is refused.
	c, err = serve(t, conf, "--catalog", "prod", "--catalog-prop", "type=rest")
	require.NoError(t, err)
	require.ErrorContains(t, c.Validate().Err(), `key gravitino.maintenance.catalog.prod.type: catalog "prod" is configured both by flags and by the config file`)

	// A bad quote or text after it is refused naming the file and line.
	for text, want := range map[string]string{
		"gravitino.maintenance.node.id = \"tms-a\n":           `bad.conf:1: key gravitino.maintenance.node.id: the value's opening quote is not closed`,
		"\ngravitino.maintenance.node.id = \"tms-a\" tms-b\n": `bad.conf:2: key gravitino.maintenance.node.id: text "tms-b" after the value's closing quote`,
		"gravitino.maintenance node.id = tms-a\n":             `bad.conf:1: want key = value`,
	} {
		bad := filepath.Join(t.TempDir(), "bad.conf")
		require.NoError(t, os.WriteFile(bad, []byte(text), 0o600))
		_, err := ReadFile(bad)
		require.ErrorContains(t, err, want)
		require.ErrorIs(t, err, invalid.ErrArgument)
	}
	_, err = ReadFile(filepath.Join(dir, "missing.conf"))
	require.ErrorContains(t, err, "--config: open ")
	require.ErrorIs(t, err, invalid.ErrArgument)

	// A missing variable behind a reference names the key.
	require.NoError(t, os.Unsetenv("TMS_TEST_GRAVITINO_PW"))
	c, err = serve(t, conf)
	require.NoError(t, err)
	_, err = c.Resolve()
	require.ErrorContains(t, err, "tms.conf:15: key gravitino.maintenance.gravitinoAuth.password: environment variable TMS_TEST_GRAVITINO_PW is not set")
	require.ErrorIs(t, err, invalid.ErrArgument)

	// A value its flag refuses names the variable, or the file's line.
	t.Setenv("TMS_MAX_RUNNING", "many")
	_, err = serve(t, conf)
	require.ErrorContains(t, err, `TMS_MAX_RUNNING: --max-running "many": `)
	require.NoError(t, os.Unsetenv("TMS_MAX_RUNNING"))
	_, err = serve(t, write(t, "gravitino.maintenance.jobSubmitter.local.maxRunning = many\n"))
	require.ErrorContains(t, err, `tms.conf:1: key gravitino.maintenance.jobSubmitter.local.maxRunning: invalid argument "many"`)
}

// TestEveryKeyHasItsFlag: each key of the file sets a flag RegisterFlags
// binds, and FlagKey finds the key back.
func TestEveryKeyHasItsFlag(t *testing.T) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	new(Config).RegisterFlags(fs)
	for k, flag := range flagKeys {
		require.NotNil(t, fs.Lookup(flag), "key %s sets --%s, which serve does not have", k, flag)
		require.Equal(t, Prefix+k, FlagKey(flag))
	}
	require.Empty(t, FlagKey("catalog-prop"))
}

// TestDefaults: the flags' defaults are the owning packages' constants.
func TestDefaults(t *testing.T) {
	t.Setenv("TMS_DB", "")
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	var c Config
	c.RegisterFlags(fs)
	require.Equal(t, DefaultDB, c.DB)
	require.Equal(t, flow.DefaultCommitDelay, c.CommitDelay)
	require.Equal(t, flow.DefaultEnqueueBatchSize, c.ExpandBatch)
	require.Equal(t, submit.DefaultLocalMaxRunning, c.MaxRunning)
	require.Equal(t, "./tms-logs", c.LogDir)
	require.Equal(t, "local", c.JobSubmitter)
	require.Equal(t, "127.0.0.1:8090", c.Listen)
	require.Equal(t, []int{4, 8, 4}, []int{c.ExpandThreads, c.CronThreads, c.CommitThreads})
}

// TestCheck: every problem of a file, each with its line and key, in line
// order; a good file has none, and no reference is read.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // problems, after "tms.conf:"
	}{
		{"good, references unread", `
gravitino.maintenance.db = postgres://tms@db/tms
gravitino.maintenance.catalogNotify.enabled = true
gravitino.maintenance.http.adminToken = env:TMS_CHECK_NEVER_SET
gravitino.maintenance.catalog.prod.uri = http://rest:8181
gravitino.maintenance.ircAuth.token = file:/nonexistent/token
gravitino.maintenance.jobSubmitter.type = gravitino
gravitino.maintenance.jobSubmitter.gravitino.uri = http://gravitino:8090
gravitino.maintenance.jobSubmitter.gravitino.metalake = lake
gravitino.maintenance.jobSubmitter.gravitino.jobTemplateName = tms_runner
gravitino.maintenance.gravitinoAuth.authType = oauth2
gravitino.maintenance.gravitinoAuth.oauth2ServerUri = http://idp/
gravitino.maintenance.gravitinoAuth.oauthCredential = env:TMS_CHECK_NEVER_SET
`, nil},
		{"syntax, one problem a line", `gravitino.maintenance.node.id = a
gravitino.maintenance.node.id = b
gravitino.maintenance.scheduler.pollIntervalMs = -1
gravitino.maintenance.node.id "c"
gravitino.maintenance.runner.path = "/x
db = sqlite://x.db
gravitino.maintenance.catalog.x = 1
`, []string{
			"2: key gravitino.maintenance.node.id: already set on line 1",
			`3: key gravitino.maintenance.scheduler.pollIntervalMs: want a non-negative number of milliseconds, got "-1"`,
			`4: want key = value, got "gravitino.maintenance.node.id \"c\""`,
			"5: key gravitino.maintenance.runner.path: the value's opening quote is not closed",
			`6: key db: unknown key: every key starts with "gravitino.maintenance."`,
			"7: key gravitino.maintenance.catalog.x: want gravitino.maintenance.catalog.NAME.PROPERTY",
		}},
		{"values their flags refuse", `gravitino.maintenance.jobSubmitter.local.maxRunning = abc
gravitino.maintenance.catalogNotify.enabled = maybe
gravitino.maintenance.scheduler.cron.threads = 0
gravitino.maintenance.watcher.concurrency = 0
gravitino.maintenance.expand.enqueueBatchSize = -5
`, []string{
			`1: key gravitino.maintenance.jobSubmitter.local.maxRunning: invalid argument "abc" for "--max-running" flag`,
			`2: key gravitino.maintenance.catalogNotify.enabled: invalid argument "maybe"`,
			"3: key gravitino.maintenance.scheduler.cron.threads: must be at least 1, got 0",
			"4: key gravitino.maintenance.watcher.concurrency: must be positive, got 0",
			"5: key gravitino.maintenance.expand.enqueueBatchSize: must be at least 0, got -5",
		}},
		{"credentials and types", `gravitino.maintenance.ircAuth.token = abc
gravitino.maintenance.gravitinoAuth.password = hunter2
gravitino.maintenance.gravitinoAuth.colour = blue
gravitino.maintenance.http.readToken = plain
gravitino.maintenance.task.vacuum.minIntervalMs = 1000
gravitino.maintenance.task.compaction.maxIntervalMs = 1000
`, []string{
			"1: key gravitino.maintenance.ircAuth.token: a credential must be a reference, env:NAME or file:PATH",
			"2: key gravitino.maintenance.gravitinoAuth.password: a credential must be a reference",
			`3: key gravitino.maintenance.gravitinoAuth.colour: unknown gravitinoAuth key "colour"`,
			"4: key gravitino.maintenance.http.readToken: a credential must be a reference",
			`5: key gravitino.maintenance.task.vacuum.minIntervalMs: unknown maintenance type "vacuum"`,
			"6: key gravitino.maintenance.task.compaction.maxIntervalMs: unknown key",
		}},
		{"catalogs", `gravitino.maintenance.catalog.prod.warehouse = s3://lake/
gravitino.maintenance.catalog.prod.token = abc
gravitino.maintenance.catalog.lake.warehouseDir = /data
gravitino.maintenance.catalog.lake.uri = http://x
gravitino.maintenance.catalog.local.type = rest
gravitino.maintenance.warehouseDir = /td
`, []string{
			`1: key gravitino.maintenance.catalog.prod.type: catalog "prod" has neither type nor uri`,
			`2: key gravitino.maintenance.catalog.prod.token: property "token" is a credential: give it as gravitino.maintenance.ircAuth.token`,
			`3: key gravitino.maintenance.catalog.lake.warehouseDir: makes a local catalog, which takes no other property (catalog "lake" also has uri)`,
			`5: key gravitino.maintenance.catalog.local.type: catalog "local" is also configured by gravitino.maintenance.warehouseDir on line 6`,
			`5: key gravitino.maintenance.catalog.local.type: catalog "local" is the local warehouse catalog; give it warehouseDir`,
		}},
		{"credentials for no catalog", `gravitino.maintenance.catalog.lake.warehouseDir = /data
gravitino.maintenance.ircAuth.token = env:T
`, []string{
			"2: key gravitino.maintenance.ircAuth.token: ircAuth.* is set but no catalog with properties is configured",
		}},
		{"catalog notify on sqlite", "gravitino.maintenance.catalogNotify.enabled = true\n", []string{
			"1: key gravitino.maintenance.catalogNotify.enabled: needs the catalog's PostgreSQL database",
		}},
		{"submitters", `gravitino.maintenance.jobSubmitter.type = command
gravitino.maintenance.jobSubmitter.command.submit = ["x", "{{jobid}}"]
gravitino.maintenance.jobSubmitter.command.status = x y
gravitino.maintenance.jobSubmitter.gravitino.metalake = lake
`, []string{
			"1: key gravitino.maintenance.jobSubmitter.command.cancel: required with gravitino.maintenance.jobSubmitter.type command",
			"3: key gravitino.maintenance.jobSubmitter.command.status: want a JSON array of strings",
			"4: key gravitino.maintenance.jobSubmitter.gravitino.metalake: is for gravitino.maintenance.jobSubmitter.type gravitino, not command",
		}},
		{"command templates", `gravitino.maintenance.jobSubmitter.type = command
gravitino.maintenance.jobSubmitter.command.submit = ["x"]
gravitino.maintenance.jobSubmitter.command.status = ["x"]
gravitino.maintenance.jobSubmitter.command.cancel = ["x", "{{jobid}}"]
`, []string{
			"4: key gravitino.maintenance.jobSubmitter.command.cancel: invalid job request: cancel command: argument 1: unknown placeholder {{jobid}}",
		}},
		{"unknown submitter", "\ngravitino.maintenance.jobSubmitter.type = yarn\n", []string{
			`2: key gravitino.maintenance.jobSubmitter.type: unknown submitter "yarn"; want local, command or gravitino`,
		}},
		{"gravitino submitter", `gravitino.maintenance.jobSubmitter.type = gravitino
gravitino.maintenance.jobSubmitter.gravitino.metalake = lake
gravitino.maintenance.jobSubmitter.gravitino.jobTemplateName = t
`, []string{
			"1: key gravitino.maintenance.jobSubmitter.gravitino.uri: invalid job request: jobSubmitter.gravitino.uri is required",
		}},
		{"gravitino auth", `gravitino.maintenance.jobSubmitter.type = gravitino
gravitino.maintenance.jobSubmitter.gravitino.uri = http://g:8090
gravitino.maintenance.jobSubmitter.gravitino.metalake = lake
gravitino.maintenance.jobSubmitter.gravitino.jobTemplateName = t
gravitino.maintenance.gravitinoAuth.authType = basic
`, []string{
			"5: key gravitino.maintenance.gravitinoAuth.user: invalid job request: gravitinoAuth.user is required with authType basic",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(t, tc.text)
			f, probs := Check(path)
			require.Len(t, probs, len(tc.want), "%v", probs)
			for i, p := range probs {
				require.True(t, strings.HasPrefix(p.Error(), path+":"+tc.want[i]), "problem %d:\n got %s\nwant %s:%s", i, p, path, tc.want[i])
				require.ErrorIs(t, p, invalid.ErrArgument)
			}
			if len(tc.want) == 0 {
				require.Equal(t, strings.Count(strings.TrimSpace(tc.text), "\n")+1, f.Len())
			}
		})
	}
	_, probs := Check(filepath.Join(t.TempDir(), "none.conf"))
	require.Len(t, probs, 1)
	require.Contains(t, probs[0].Error(), "none.conf: open ")
}

// TestServeAndCheckAgree: what serve refuses of a file Check reports, as
// the first of its problems.
func TestServeAndCheckAgree(t *testing.T) {
	t.Setenv("TMS_DB", "")
	require.NoError(t, os.Unsetenv("TMS_DB"))
	for _, text := range []string{
		"gravitino.maintenance.nope = 1\ngravitino.maintenance.node.id = \"x\n",
		"gravitino.maintenance.jobSubmitter.type = command\n",
		"gravitino.maintenance.catalog.prod.warehouse = s3://x/\n",
		"gravitino.maintenance.http.adminToken = plain\n",
	} {
		path := write(t, text)
		_, probs := Check(path)
		require.NotEmpty(t, probs)
		c, err := serve(t, path)
		if err == nil {
			err = c.Validate().Err()
		}
		require.Error(t, err)
		require.True(t, strings.HasPrefix(err.Error(), probs[0].Error()), "serve: %v\ncheck: %v", err, probs[0])
		if len(probs) > 1 {
			require.Regexp(t, `\(and \d+ more problems?\)$`, err.Error())
		}
		var ps Problems
		require.True(t, errors.As(err, &ps))
	}
}

// TestFlagProblems: a problem of a flag names the flag, as serve always
// did.
func TestFlagProblems(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--catalog-prop", "type=rest"}, "--catalog NAME is required"},
		{[]string{"--catalog", "prod"}, `--catalog "prod" needs --catalog-prop`},
		{[]string{"--catalog", "prod", "--catalog-prop", "type=rest", "--catalog-secret", "token=abc"}, "--catalog-secret token: the value must be a reference, env:NAME or file:PATH"},
		{[]string{"--catalog", "prod", "--catalog-prop", "warehouse=s3://x/"}, `invalid argument: catalog "prod": property "type" is required`},
		{[]string{"--min-interval", "compactoin=1h"}, `--min-interval: unknown maintenance type "compactoin"`},
		{[]string{"--min-interval", "compaction"}, `--min-interval "compaction": want TYPE=DURATION`},
		{[]string{"--db", "sqlite://x.db", "--catalog-notify"}, "--catalog-notify needs the catalog's PostgreSQL database"},
		{[]string{"--admin-token", "hunter2"}, "--admin-token: the value must be a reference"},
		{[]string{"--job-submitter", "yarn"}, `--job-submitter: unknown submitter "yarn"`},
		{[]string{"--gravitino-uri", "http://g:8090"}, "--gravitino-uri is for --job-submitter gravitino, not local"},
		{[]string{"--job-submitter", "command", "--submit-command", `["x"]`, "--status-command", `["x"]`}, "--cancel-command is required with --job-submitter command"},
		{[]string{"--job-submitter", "command", "--submit-command", `x y`, "--status-command", `["x"]`, "--cancel-command", `["x"]`}, "--submit-command: want a JSON array"},
		{[]string{"--cron-threads", "0"}, "--cron-threads must be at least 1, got 0"},
		{[]string{"--poll-interval", "-1s"}, "--poll-interval must not be negative"},
	} {
		c, err := serve(t, "", tc.args...)
		require.NoError(t, err)
		probs := c.Validate()
		require.NotEmpty(t, probs, "%v", tc.args)
		require.True(t, strings.HasPrefix(probs[0].Error(), tc.want), "%v:\n got %s\nwant %s", tc.args, probs[0], tc.want)
		require.ErrorIs(t, probs.Err(), invalid.ErrArgument)
	}
	// A secret from a missing file is Resolve's refusal, naming the flag.
	c, err := serve(t, "", "--catalog", "prod", "--catalog-prop", "type=rest", "--catalog-secret", "token=file:/nonexistent/tok")
	require.NoError(t, err)
	require.Empty(t, c.Validate())
	_, err = c.Resolve()
	require.ErrorContains(t, err, "--catalog-secret token: open /nonexistent/tok")
}

// The README's configuration file example passes Check as it is written:
// every key known, every value of the right form, every credential a
// reference; a trailing comment is no part of a value.
func TestReadmeConfigExample(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "```properties\n")
	require.True(t, ok, "the README has a properties block")
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	path := write(t, block)
	f, probs := Check(path)
	require.Empty(t, probs)
	v, _ := f.FlagValue("node-id")
	require.Equal(t, "tms-a", v)
	v, _ = f.FlagValue("poll-interval")
	require.Equal(t, "10s", v)
	v, _ = f.FlagValue("log-dir")
	require.Equal(t, "/var/log/tms", v, "a trailing comment is not part of the value")
	require.Equal(t, "s3://lake/", f.catalogs["prod"]["warehouse"])
	require.Equal(t, "env:LAKE_KEY_ID", f.ircAuth["s3.access-key-id"])
	for _, m := range append([]map[string]string{f.flags, f.ircAuth}, slices.Collect(maps.Values(f.catalogs))...) {
		for k, v := range m {
			require.NotContains(t, v, "#", "%s = %q", k, v)
		}
	}
}
