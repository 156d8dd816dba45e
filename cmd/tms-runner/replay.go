package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/chain"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/runner"
	"github.com/tms-dev/tms/sampler"
	"github.com/tms-dev/tms/store"
)

// runReplay is `tms-runner replay`: run a chain locally on one table, with a
// ledger row in a local (or given) ledger, and print before/after metrics.
func runReplay(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-runner", "replay", env.Stderr)
	var (
		cf       catalogFlags
		name     string
		types    string
		policies []string
		ledger   string
		dryRun   bool
		asJSON   bool
	)
	cf.register(fs)
	fs.StringVar(&name, "table", "", "table NAMESPACE.TABLE (required)")
	fs.StringVar(&types, "types", "", "maintenance types, comma-separated: compaction,manifest-rewrite,snapshot-expiry,orphan-cleanup (required; run in chain order)")
	fs.StringArrayVar(&policies, "policy", nil, `policy file (repeatable, one per type): JSON {"policyType" or "type", "content"}`)
	fs.StringVar(&ledger, "ledger", "", "ledger URL (default "+runner.DefaultReplayLedger()+"; an sqlite ledger is created and migrated)")
	fs.BoolVar(&dryRun, "dry-run", false, "decide and plan, commit and delete nothing")
	fs.BoolVar(&asJSON, "json", false, `print {"table", "types": [{"type", "outcome", "reason", "before_snapshot_id", "after_snapshot_id", "metrics_before", "metrics_after", …}]}`)
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	switch {
	case name == "":
		return cli.Usagef("--table is required")
	case types == "":
		return cli.Usagef("--types is required, e.g. --types compaction,manifest-rewrite,snapshot-expiry")
	}
	chainTypes, err := policy.ParseTypes(types)
	if err != nil {
		return cli.Usagef("--types: %v", err)
	}
	steps, err := replaySteps(chainTypes, policies)
	if err != nil {
		return err
	}
	props, err := catalogs.ParseProps(cf.props)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	if cf.warehouseDir != "" && len(props) > 0 {
		return cli.Usagef("give either --warehouse-dir or --catalog-prop, not both")
	}
	if cf.warehouseDir == "" && len(props) == 0 {
		return cli.Usagef("no catalog: give --warehouse-dir DIR or --catalog-prop type=…")
	}
	ro := runner.ReplayOptions{
		Ledger: ledger, Table: name, Steps: steps, DryRun: dryRun,
		Catalog: runner.CatalogSpec{WarehouseDir: cf.warehouseDir},
	}
	if len(props) > 0 {
		ro.Catalog = runner.CatalogSpec{Name: cf.name, Properties: props}
	}
	failpoint, err := fileDeletedFailpoint(env.Stderr)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	opts := runner.Options{Log: env.Log, FileDeleted: failpoint}
	if len(props) > 0 {
		// Credentials from TMS_CATALOG_PROP_* and --catalog-props-file are
		// used for the run and never written to the ledger's spec.
		if opts.CatalogProps, err = cf.overlay(); err != nil {
			return err
		}
	}
	progress := newProgressLine(env.Stderr, chainTypes)
	if progress != nil {
		opts.Progress = progress.update
	}
	res, err := runner.Replay(ctx, ro, opts)
	progress.clear()
	if len(res.Report.Types) > 0 {
		if perr := printReport(env.Stdout, res.Report, asJSON); perr != nil && err == nil {
			err = perr
		}
	}
	switch {
	case err == nil:
		env.Log.Info("replay recorded", zap.String("ledger", res.Ledger), zap.Int64("job", res.JobID))
		return nil
	case errors.Is(err, runner.ErrInvalidSpec) && res.JobID == 0,
		errors.Is(err, catalogs.ErrInvalidArgument):
		return cli.UsageError{Err: err}
	case errors.Is(err, store.ErrStaleFence):
		return runError(err, res.JobID)
	}
	return err
}

// policyFile is the shape of a --policy file: a Gravitino policy
// ({name, comment, policyType, enabled, content}) or the short form
// {type, content}.
type policyFile struct {
	PolicyType string          `json:"policyType"`
	Type       policy.Type     `json:"type"`
	Content    json.RawMessage `json:"content"`
}

// replaySteps pairs each type with its policy file's content, checking that
// every file names a type of the chain, at most one file per type, and that
// each content is valid for its type.
func replaySteps(types []policy.Type, files []string) ([]runner.StepSpec, error) {
	content := map[policy.Type]json.RawMessage{}
	from := map[policy.Type]string{}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, cli.Usagef("--policy: %v", err)
		}
		var pf policyFile
		if err := json.Unmarshal(raw, &pf); err != nil {
			return nil, cli.Usagef("--policy %s: %v: %v", path, policy.ErrInvalid, err)
		}
		t := pf.Type
		if pf.PolicyType != "" {
			pt, ok := policy.MaintenanceTypeOf(pf.PolicyType)
			if !ok {
				return nil, cli.Usagef("--policy %s: policyType %q is not one of %s", path, pf.PolicyType, policy.PolicyTypeList())
			}
			if t != "" && t != pt {
				return nil, cli.Usagef("--policy %s: type %q and policyType %q disagree", path, t, pf.PolicyType)
			}
			t = pt
		}
		if t == "" {
			return nil, cli.Usagef("--policy %s: needs \"policyType\" or \"type\"", path)
		}
		if _, err := policy.ParseTypes(string(t)); err != nil {
			return nil, cli.Usagef("--policy %s: %v", path, err)
		}
		if !slices.Contains(types, t) {
			return nil, cli.Usagef("--policy %s is for %s, which is not in --types", path, t)
		}
		if prev, dup := from[t]; dup {
			return nil, cli.Usagef("--policy %s and %s are both for %s; give one per type", prev, path, t)
		}
		if err := policy.ValidateOptions(t, pf.Content); err != nil {
			return nil, cli.Usagef("--policy %s: %v", path, err)
		}
		content[t], from[t] = pf.Content, path
	}
	steps := make([]runner.StepSpec, len(types))
	for i, t := range types {
		steps[i] = runner.StepSpec{Type: t, Policy: content[t]}
	}
	return steps, nil
}

// printReport prints a chain report: as indented JSON (the chain report's
// own encoding: table, table_uuid, before/after snapshot, types with
// outcome, reason, metrics before and after, duration_ms) or as a table.
func printReport(w io.Writer, rep chain.Report, asJSON bool) error {
	if asJSON {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	return printReportTable(w, rep)
}

// printReportTable prints one line per type with before → after values of
// the metrics an operator watches, then each type's reason.
func printReportTable(w io.Writer, rep chain.Report) error {
	fmt.Fprintf(w, "%s  snapshot %d → %d  (%s)\n", rep.Table, rep.BeforeSnapshotID, rep.AfterSnapshotID, rep.Duration.Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tOUTCOME\tFILES\tBYTES\tMANIFESTS\tSNAPSHOTS\tDATA-FILE-MSE\tDURATION")
	for _, t := range rep.Types {
		b, a := t.MetricsBefore, t.MetricsAfter
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Type, t.Outcome,
			arrow(b.FileNumber, a.FileNumber, fmtInt),
			arrow(b.TotalFileSize, a.TotalFileSize, func(v int64) string { return humanBytes(float64(v)) }),
			arrow(b.ManifestNumber, a.ManifestNumber, fmtInt),
			arrow(b.SnapshotNumber, a.SnapshotNumber, fmtInt),
			arrow(b.DataFileMSE, a.DataFileMSE, func(v float64) string { return fmt.Sprintf("%.3g", v) }),
			t.Duration.Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range rep.Types {
		line := fmt.Sprintf("  %s: %s", t.Type, t.Reason)
		if t.Err != "" {
			line += " — error: " + t.Err
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// arrow renders "before → after", or one value when it did not change.
func arrow[T comparable](before, after T, f func(T) string) string {
	if before == after {
		return f(before)
	}
	return f(before) + " → " + f(after)
}

func fmtInt(v int64) string { return fmt.Sprint(v) }

// progressLine is replay's progress display on a terminal: one line on
// stderr, redrawn at every sample the chain takes, saying which type of the
// chain is running, what it last did and the time since the start.
type progressLine struct {
	w     io.Writer
	types []policy.Type
	start time.Time
}

// newProgressLine returns a progress line on stderr if stderr is a terminal,
// else nil (whose methods do nothing), so piped and logged output stays
// clean.
func newProgressLine(stderr io.Writer, types []policy.Type) *progressLine {
	f, ok := stderr.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return &progressLine{w: stderr, types: types, start: time.Now()}
}

// update redraws the line after a sample of type t.
func (p *progressLine) update(t policy.Type, when string, r sampler.Result) {
	if p == nil {
		return
	}
	i := slices.Index(p.types, t) + 1
	state := fmt.Sprintf("sampled S0 (%d files, %d manifests), working", r.Metrics.FileNumber, r.Metrics.ManifestNumber)
	if when == chain.WhenAfter {
		state = fmt.Sprintf("committed (%d files, %d manifests)", r.Metrics.FileNumber, r.Metrics.ManifestNumber)
	}
	fmt.Fprintf(p.w, "\r\033[K[%d/%d] %s: %s … %s", i, len(p.types), t, state, time.Since(p.start).Round(100*time.Millisecond))
}

// clear erases the line before the report is printed.
func (p *progressLine) clear() {
	if p != nil {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
