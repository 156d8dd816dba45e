// Package testdb gives tests outside package store real databases to run
// against: a fresh PostgreSQL schema per test on the server named by
// TMS_TEST_DATABASE_URL, or a SQLite file in a temp folder. It is test
// support only and, being under store/, the one place besides the store's own
// tests that talks SQL to set a database up; production code never imports it.
package testdb

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // the pure-Go driver the store uses too

	"github.com/tms-dev/tms/internal/testkit"
)

// PostgresServer is the server tests use: TMS_TEST_DATABASE_URL, or the local
// default.
func PostgresServer() string {
	return cmp.Or(os.Getenv("TMS_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
}

// RequirePostgres returns an error that says how to start or install
// PostgreSQL when the test server does not answer. A TestMain calls it and
// fails the package at once: tests that need PostgreSQL never skip, except
// under -short (make check), where they skip and this returns nil.
func RequirePostgres() error {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		return nil // make check: the tests that need it skip (testkit.NeedsService)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, PostgresServer())
	if err == nil {
		err = conn.Ping(ctx)
		_ = conn.Close(ctx)
	}
	if err != nil {
		return fmt.Errorf(`these tests need PostgreSQL and it did not answer.
  tried:    %s (set TMS_TEST_DATABASE_URL to use another)
  error:    %v
  start it: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start
  or install it first: apt-get install postgresql`, Redacted(PostgresServer()), err)
	}
	return nil
}

// Redacted hides the password of a database URL.
func Redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Redacted()
}

// PostgresURL creates an empty schema tms_test_<random> and returns the
// server URL with search_path pointing at it. The schema is dropped when t
// ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	testkit.NeedsService(t, "PostgreSQL")
	schema := "tms_test_" + strings.ToLower(rand.Text())
	PostgresExec(t, PostgresServer(), `CREATE SCHEMA `+schema)
	t.Cleanup(func() { PostgresExec(t, PostgresServer(), `DROP SCHEMA `+schema+` CASCADE`) })
	u, err := url.Parse(PostgresServer())
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// PostgresExec runs sql on a short-lived connection outside the store.
func PostgresExec(t testing.TB, dbURL, sql string) {
	t.Helper()
	ctx := context.Background() // also used from Cleanup, after t.Context is done
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

// SQLiteURL returns a sqlite:// URL of a file in a fresh temp directory.
func SQLiteURL(t testing.TB) string {
	t.Helper()
	return "sqlite://" + filepath.Join(t.TempDir(), "tms.db")
}

// SQLiteExec runs sql on the file behind a sqlite:// URL, outside the store.
func SQLiteExec(t testing.TB, dbURL, q string) {
	t.Helper()
	db, err := sql.Open("sqlite", strings.TrimPrefix(dbURL, "sqlite://")+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(q)
	require.NoError(t, err)
}

// MarkFutureVersion records schema version v in a migrated database, as a
// newer binary would have, so tests can check that an older binary refuses it.
func MarkFutureVersion(t testing.TB, dbURL string, v int) {
	t.Helper()
	q := fmt.Sprintf(`INSERT INTO tms_schema_migration (version, name) VALUES (%d, 'future')`, v)
	if strings.HasPrefix(dbURL, "sqlite://") {
		q = fmt.Sprintf(`INSERT INTO tms_schema_migration (version, name, applied_at) VALUES (%d, 'future', '2099-01-01T00:00:00.000000Z')`, v)
		SQLiteExec(t, dbURL, q)
		return
	}
	PostgresExec(t, dbURL, q)
}
