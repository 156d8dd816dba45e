package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
)

// defaultDB is the embedded single-node default.
const defaultDB = "sqlite://./tms.db"

func dbFromEnv() string {
	if v := os.Getenv("TMS_DB"); v != "" {
		return v
	}
	return defaultDB
}

func runMigrate(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "migrate", env.Stderr)
	var (
		db    string
		check bool
	)
	fs.StringVar(&db, "db", dbFromEnv(), "database URL: postgres://… or sqlite://PATH (env TMS_DB)")
	fs.BoolVar(&check, "check", false, "apply nothing; exit 3 when the database is behind this binary")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
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
	if errors.Is(err, store.ErrInvalidArgument) {
		return cli.UsageError{Err: err}
	}
	return err
}
