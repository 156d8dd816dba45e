package store_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/store"
)

// pgURL is the PostgreSQL server the tests use. Each test gets its own
// schema in it (see pgSchemaURL), so tests run in parallel and leave nothing
// behind.
var pgURL = cmp.Or(os.Getenv("TMS_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")

// TestMain fails the whole package at once when PostgreSQL does not answer:
// the PostgreSQL backend is half of what this package promises, so its tests
// never skip. It also checks that no test leaks goroutines.
func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := pgx.Connect(ctx, pgURL)
	if err == nil {
		err = conn.Ping(ctx)
		_ = conn.Close(ctx)
	}
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, `FAIL: the store tests need PostgreSQL and it did not answer.
  tried:    %s (set TMS_TEST_DATABASE_URL to use another)
  error:    %v
  start it: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start
  or install it first: apt-get install postgresql
`, redacted(pgURL), err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Redacted()
}

// pgSchemaURL creates an empty schema tms_test_<random> and returns pgURL
// with search_path pointing at it. The schema is dropped when t ends.
func pgSchemaURL(t testing.TB) string {
	t.Helper()
	schema := "tms_test_" + strings.ToLower(rand.Text())
	pgExec(t, pgURL, `CREATE SCHEMA `+schema)
	t.Cleanup(func() { pgExec(t, pgURL, `DROP SCHEMA `+schema+` CASCADE`) })
	u, err := url.Parse(pgURL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// pgExec runs sql on a short-lived connection outside the store.
func pgExec(t testing.TB, dbURL, sql string) {
	t.Helper()
	ctx := context.Background() // also used from Cleanup, after t.Context is done
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

// sqliteURL returns a sqlite:// URL of a file in a fresh temp directory.
func sqliteURL(t testing.TB) string {
	t.Helper()
	return "sqlite://" + filepath.Join(t.TempDir(), "tms.db")
}

// openMigrated migrates the database at dbURL and opens it; the store is
// closed when t ends.
func openMigrated(t testing.TB, dbURL string) store.Store {
	t.Helper()
	ctx := context.Background()
	log := zaptest.NewLogger(t)
	_, err := store.Migrate(ctx, dbURL, log)
	require.NoError(t, err)
	s, err := store.Open(ctx, dbURL, log)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}
