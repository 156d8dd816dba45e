// Command tms-runner is the job-side program of TMS. For now it builds test
// tables (testdata), prints a table's metrics (sample) and its row-level
// checksum (checksum); the maintenance chain (run, replay) comes with the
// runner issue.
package main

import "github.com/tms-dev/tms/internal/cli"

func main() { cli.Main("tms-runner", commands()) }

func commands() []cli.Command {
	return []cli.Command{
		{Name: "testdata", Summary: "build the deterministic test tables into a folder", Run: runTestdata},
		{Name: "sample", Summary: "print a table's metrics at a snapshot (metadata only)", Run: runSample},
		{Name: "checksum", Summary: "print the row count and order-independent checksum of a table's live rows", Run: runChecksum},
	}
}
