package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/coordinator/config"
	"github.com/tms-dev/tms/internal/cli"
)

// runConfig is `config check FILE…`: each file read as serve --config
// reads it, checked without opening the database, starting anything or
// reading a reference's secret. Every problem is one line on stderr,
// FILE:LINE: key KEY: message, and any problem exits 2; a good file is
// `FILE: ok (N keys)` on stdout.
func runConfig(_ context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "config", env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: tms-coordinator config check FILE...\n\n"+
			"check serve's configuration files (%s* keys) as serve --config reads them, without TMS_* variables,\n"+
			"opening the database, starting anything or reading the secrets behind env:/file: references;\n"+
			"print each problem as FILE:LINE: key KEY: message and exit 2 if there is any\n", config.Prefix)
	}
	if err := fs.Parse(env.Args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return cli.UsageError{Err: err}
	}
	args := fs.Args()
	if len(args) == 0 || args[0] != "check" {
		fs.Usage()
		return cli.Usagef("want: config check FILE...")
	}
	if len(args) == 1 {
		return cli.Usagef("config check: give the configuration file to check")
	}
	bad := 0
	for _, path := range args[1:] {
		f, probs := config.Check(path)
		for _, p := range probs {
			fmt.Fprintln(env.Stderr, p.Error())
		}
		if len(probs) > 0 {
			bad += len(probs)
			continue
		}
		if _, err := fmt.Fprintf(env.Stdout, "%s: ok (%d keys)\n", path, f.Len()); err != nil {
			return err
		}
	}
	switch {
	case bad == 1:
		return cli.Usagef("1 problem")
	case bad > 1:
		return cli.Usagef("%d problems", bad)
	}
	return nil
}
