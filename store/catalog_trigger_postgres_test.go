package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// icebergTablesDDL is iceberg-go's SQL catalog table (schema V1) as its
// PostgreSQL dialect creates it.
const icebergTablesDDL = `CREATE TABLE iceberg_tables (
	catalog_name VARCHAR NOT NULL, table_namespace VARCHAR NOT NULL, table_name VARCHAR NOT NULL,
	iceberg_type VARCHAR, metadata_location VARCHAR, previous_metadata_location VARCHAR,
	PRIMARY KEY (catalog_name, table_namespace, table_name))`

// catalogListener listens on dbURL until the test ends and returns the
// notifications as they come.
func catalogListener(t *testing.T, dbURL string) (<-chan store.CatalogCommit, store.CatalogListen) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan store.CatalogCommit, 16)
	ready := make(chan store.CatalogListen, 1)
	done := make(chan error, 1)
	go func() {
		done <- store.ListenCatalogCommits(ctx, dbURL, "", func(l store.CatalogListen) { ready <- l },
			func(c store.CatalogCommit) { got <- c })
	}()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	select {
	case l := <-ready:
		return got, l
	case err := <-done:
		t.Fatalf("listener stopped before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("listener not ready after 10s")
	}
	return nil, store.CatalogListen{}
}

func nextCommit(t *testing.T, got <-chan store.CatalogCommit) store.CatalogCommit {
	t.Helper()
	select {
	case c := <-got:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no catalog commit notified within 10s")
	}
	return store.CatalogCommit{}
}

func TestCatalogTriggerPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgSchemaURL(t)

	// No iceberg_tables yet: nothing is created, and the error says why.
	_, err := store.InstallCatalogTrigger(ctx, dbURL, "")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "no table iceberg_tables in schema")

	pgExec(t, dbURL, icebergTablesDDL)
	_, l := catalogListener(t, dbURL)
	require.False(t, l.TriggerInstalled, "the listener reports a schema without the trigger")

	schema, err := store.InstallCatalogTrigger(ctx, dbURL, "")
	require.NoError(t, err)
	require.Equal(t, l.Schema, schema)
	_, err = store.InstallCatalogTrigger(ctx, dbURL, schema) // idempotent
	require.NoError(t, err)

	got, l := catalogListener(t, dbURL)
	require.True(t, l.TriggerInstalled)
	require.Equal(t, schema, l.Schema)

	// A table created with its first metadata file is a commit.
	pgExec(t, dbURL, `INSERT INTO iceberg_tables VALUES ('prod', 'db.sales', 'orders', 'TABLE', 's3://w/v1.json', NULL)`)
	require.Equal(t, store.CatalogCommit{Schema: schema, Catalog: "prod", Namespace: "db.sales", Table: "orders"}, nextCommit(t, got))
	// A namespace row without metadata is not.
	pgExec(t, dbURL, `INSERT INTO iceberg_tables VALUES ('prod', 'db', 'pending', 'TABLE', NULL, NULL)`)
	// An update that leaves metadata_location as it was is not a commit;
	// the next one is, and it is the next notification.
	pgExec(t, dbURL, `UPDATE iceberg_tables SET previous_metadata_location = 'x', metadata_location = metadata_location`)
	pgExec(t, dbURL, `UPDATE iceberg_tables SET metadata_location = 's3://w/v2.json', previous_metadata_location = metadata_location
		WHERE table_name = 'orders'`)
	require.Equal(t, "orders", nextCommit(t, got).Table)

	// Another schema's commits on the same channel are not passed on.
	other := pgSchemaURL(t)
	pgExec(t, other, icebergTablesDDL)
	_, err = store.InstallCatalogTrigger(ctx, other, "")
	require.NoError(t, err)
	pgExec(t, other, `INSERT INTO iceberg_tables VALUES ('prod', 'db', 'elsewhere', 'TABLE', 's3://o/v1.json', NULL)`)
	pgExec(t, dbURL, `UPDATE iceberg_tables SET metadata_location = 's3://w/v3.json' WHERE table_name = 'orders'`)
	require.Equal(t, store.CatalogCommit{Schema: schema, Catalog: "prod", Namespace: "db.sales", Table: "orders"}, nextCommit(t, got))

	// Removed: commits are silent again; removing twice is fine.
	_, err = store.RemoveCatalogTrigger(ctx, dbURL, "")
	require.NoError(t, err)
	_, err = store.RemoveCatalogTrigger(ctx, dbURL, "")
	require.NoError(t, err)
	pgExec(t, dbURL, `UPDATE iceberg_tables SET metadata_location = 's3://w/v4.json' WHERE table_name = 'orders'`)
	// A sentinel sent by hand after that update must be the next thing
	// heard; someone else's payload on the channel is dropped.
	pgExec(t, dbURL, `SELECT pg_notify('`+store.CatalogCommitChannel+`', 'not json')`)
	pgExec(t, dbURL, `SELECT pg_notify('`+store.CatalogCommitChannel+`', json_build_object('schema', current_schema(), 'catalog', 'sentinel', 'namespace', 'n', 'table', 't')::text)`)
	require.Equal(t, "sentinel", nextCommit(t, got).Catalog)
	_, l = catalogListener(t, dbURL)
	require.False(t, l.TriggerInstalled)
}

func TestCatalogTriggerExplicitSchemaAndBadURL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgSchemaURL(t)
	pgExec(t, dbURL, icebergTablesDDL)
	schema, err := store.InstallCatalogTrigger(ctx, dbURL, "")
	require.NoError(t, err)
	// The schema named explicitly, from a connection whose search_path is
	// elsewhere.
	got, err := store.RemoveCatalogTrigger(ctx, pgURL, schema)
	require.NoError(t, err)
	require.Equal(t, schema, got)
	_, err = store.InstallCatalogTrigger(ctx, pgURL, "no_such_schema_here")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, `"no_such_schema_here"`)

	_, err = store.InstallCatalogTrigger(ctx, "mysql://x", "")
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}

func TestCatalogTriggerSQLiteNotSupported(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := sqliteURL(t)
	_, err := store.InstallCatalogTrigger(ctx, dbURL, "")
	require.ErrorIs(t, err, store.ErrNotSupported)
	require.ErrorContains(t, err, "catalog watcher")
	_, err = store.RemoveCatalogTrigger(ctx, dbURL, "")
	require.ErrorIs(t, err, store.ErrNotSupported)
	err = store.ListenCatalogCommits(ctx, dbURL, "", nil, func(store.CatalogCommit) {})
	require.ErrorIs(t, err, store.ErrNotSupported)
}
