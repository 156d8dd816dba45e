package main

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// triggerInstalled asks the catalog listener whether the trigger is on
// dbURL's iceberg_tables.
func triggerInstalled(t *testing.T, dbURL string) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got store.CatalogListen
	err := store.ListenCatalogCommits(ctx, dbURL, "", func(l store.CatalogListen) {
		got = l
		cancel()
	}, func(store.CatalogCommit) {})
	require.True(t, errors.Is(err, context.Canceled), "listen: %v", err)
	return got.TriggerInstalled
}

func TestMigrateCatalogTrigger(t *testing.T) {
	t.Parallel()
	db := testdb.PostgresURL(t)

	// No catalog yet: a clear failure, nothing created.
	code, out, stderr := run(t, "migrate", "--db", db, "--catalog-trigger")
	require.Equal(t, cli.ExitFailure, code)
	require.Empty(t, out)
	require.Contains(t, stderr, "no table iceberg_tables in schema")

	testdb.PostgresExec(t, db, `CREATE TABLE iceberg_tables (catalog_name VARCHAR NOT NULL, table_namespace VARCHAR NOT NULL,
		table_name VARCHAR NOT NULL, iceberg_type VARCHAR, metadata_location VARCHAR, previous_metadata_location VARCHAR,
		PRIMARY KEY (catalog_name, table_namespace, table_name))`)
	for range 2 { // idempotent
		code, out, stderr = run(t, "migrate", "--db", db, "--catalog-trigger")
		require.Equal(t, cli.ExitOK, code, stderr)
		require.Contains(t, out, "catalog trigger installed on tms_test_")
		require.Contains(t, out, store.CatalogCommitChannel)
	}
	require.True(t, triggerInstalled(t, db))
	code, _, stderr = run(t, "migrate", "--db", db, "--check")
	require.Equal(t, cli.ExitBehind, code, "--catalog-trigger does not migrate TMS's own tables: %s", stderr)

	// The catalog database and schema named apart from --db.
	u, err := url.Parse(db)
	require.NoError(t, err)
	schema := u.Query().Get("search_path")
	code, out, stderr = run(t, "migrate", "--db", "sqlite://"+t.TempDir()+"/tms.db", "--catalog-db", testdb.PostgresServer(),
		"--catalog-schema", schema, "--remove-catalog-trigger")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, out, "catalog trigger removed from "+schema+".iceberg_tables")
	require.False(t, triggerInstalled(t, db))
}

func TestMigrateCatalogTriggerBadInput(t *testing.T) {
	t.Parallel()
	sqlite := testdb.SQLiteURL(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"sqlite", []string{"migrate", "--db", sqlite, "--catalog-trigger"}, "use the catalog watcher"},
		{"with check", []string{"migrate", "--db", sqlite, "--catalog-trigger", "--check"}, "--check cannot be combined"},
		{"both", []string{"migrate", "--db", sqlite, "--catalog-trigger", "--remove-catalog-trigger"}, "not both"},
		{"bad catalog db", []string{"migrate", "--catalog-db", "mysql://x/y", "--catalog-trigger"}, `"mysql://x/y"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.args...)
			require.Equal(t, cli.ExitUsage, code, stderr)
			require.Empty(t, out)
			require.Contains(t, stderr, tc.want)
		})
	}
}
