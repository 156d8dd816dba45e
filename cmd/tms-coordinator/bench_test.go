package main

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store/testdb"
)

func TestBench(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(testing.TB) string{
		"postgres": func(testing.TB) string { return testdb.PostgresServer() }, // bench makes its own schema
		"sqlite":   testdb.SQLiteURL,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"bench", "--db", db(t), "--tasks", "200", "--nodes", "2", "--threads", "2"}
			if name == "postgres" {
				schema := "tms_bench_test_" + strings.ToLower(rand.Text())
				t.Cleanup(func() { testdb.PostgresExec(t, testdb.PostgresServer(), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`) })
				args = append(args, "--schema", schema)
			}
			code, out, stderr := run(t, args...)
			require.Equal(t, cli.ExitOK, code, stderr)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Regexp(t, `^tms_tasks_per_sec=[0-9]+$`, lines[len(lines)-1])
			require.Contains(t, out, "200 no-op tasks, 2 nodes x 2 threads")
		})
	}
	code, _, _ := run(t, "bench", "--tasks", "0")
	require.Equal(t, cli.ExitUsage, code)
}
