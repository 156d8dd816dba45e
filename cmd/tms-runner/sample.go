package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/sampler"
)

// sampleOutput is the JSON shape of `sample --json`, one object per table.
type sampleOutput struct {
	Table      string          `json:"table"`
	SnapshotID int64           `json:"snapshot-id"`
	Metrics    sampler.Metrics `json:"metrics"`
}

func runSample(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-runner", "sample", env.Stderr)
	var (
		cf         catalogFlags
		tables     []string
		all        bool
		snapshotID int64
		target     int64
		asJSON     bool
	)
	cf.register(fs)
	fs.StringArrayVar(&tables, "table", nil, "table NAMESPACE.TABLE (repeatable)")
	fs.BoolVar(&all, "all", false, "sample every table of the catalog")
	fs.Int64Var(&snapshotID, "snapshot-id", 0, "snapshot to sample (default: the current one; only with one --table)")
	fs.Int64Var(&target, "target-file-size", 0, "target file size T in bytes (default: table property write.target-file-size-bytes, else 512 MiB)")
	fs.BoolVar(&asJSON, "json", false, "print JSON: one {\"table\",\"snapshot-id\",\"metrics\"} object per line")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	switch {
	case all && len(tables) > 0:
		return cli.Usagef("give --table or --all, not both")
	case !all && len(tables) == 0:
		return cli.Usagef("--table is required (or --all)")
	case snapshotID != 0 && len(tables) != 1:
		return cli.Usagef("--snapshot-id needs exactly one --table")
	case target < 0:
		return cli.Usagef("--target-file-size must be positive, got %d", target)
	}
	cat, err := cf.open(ctx)
	if err != nil {
		return err
	}
	if all {
		if tables, err = allTables(ctx, cat); err != nil {
			return err
		}
	}
	// Sample everything first so that a bad table prints nothing partial.
	out := make([]sampleOutput, 0, len(tables))
	for _, name := range tables {
		tbl, err := loadTable(ctx, cat, name)
		if err != nil {
			return err
		}
		res, err := sampler.Sample(ctx, tbl, snapshotID, sampler.Options{TargetFileSize: target})
		if err != nil {
			return fmt.Errorf("sample %s: %w", name, err)
		}
		out = append(out, sampleOutput{Table: name, SnapshotID: res.SnapshotID, Metrics: res.Metrics})
	}
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		for _, o := range out {
			if err := enc.Encode(o); err != nil {
				return err
			}
		}
		return nil
	}
	return printMetricsTable(env.Stdout, out)
}

// printMetricsTable prints one column per table and one row per metric, the
// layout that reads best for a handful of tables.
func printMetricsTable(w io.Writer, out []sampleOutput) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, cell func(o sampleOutput) string) {
		fmt.Fprintf(tw, "%s\t", label)
		for _, o := range out {
			fmt.Fprintf(tw, "%s\t", cell(o))
		}
		fmt.Fprintln(tw)
	}
	row("table", func(o sampleOutput) string { return o.Table })
	row("snapshot-id", func(o sampleOutput) string { return fmt.Sprint(o.SnapshotID) })
	for _, m := range metricRows {
		row(m.name, func(o sampleOutput) string { return m.cell(o.Metrics) })
	}
	return tw.Flush()
}

var metricRows = []struct {
	name string
	cell func(m sampler.Metrics) string
}{
	{"file-number", func(m sampler.Metrics) string { return fmt.Sprint(m.FileNumber) }},
	{"data-file-number", func(m sampler.Metrics) string { return fmt.Sprint(m.DataFileNumber) }},
	{"position-delete-file-number", func(m sampler.Metrics) string { return fmt.Sprint(m.PositionDeleteFileNumber) }},
	{"equality-delete-file-number", func(m sampler.Metrics) string { return fmt.Sprint(m.EqualityDeleteFileNumber) }},
	{"delete-file-number", func(m sampler.Metrics) string { return fmt.Sprint(m.DeleteFileNumber) }},
	{"position-delete-record-count", func(m sampler.Metrics) string { return fmt.Sprint(m.PositionDeleteRecordCount) }},
	{"equality-delete-record-count", func(m sampler.Metrics) string { return fmt.Sprint(m.EqualityDeleteRecordCount) }},
	{"deletion-vector-number", func(m sampler.Metrics) string { return fmt.Sprint(m.DeletionVectorNumber) }},
	{"delete-ratio", func(m sampler.Metrics) string { return fmt.Sprintf("%.4g", m.DeleteRatio) }},
	{"max-partition-delete-file-number", func(m sampler.Metrics) string { return fmt.Sprint(m.MaxPartitionDeleteFileNumber) }},
	{"small-file-number", func(m sampler.Metrics) string { return fmt.Sprint(m.SmallFileNumber) }},
	{"data-file-mse", func(m sampler.Metrics) string { return fmt.Sprintf("%.4g", m.DataFileMSE) }},
	{"avg-file-size", func(m sampler.Metrics) string { return humanBytes(m.AvgFileSize) }},
	{"total-file-size", func(m sampler.Metrics) string { return humanBytes(float64(m.TotalFileSize)) }},
	{"record-count", func(m sampler.Metrics) string { return fmt.Sprint(m.RecordCount) }},
	{"manifest-number", func(m sampler.Metrics) string { return fmt.Sprint(m.ManifestNumber) }},
	{"avg-manifest-size", func(m sampler.Metrics) string { return humanBytes(m.AvgManifestSize) }},
	{"snapshot-number", func(m sampler.Metrics) string { return fmt.Sprint(m.SnapshotNumber) }},
	{"oldest-snapshot-age-ms", func(m sampler.Metrics) string { return fmt.Sprint(m.OldestSnapshotAgeMs) }},
	{"partition-number", func(m sampler.Metrics) string { return fmt.Sprint(m.PartitionNumber) }},
	{"max-partition-small-file-number", func(m sampler.Metrics) string { return fmt.Sprint(m.MaxPartitionSmallFileNumber) }},
}

func humanBytes(b float64) string { return cli.HumanBytes(b) }
