package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/coordinator/config"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
)

// dbFromEnv is --db's default (config.DBFromEnv): TMS_DB, else the
// embedded single-node ledger.
func dbFromEnv() string { return config.DBFromEnv() }

func runMigrate(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "migrate", env.Stderr)
	var (
		db    string
		check bool
		trig  catalogTriggerFlags
	)
	fs.StringVar(&db, "db", dbFromEnv(), "database URL: postgres://… or sqlite://PATH (env TMS_DB)")
	fs.BoolVar(&check, "check", false, "apply nothing; exit 3 when the database is behind this binary")
	trig.register(fs)
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	if trig.install || trig.remove {
		if check {
			return cli.Usagef("--check cannot be combined with --catalog-trigger or --remove-catalog-trigger")
		}
		return trig.run(ctx, env, db)
	}
	if check {
		current, latest, err := store.MigrationStatus(ctx, db)
		if err != nil {
			return classify(err)
		}
		if current < latest {
			return cli.ExitError{Code: cli.ExitBehind, Err: fmt.Errorf("database at schema version %d, this binary expects %d: run `tms-coordinator migrate --db URL`", current, latest)}
		}
		_, err = fmt.Fprintf(env.Stdout, "database is current (schema version %d)\n", current)
		return err
	}
	applied, err := store.Migrate(ctx, db, env.Log)
	if err != nil {
		return classify(err)
	}
	current, _, err := store.MigrationStatus(ctx, db)
	if err != nil {
		return classify(err)
	}
	if len(applied) == 0 {
		_, err = fmt.Fprintf(env.Stdout, "database is current (schema version %d)\n", current)
		return err
	}
	_, err = fmt.Fprintf(env.Stdout, "applied migrations %v; schema version %d\n", applied, current)
	return err
}

func runPing(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "ping", env.Stderr)
	var db string
	fs.StringVar(&db, "db", dbFromEnv(), "database URL: postgres://… or sqlite://PATH (env TMS_DB)")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	if err := store.Ping(ctx, db); err != nil {
		return classify(err)
	}
	_, err := fmt.Fprintln(env.Stdout, "ok")
	return err
}

// classify turns store errors caused by the caller's input into usage errors.
func classify(err error) error {
	if errors.Is(err, invalid.ErrArgument) {
		return cli.UsageError{Err: err}
	}
	return err
}

// catalogTriggerFlags are migrate's flags for the NOTIFY trigger on a
// JDBC-layout catalog's iceberg_tables (see docs/catalog-watch.md).
type catalogTriggerFlags struct {
	install, remove bool
	db, schema      string
}

func (f *catalogTriggerFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.install, "catalog-trigger", false, "instead of migrating TMS's database, install (idempotently) the trigger that makes a JDBC-layout catalog's iceberg_tables NOTIFY "+store.CatalogCommitChannel+" on every commit (PostgreSQL only)")
	fs.BoolVar(&f.remove, "remove-catalog-trigger", false, "remove that trigger")
	fs.StringVar(&f.db, "catalog-db", "", "PostgreSQL URL of the catalog's database (default: --db)")
	fs.StringVar(&f.schema, "catalog-schema", "", "schema of iceberg_tables (default: the current schema of --catalog-db, i.e. the first of its search_path)")
}

// run installs or removes the trigger.
func (f *catalogTriggerFlags) run(ctx context.Context, env cli.Env, db string) error {
	if f.install && f.remove {
		return cli.Usagef("give either --catalog-trigger or --remove-catalog-trigger, not both")
	}
	if f.db == "" {
		f.db = db
	}
	if f.remove {
		schema, err := store.RemoveCatalogTrigger(ctx, f.db, f.schema)
		if err != nil {
			return classifyTrigger(err)
		}
		_, err = fmt.Fprintf(env.Stdout, "catalog trigger removed from %s.iceberg_tables\n", schema)
		return err
	}
	schema, err := store.InstallCatalogTrigger(ctx, f.db, f.schema)
	if err != nil {
		return classifyTrigger(err)
	}
	_, err = fmt.Fprintf(env.Stdout, "catalog trigger installed on %s.iceberg_tables: commits NOTIFY channel %s\n", schema, store.CatalogCommitChannel)
	return err
}

// classifyTrigger makes a database that cannot carry the trigger a usage
// error, like other bad input.
func classifyTrigger(err error) error {
	if errors.Is(err, store.ErrNotSupported) {
		return cli.UsageError{Err: err}
	}
	return classify(err)
}
