package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/cli"
)

func runChecksum(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-runner", "checksum", env.Stderr)
	var (
		cf         catalogFlags
		name       string
		snapshotID int64
		asJSON     bool
	)
	cf.register(fs)
	fs.StringVar(&name, "table", "", "table NAMESPACE.TABLE (required)")
	fs.Int64Var(&snapshotID, "snapshot-id", 0, "snapshot to read (default: the current one)")
	fs.BoolVar(&asJSON, "json", false, `print {"rows": N, "checksum": "…"}`)
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	if name == "" {
		return cli.Usagef("--table is required")
	}
	cat, err := cf.open(ctx)
	if err != nil {
		return err
	}
	tbl, err := loadTable(ctx, cat, name)
	if err != nil {
		return err
	}
	res, err := checksum.Table(ctx, tbl, snapshotID)
	if err != nil {
		return fmt.Errorf("checksum %s: %w", name, err)
	}
	if asJSON {
		return json.NewEncoder(env.Stdout).Encode(res)
	}
	_, err = fmt.Fprintf(env.Stdout, "%s rows=%d checksum=%s\n", name, res.Rows, res.Checksum)
	return err
}
