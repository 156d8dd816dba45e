package testdb

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/store"
)

// URL returns a fresh database of backend (store.BackendPostgres or
// store.BackendSQLite): PostgresURL's schema or SQLiteURL's file.
func URL(t testing.TB, backend string) string {
	t.Helper()
	if backend == store.BackendPostgres {
		return PostgresURL(t)
	}
	return SQLiteURL(t)
}

// OpenMigrated migrates a fresh database of backend and opens a store on
// it that logs to log; the store is closed when t ends. It returns the
// database's URL too.
func OpenMigrated(t testing.TB, backend string, log *zap.Logger) (string, store.Store) {
	t.Helper()
	dbURL := URL(t, backend)
	_, err := store.Migrate(context.Background(), dbURL, log)
	require.NoError(t, err)
	st, err := store.Open(context.Background(), dbURL, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return dbURL, st
}
