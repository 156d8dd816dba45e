package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tms-dev/tms/coordinator/config"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
)

// ExitWatchdog is serve's exit code when the node lost the database for
// longer than the watchdog timeout: its supervisor restarts it.
const exitWatchdog = 5

// runServe is serve: its configuration (flags, TMS_* variables, the
// file), checked and its references read before anything is opened, then
// the Node it wires, run until SIGTERM.
func runServe(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "serve", env.Stderr)
	var cfg config.Config
	cfg.RegisterFlags(fs)
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	if err := cfg.Apply(fs); err != nil {
		return classify(err)
	}
	if err := cfg.Validate().Err(); err != nil {
		return classify(err)
	}
	res, err := cfg.Resolve()
	if err != nil {
		return classify(err)
	}
	node, err := NewNode(ctx, &cfg, res, env.Log, env.Stderr)
	if err != nil {
		return err
	}
	defer node.Close()
	err = node.Run(ctx)
	if errors.Is(err, scheduler.ErrWatchdog) {
		return cli.ExitError{Code: exitWatchdog, Err: err}
	}
	return err
}

func runEnqueueCommit(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "enqueue-commit", env.Stderr)
	var (
		ff   config.Config
		name string
	)
	ff.RegisterFlowFlags(fs)
	fs.StringVar(&name, "table", "", "CATALOG.NAMESPACE.TABLE that got a commit (required)")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	parts := strings.Split(name, ".")
	if len(parts) < 3 || slices.Contains(parts, "") {
		return cli.Usagef("--table %q: want CATALOG.NAMESPACE.TABLE", name)
	}
	st, err := store.Open(ctx, ff.DB, env.Log)
	if err != nil {
		return classify(err)
	}
	defer st.Close()
	catName, ns, tbl := parts[0], strings.Join(parts[1:len(parts)-1], "."), parts[len(parts)-1]
	row, err := st.FindTable(ctx, catName, ns, tbl)
	if errors.Is(err, store.ErrNotFound) {
		return cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("table %s is not registered: attach a policy to it (serve registers tables under attachments)", name)}
	}
	if err != nil {
		return classify(err)
	}
	if _, _, err := flow.NewCommitJobs(ff.CommitDelay).Upsert(ctx, st, row.ID, time.Now()); err != nil {
		return classify(err)
	}
	_, err = fmt.Fprintf(env.Stdout, "commit-job for %s (table %d) enqueued\n", name, row.ID)
	return err
}
