package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/migrations"
	"github.com/tms-dev/tms/store/testdb"
)

func TestMain(m *testing.M) {
	if err := testdb.RequirePostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run("tms-coordinator", commands(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	for name, newURL := range map[string]func(testing.TB) string{
		"postgres": testdb.PostgresURL,
		"sqlite":   testdb.SQLiteURL,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := newURL(t)
			latest := fmt.Sprint(migrations.Latest())

			code, _, stderr := run(t, "migrate", "--db", db, "--check")
			require.Equal(t, cli.ExitBehind, code, stderr)
			require.Contains(t, stderr, "schema version 0")

			code, out, stderr := run(t, "migrate", "--db", db)
			require.Equal(t, cli.ExitOK, code, stderr)
			require.Contains(t, out, "applied migrations")
			require.Contains(t, out, "schema version "+latest)

			code, out, stderr = run(t, "migrate", "--db", db)
			require.Equal(t, cli.ExitOK, code, stderr)
			require.Contains(t, out, "database is current")

			code, out, stderr = run(t, "migrate", "--db", db, "--check")
			require.Equal(t, cli.ExitOK, code, stderr)
			require.Contains(t, out, "database is current")

			code, out, stderr = run(t, "ping", "--db", db)
			require.Equal(t, cli.ExitOK, code, stderr)
			require.Equal(t, "ok\n", out)

			// A database migrated by a newer binary is refused, not touched.
			testdb.MarkFutureVersion(t, db, 999)
			code, out, stderr = run(t, "migrate", "--db", db)
			require.Equal(t, cli.ExitFailure, code)
			require.Empty(t, out)
			require.Contains(t, stderr, "999")
			require.Contains(t, stderr, "newer")
		})
	}
}

func TestMigrateBadInput(t *testing.T) {
	t.Parallel()
	missingDir := filepath.Join(t.TempDir(), "nope", "tms.db")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown scheme", []string{"migrate", "--db", "mysql://localhost/x"}, cli.ExitUsage, `"mysql"`},
		{"no scheme", []string{"migrate", "--db", "tms.db"}, cli.ExitUsage, "no scheme"},
		{"unreachable", []string{"migrate", "--db", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"}, cli.ExitFailure, "127.0.0.1:1"},
		{"ping unreachable", []string{"ping", "--db", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"}, cli.ExitFailure, "127.0.0.1:1"},
		{"sqlite dir missing", []string{"migrate", "--db", "sqlite://" + missingDir}, cli.ExitFailure, "nope"},
		{"stray argument", []string{"migrate", "extra"}, cli.ExitUsage, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			require.Empty(t, out)
			require.Contains(t, stderr, tc.want)
		})
	}
	_, err := os.Stat(filepath.Dir(missingDir))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was created for a bad path")
}
