package store_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// pgURL is the PostgreSQL server the tests use. Each test gets its own
// schema in it (see pgSchemaURL), so tests run in parallel and leave nothing
// behind.
var pgURL = testdb.PostgresServer()

// TestMain fails the whole package at once when PostgreSQL does not answer:
// the PostgreSQL backend is half of what this package promises, so its tests
// never skip. It also checks that no test leaks goroutines.
func TestMain(m *testing.M) {
	if err := testdb.RequirePostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

var (
	redacted    = testdb.Redacted
	pgSchemaURL = testdb.PostgresURL
	pgExec      = testdb.PostgresExec
	sqliteURL   = testdb.SQLiteURL
)

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
