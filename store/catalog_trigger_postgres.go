package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// This file is the catalog trigger: SQL that makes a JDBC-layout Iceberg
// catalog in PostgreSQL (iceberg-go's SQL catalog, Iceberg's JdbcCatalog:
// a table iceberg_tables(catalog_name, table_namespace, table_name,
// metadata_location, previous_metadata_location, …)) announce every commit
// on a NOTIFY channel, and the LISTEN loop that reads them. The catalog's
// database need not be TMS's own: every function takes the catalog
// database's URL. SQLite has no cross-process notification, so on a
// sqlite:// URL every function returns ErrNotSupported.

// CatalogCommitChannel is the NOTIFY channel the catalog trigger signals.
// Channels are per database; the payload names the schema of the
// iceberg_tables that changed, so listeners of one schema ignore the
// others'.
const CatalogCommitChannel = "tms_catalog_commit"

// Names of the objects InstallCatalogTrigger creates in the catalog's
// schema.
const (
	catalogTriggerFunction = "tms_notify_catalog_commit"
	catalogTriggerInsert   = "tms_catalog_commit_insert"
	catalogTriggerUpdate   = "tms_catalog_commit_update"
)

// CatalogCommit is one notification of the catalog trigger: a row of
// iceberg_tables got a new metadata_location (a commit, or a table
// created or registered).
type CatalogCommit struct {
	// Schema is the schema of the iceberg_tables that changed.
	Schema string `json:"schema"`
	// Catalog is the row's catalog_name: the catalog's name as its clients
	// (Spark, iceberg-go) open it.
	Catalog string `json:"catalog"`
	// Namespace is the row's table_namespace as the catalog stores it:
	// levels joined with ".", or iceberg-go's encoded form for levels that
	// contain dots.
	Namespace string `json:"namespace"`
	// Table is the row's table_name.
	Table string `json:"table"`
}

// errCatalogTriggerSQLite is the answer of every catalog trigger function
// on a sqlite:// URL.
var errCatalogTriggerSQLite = fmt.Errorf("%w: the catalog trigger needs the catalog's PostgreSQL database "+
	"(a postgres:// URL): SQLite cannot notify another process; use the catalog watcher instead", ErrNotSupported)

// catalogConn connects once to the PostgreSQL database dbURL names (the
// URL's pool parameters are accepted and ignored) and resolves schema: the
// given one, or the connection's current schema (the first existing
// schema of its search_path).
func catalogConn(ctx context.Context, dbURL, schema string) (*pgx.Conn, string, error) {
	scheme, _, _ := strings.Cut(dbURL, "://")
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
	case "sqlite":
		return nil, "", errCatalogTriggerSQLite
	default:
		return nil, "", fmt.Errorf("%w: catalog database URL %q: want postgres://…", ErrInvalidArgument, redact(dbURL))
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, "", fmt.Errorf("%w: parse catalog database URL: %w", ErrInvalidArgument, err)
	}
	cc := cfg.ConnConfig.Copy()
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = pgConnectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, "", pgError("connect to the catalog database", err)
	}
	if schema == "" {
		var cur *string
		if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&cur); err != nil {
			_ = conn.Close(context.Background())
			return nil, "", pgError("read the catalog database's current schema", err)
		}
		if cur == nil {
			_ = conn.Close(context.Background())
			return nil, "", fmt.Errorf("%w: the catalog database URL's search_path names no existing schema; give the catalog schema explicitly", ErrInvalidArgument)
		}
		schema = *cur
	}
	return conn, schema, nil
}

// catalogTableExists reports whether schema.iceberg_tables exists.
func catalogTableExists(ctx context.Context, conn *pgx.Conn, schema string) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT to_regclass(format('%I.iceberg_tables', $1::text)) IS NOT NULL`, schema).Scan(&ok)
	if err != nil {
		return false, pgError("look for iceberg_tables", err)
	}
	return ok, nil
}

// InstallCatalogTrigger installs, in schema (empty: the URL's current
// schema) of the PostgreSQL database dbURL, a trigger function and two
// AFTER triggers on iceberg_tables that NOTIFY CatalogCommitChannel with a
// CatalogCommit JSON payload whenever a row's metadata_location changes (an
// UPDATE that sets a different one, or an INSERT with one). It is
// idempotent (CREATE OR REPLACE, DROP … IF EXISTS + CREATE in one
// transaction) and returns the schema it installed into.
//
// It creates nothing and fails, naming the schema, when iceberg_tables does
// not exist: the catalog creates it on first use, so the trigger is
// installed after the catalog. A failed notification (a payload over
// PostgreSQL's 8000 bytes) raises a WARNING and never fails the catalog's
// commit.
func InstallCatalogTrigger(ctx context.Context, dbURL, schema string) (string, error) {
	conn, schema, err := catalogConn(ctx, dbURL, schema)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	ok, err := catalogTableExists(ctx, conn, schema)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%w: there is no table iceberg_tables in schema %q of the catalog database: "+
			"create the catalog first (its SQL/JDBC client creates the table on first use) or name the catalog's schema", ErrNotFound, schema)
	}
	s := pgx.Identifier{schema}.Sanitize()
	fn := s + "." + catalogTriggerFunction + "()"
	stmts := []string{
		`CREATE OR REPLACE FUNCTION ` + fn + ` RETURNS trigger LANGUAGE plpgsql AS $tms$
BEGIN
	BEGIN
		PERFORM pg_notify('` + CatalogCommitChannel + `', json_build_object(
			'schema', TG_TABLE_SCHEMA, 'catalog', NEW.catalog_name,
			'namespace', NEW.table_namespace, 'table', NEW.table_name)::text);
	EXCEPTION WHEN OTHERS THEN
		RAISE WARNING 'tms: catalog commit notification for %.% not sent: %', NEW.table_namespace, NEW.table_name, SQLERRM;
	END;
	RETURN NULL;
END
$tms$`,
		`COMMENT ON FUNCTION ` + fn + ` IS 'TMS: NOTIFY ` + CatalogCommitChannel + ` when a table''s metadata_location changes (tms-coordinator migrate --catalog-trigger)'`,
		`DROP TRIGGER IF EXISTS ` + catalogTriggerInsert + ` ON ` + s + `.iceberg_tables`,
		`CREATE TRIGGER ` + catalogTriggerInsert + ` AFTER INSERT ON ` + s + `.iceberg_tables FOR EACH ROW
			WHEN (NEW.metadata_location IS NOT NULL) EXECUTE FUNCTION ` + fn,
		`DROP TRIGGER IF EXISTS ` + catalogTriggerUpdate + ` ON ` + s + `.iceberg_tables`,
		`CREATE TRIGGER ` + catalogTriggerUpdate + ` AFTER UPDATE OF metadata_location ON ` + s + `.iceberg_tables FOR EACH ROW
			WHEN (NEW.metadata_location IS DISTINCT FROM OLD.metadata_location) EXECUTE FUNCTION ` + fn,
	}
	if err := execAll(ctx, conn, stmts); err != nil {
		return "", pgError("install the catalog trigger", err)
	}
	return schema, nil
}

// RemoveCatalogTrigger drops what InstallCatalogTrigger created in schema
// (empty: the URL's current schema) and returns that schema. Removing a
// trigger that is not there is not an error.
func RemoveCatalogTrigger(ctx context.Context, dbURL, schema string) (string, error) {
	conn, schema, err := catalogConn(ctx, dbURL, schema)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	ok, err := catalogTableExists(ctx, conn, schema)
	if err != nil {
		return "", err
	}
	s := pgx.Identifier{schema}.Sanitize()
	var stmts []string
	if ok {
		stmts = append(stmts, `DROP TRIGGER IF EXISTS `+catalogTriggerInsert+` ON `+s+`.iceberg_tables`,
			`DROP TRIGGER IF EXISTS `+catalogTriggerUpdate+` ON `+s+`.iceberg_tables`)
	}
	stmts = append(stmts, `DROP FUNCTION IF EXISTS `+s+`.`+catalogTriggerFunction+`()`)
	if err := execAll(ctx, conn, stmts); err != nil {
		return "", pgError("remove the catalog trigger", err)
	}
	return schema, nil
}

// catalogTriggerInstalled reports whether both triggers are on
// schema.iceberg_tables.
func catalogTriggerInstalled(ctx context.Context, conn *pgx.Conn, schema string) (bool, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_trigger
		WHERE tgrelid = to_regclass(format('%I.iceberg_tables', $1::text)) AND tgname IN ($2, $3) AND NOT tgisinternal`,
		schema, catalogTriggerInsert, catalogTriggerUpdate).Scan(&n)
	if err != nil {
		return false, pgError("look for the catalog trigger", err)
	}
	return n == 2, nil
}

// CatalogListen is what ListenCatalogCommits found when it started
// listening.
type CatalogListen struct {
	// Schema is the catalog schema whose commits are passed on.
	Schema string
	// TriggerInstalled says whether the catalog trigger is on that schema's
	// iceberg_tables; without it nothing will ever be notified.
	TriggerInstalled bool
}

// ListenCatalogCommits listens on CatalogCommitChannel in the PostgreSQL
// database dbURL through a connection of its own and calls fn, in order,
// with every notification about schema (empty: the URL's current schema).
// ready is called once the LISTEN is in place. It returns when ctx ends
// (with ctx's error) or the connection fails; the caller reconnects.
// Payloads that are not a CatalogCommit (someone else's NOTIFY on the
// channel) are dropped.
func ListenCatalogCommits(ctx context.Context, dbURL, schema string, ready func(CatalogListen), fn func(CatalogCommit)) error {
	conn, schema, err := catalogConn(ctx, dbURL, schema)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	installed, err := catalogTriggerInstalled(ctx, conn, schema)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+CatalogCommitChannel); err != nil {
		return pgError("listen for catalog commits", err)
	}
	if ready != nil {
		ready(CatalogListen{Schema: schema, TriggerInstalled: installed})
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return pgError("listen for catalog commits", err)
		}
		var c CatalogCommit
		if err := json.Unmarshal([]byte(n.Payload), &c); err != nil || c.Schema != schema || c.Table == "" {
			continue
		}
		fn(c)
	}
}

// execAll runs stmts in one transaction on conn.
func execAll(ctx context.Context, conn *pgx.Conn, stmts []string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
}
