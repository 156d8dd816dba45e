package main

import (
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
	"github.com/tms-dev/tms/policy"
)

// TestConfigFile: the file's keys fill the flags the command line left
// unset, a TMS_* variable wins over the file, a flag over both; catalogs
// and their ircAuth references come out resolved, cooldowns by type.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("tok-from-file\n"), 0o600))
	conf := filepath.Join(dir, "tms.conf")
	require.NoError(t, os.WriteFile(conf, []byte(`
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
`), 0o600))
	t.Setenv("TMS_TEST_GRAVITINO_PW", "pw")
	t.Setenv("TMS_MAX_RUNNING", "3") // the variable wins over the file

	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	var (
		db, node     string
		maxRunning   int
		batch        int
		poll         time.Duration
		heartbeat    time.Duration
		configFlagOn string
	)
	fs.StringVar(&db, "db", "sqlite://./tms.db", "")
	fs.StringVar(&node, "node-id", "", "")
	fs.IntVar(&maxRunning, "max-running", 4, "")
	fs.IntVar(&batch, "expand-batch", 100, "")
	fs.DurationVar(&poll, "poll-interval", 10*time.Second, "")
	fs.DurationVar(&heartbeat, "heartbeat-interval", time.Minute, "")
	fs.StringVar(&configFlagOn, "config", "", "")
	require.NoError(t, fs.Parse([]string{"--node-id", "flag-node"})) // the flag wins over the file

	c, err := applyConfig(fs, conf)
	require.NoError(t, err)
	require.Equal(t, "sqlite://from-file.db", db)
	require.Equal(t, "flag-node", node)
	require.Equal(t, 3, maxRunning)
	require.Equal(t, 50, batch)
	require.Equal(t, 2500*time.Millisecond, poll)
	require.Equal(t, time.Minute, heartbeat, "unset everywhere: the default")

	cats, err := c.catalogConfigs()
	require.NoError(t, err)
	require.Equal(t, []flow.CatalogConfig{
		{Name: "lake", WarehouseDir: "/data/lake"},
		{Name: "prod", Properties: map[string]string{"type": "rest", "uri": "http://catalog:8181/#not-a-comment", "warehouse": "s3://lake/ #kept"},
			Secrets: map[string]string{"token": "tok-from-file"}},
	}, cats)
	cool, err := minIntervalsByType(c, []string{"snapshot-expiry=30m"})
	require.NoError(t, err)
	require.Equal(t, map[policy.Type]time.Duration{policy.Compaction: 2 * time.Hour, policy.SnapshotExpiry: 30 * time.Minute}, cool)

	_, err = mergeCatalogs([]flow.CatalogConfig{{Name: "prod", WarehouseDir: "/x"}}, cats)
	require.ErrorContains(t, err, `catalog "prod" is configured both by flags and by the config file`)

	// A bad quote or text after it is refused naming the file and line.
	for text, want := range map[string]string{
		"gravitino.maintenance.node.id = \"tms-a\n":           `bad.conf:1: key gravitino.maintenance.node.id: the value's opening quote is not closed`,
		"\ngravitino.maintenance.node.id = \"tms-a\" tms-b\n": `bad.conf:2: key gravitino.maintenance.node.id: text "tms-b" after the value's closing quote`,
		"gravitino.maintenance node.id = tms-a\n":             `bad.conf:1: want key = value`,
	} {
		bad := filepath.Join(t.TempDir(), "bad.conf")
		require.NoError(t, os.WriteFile(bad, []byte(text), 0o600))
		_, err := readConfigFile(bad)
		require.ErrorContains(t, err, want)
	}

	// A key for a flag this command does not have is refused.
	other := filepath.Join(dir, "other.conf")
	require.NoError(t, os.WriteFile(other, []byte("gravitino.maintenance.runner.path = /bin/tms-runner\n"), 0o600))
	_, err = applyConfig(fs, other)
	require.ErrorContains(t, err, "this command has no --runner")
	// A missing variable behind a reference names the key.
	t.Setenv("TMS_TEST_GRAVITINO_PW", "")
	require.NoError(t, os.Unsetenv("TMS_TEST_GRAVITINO_PW"))
	_, err = c.catalogConfigs()
	require.ErrorContains(t, err, "gravitinoAuth.password: environment variable TMS_TEST_GRAVITINO_PW is not set")
}

// The README's configuration file example parses as it is written: every
// key known, every value of the right form, every credential a reference.
func TestReadmeConfigExample(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "```properties\n")
	require.True(t, ok, "the README has a properties block")
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	conf := filepath.Join(t.TempDir(), "tms.conf")
	require.NoError(t, os.WriteFile(conf, []byte(block), 0o600))
	c, err := readConfigFile(conf)
	require.NoError(t, err)
	require.Equal(t, "tms-a", c.flags["node-id"])
	require.Equal(t, "10s", c.flags["poll-interval"])
	require.Equal(t, "s3://lake/", c.catalogs["prod"]["warehouse"])
	require.Equal(t, "env:LAKE_KEY_ID", c.ircAuth["s3.access-key-id"])
	require.Equal(t, "/var/log/tms", c.flags["log-dir"], "a trailing comment is not part of the value")
	for _, m := range append([]map[string]string{c.flags, c.ircAuth}, slices.Collect(maps.Values(c.catalogs))...) {
		for k, v := range m {
			require.NotContains(t, v, "#", "%s = %q", k, v)
		}
	}
}
