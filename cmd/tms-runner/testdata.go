package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/testdata"
)

func runTestdata(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-runner", "testdata", env.Stderr)
	var (
		out     string
		recipes []string
		scale   int
		replace bool
		rows    int
	)
	fs.StringVar(&out, "out", "", "folder to build into: DIR/catalog.db and DIR/warehouse (required)")
	fs.StringArrayVar(&recipes, "recipe", nil, "recipe to build (repeatable; default: all default recipes)")
	fs.IntVar(&scale, "scale", 1, "multiply each recipe's size by N")
	fs.BoolVar(&replace, "replace", false, "drop and rebuild tables that already exist in --out")
	fs.IntVar(&rows, "rows-per-append", 0, "rows each append commit adds, for every chosen recipe (default: the recipe's own)")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	if out == "" {
		return cli.Usagef("--out is required")
	}
	if scale < 1 {
		return cli.Usagef("--scale must be at least 1, got %d", scale)
	}
	if rows < 0 {
		return cli.Usagef("--rows-per-append must be positive, got %d", rows)
	}
	var adjust func(*testdata.Recipe)
	if rows > 0 {
		adjust = func(r *testdata.Recipe) { r.RowsPerAppend = rows }
	}
	for _, r := range recipes {
		if _, err := testdata.Lookup(r); err != nil {
			return cli.UsageError{Err: err}
		}
	}
	rep, err := testdata.Build(ctx, out, testdata.BuildOptions{Recipes: recipes, Scale: scale, Replace: replace, Log: env.Log, Adjust: adjust})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "table\tdata files\tsnapshots\trows\ttook")
	for _, t := range rep.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", t.Name, t.DataFiles, t.Snapshots, t.Rows, t.Took.Round(1e6))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(env.Stdout, "built in %s\n", out)
	return err
}
