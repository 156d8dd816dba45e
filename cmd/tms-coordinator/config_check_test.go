package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
)

// TestConfigCheck: `config check` prints every problem of a bad file, one
// line each with its file, line and key, and exits 2; a good file is ok,
// though the references it holds lead nowhere here.
func TestConfigCheck(t *testing.T) {
	t.Parallel()
	const bad = "testdata/config/bad.conf"
	code, out, stderr := run(t, "config", "check", bad)
	require.Equal(t, cli.ExitUsage, code, stderr)
	require.Empty(t, out)
	want := []string{
		bad + `:3: key gravitino.maintenance.jobSubmitter.local.maxRunning: invalid argument "abc" for "--max-running" flag: must be an integer`,
		bad + `:4: key gravitino.maintenance.scheduler.pollIntervalMs: want a non-negative number of milliseconds, got "10s"`,
		bad + `:5: key gravitino.maintenance.node.id: already set on line 2`,
		bad + `:6: key gravitino.maintenance.nope: unknown key (known: `,
		bad + `:7: key gravitino.maintenance.ircAuth.token: a credential must be a reference, env:NAME or file:PATH, never the secret itself`,
		bad + `:8: key gravitino.maintenance.gravitinoAuth.colour: unknown gravitinoAuth key "colour"`,
		bad + `:9: key gravitino.maintenance.task.vacuum.minIntervalMs: unknown maintenance type "vacuum"`,
		bad + `:10: key gravitino.maintenance.catalog.prod.type: catalog "prod" has neither type nor uri`,
		bad + `:11: key gravitino.maintenance.catalog.prod.token: property "token" is a credential`,
		bad + `:12: key gravitino.maintenance.http.adminToken: a credential must be a reference`,
		bad + `:13: key gravitino.maintenance.jobSubmitter.gravitino.uri: is for gravitino.maintenance.jobSubmitter.type gravitino, not local`,
		bad + `:14: want key = value, got "this line has no equals sign"`,
		"tms-coordinator config: 12 problems",
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	require.Len(t, lines, len(want), stderr)
	for i, l := range lines {
		require.True(t, strings.HasPrefix(l, want[i]), "line %d:\n got %s\nwant %s…", i+1, l, want[i])
	}
	require.NotContains(t, stderr, "s3cret", "a secret in clear is not repeated")
	require.NotContains(t, stderr, "hunter2")

	code, out, stderr = run(t, "config", "check", "testdata/config/good.conf")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "testdata/config/good.conf: ok (11 keys)\n", out)
	require.Empty(t, stderr)

	for _, args := range [][]string{{"config"}, {"config", "check"}, {"config", "lint", "x.conf"}} {
		code, _, stderr := run(t, args...)
		require.Equal(t, cli.ExitUsage, code, "%v: %s", args, stderr)
	}
	code, _, stderr = run(t, "config", "check", filepath.Join(t.TempDir(), "none.conf"))
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, stderr, "none.conf: open ")
}

// TestReadmeConfigCheck: the README's `config check` example prints what
// the README says, and its configuration file example passes.
func TestReadmeConfigCheck(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(b)
	dir := t.TempDir()

	_, rest, ok := strings.Cut(readme, "```properties\n")
	require.True(t, ok, "the README has a properties block")
	props, _, _ := strings.Cut(rest, "```")
	good := filepath.Join(dir, "tms.conf")
	require.NoError(t, os.WriteFile(good, []byte(props), 0o600))
	code, out, stderr := run(t, "config", "check", good)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Regexp(t, `^.*tms\.conf: ok \(\d+ keys\)\n$`, out)

	_, rest, ok = strings.Cut(readme, "cat > bad.conf <<'EOF'\n")
	require.True(t, ok, "the README shows a bad file")
	text, rest, ok := strings.Cut(rest, "EOF\n")
	require.True(t, ok)
	require.True(t, strings.HasPrefix(rest, "bin/tms-coordinator config check bad.conf; echo \"exit $?\"\n```"), rest)
	_, rest, ok = strings.Cut(rest, "```console\n")
	require.True(t, ok, "the README shows the output")
	shown, _, _ := strings.Cut(rest, "```")
	bad := filepath.Join(dir, "bad.conf")
	require.NoError(t, os.WriteFile(bad, []byte(text), 0o600))
	code, _, stderr = run(t, "config", "check", bad)
	require.Equal(t, cli.ExitUsage, code)
	require.Equal(t, shown, strings.ReplaceAll(stderr, bad, "bad.conf")+"exit 2\n")
}
