package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/apache/iceberg-go"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/runner"
	"github.com/tms-dev/tms/store"
)

// runRun is `tms-runner run`: job mode. The coordinator (or a job template)
// starts it with the row id and fence of a job it created; everything else
// comes from the row's spec, except credentials, which come from
// TMS_CATALOG_PROP_* variables and --catalog-props-file.
func runRun(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-runner", "run", env.Stderr)
	var (
		db        string
		jobID     int64
		fence     int64
		propsFile string
		refs      string
		asJSON    bool
	)
	fs.StringVar(&db, "db", os.Getenv("TMS_DB"), "ledger URL: postgres://… or sqlite://PATH (env TMS_DB; required)")
	fs.Int64Var(&jobID, "job-id", 0, "job row id (table_maintenance_job.id; required)")
	fs.Int64Var(&fence, "fence", 0, "the job row's fence when the job was submitted (required)")
	fs.StringVar(&propsFile, "catalog-props-file", "", "file of key=value catalog properties (credentials) overlaid onto the spec's; wins over TMS_CATALOG_PROP_<KEY>")
	fs.StringVar(&refs, "catalog-secret-refs", os.Getenv(runner.EnvSecretRefs), `catalog property → env:NAME or file:PATH in URL query form (s3.secret-access-key=file%3A%2Frun%2Fs3&…), resolved here and overlaid onto the spec's (env `+runner.EnvSecretRefs+`; what the gravitino submitter's {{catalog_secret_refs}} holds); wins over TMS_CATALOG_PROP_<KEY>, loses to --catalog-props-file`)
	fs.BoolVar(&asJSON, "json", false, "print the chain report as JSON instead of a table")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	switch {
	case db == "":
		return cli.Usagef("--db is required (or TMS_DB)")
	case jobID <= 0:
		return cli.Usagef("--job-id must be a positive job row id, got %d", jobID)
	case fence <= 0:
		return cli.Usagef("--fence must be positive, got %d", fence)
	}
	overlay, err := catalogOverlay(propsFile, refs)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, db, env.Log)
	if err != nil {
		if errors.Is(err, invalid.ErrArgument) {
			return cli.UsageError{Err: err}
		}
		return err
	}
	defer st.Close()
	failpoint, err := fileDeletedFailpoint(env.Stderr)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	rep, err := runner.RunJob(ctx, st, jobID, fence, runner.Options{CatalogProps: overlay, Log: env.Log, FileDeleted: failpoint})
	if len(rep.Types) > 0 {
		if perr := printReport(env.Stdout, rep, asJSON); perr != nil && err == nil {
			err = perr
		}
	}
	return runError(err, jobID)
}

// catalogOverlay collects the catalog properties that come from outside the
// spec: TMS_CATALOG_PROP_<KEY> variables, then the secret references
// resolved, then the props file (which wins).
func catalogOverlay(propsFile, refs string) (iceberg.Properties, error) {
	overlay := runner.CatalogPropsFromEnv(os.Environ())
	if refs != "" {
		resolved, err := runner.ResolveSecretRefs(refs)
		if err != nil {
			return nil, cli.UsageError{Err: err}
		}
		for k, v := range resolved {
			overlay[k] = v
		}
	}
	if propsFile == "" {
		return overlay, nil
	}
	fromFile, err := runner.ReadCatalogPropsFile(propsFile)
	if err != nil {
		return nil, cli.UsageError{Err: err}
	}
	for k, v := range fromFile {
		overlay[k] = v
	}
	return overlay, nil
}

// runError maps RunJob's and Replay's errors to exit codes: fenced out is
// cli.ExitFenced, an unknown job a usage error, anything else a failure.
func runError(err error, jobID int64) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrStaleFence):
		return cli.ExitError{Code: cli.ExitFenced, Err: fmt.Errorf(
			"fenced out of job %d: %w; stopped before the next Iceberg commit and wrote nothing more to the ledger", jobID, err)}
	case errors.Is(err, store.ErrNotFound) && !errors.Is(err, runner.ErrJobFailed):
		return cli.UsageError{Err: err}
	}
	return err
}
