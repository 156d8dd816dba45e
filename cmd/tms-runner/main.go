// Command tms-runner is the job-side program of TMS. It runs a job row of
// the ledger (run), replays a maintenance chain locally (replay), builds test
// tables (testdata), and prints a table's metrics (sample) and its row-level
// checksum (checksum).
package main

import (
	"os"
	"runtime/debug"

	"github.com/tms-dev/tms/internal/cli"
)

// gcPercent is the runner's GOGC unless the environment sets one. A
// compaction's heap is mostly large, short-lived Arrow and parquet buffers;
// Go's default of 100 lets the heap grow to twice what is live before
// collecting, which puts a compaction's peak RSS well over its working
// set. At 50 the heap grows to 1.5× what is live, for a few per cent more
// CPU in the collector.
const gcPercent = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	cli.Main("tms-runner", commands())
}

func commands() []cli.Command {
	return []cli.Command{
		{Name: "testdata", Summary: "build the deterministic test tables into a folder", Run: runTestdata},
		{Name: "sample", Summary: "print a table's metrics at a snapshot (metadata only)", Run: runSample},
		{Name: "run", Summary: "run a job row of the ledger (job mode; exit 4 when fenced out)", Run: runRun},
		{Name: "replay", Summary: "run a maintenance chain on one table locally and print before/after metrics", Run: runReplay},
		{Name: "checksum", Summary: "print the row count and order-independent checksum of a table's live rows", Run: runChecksum},
	}
}
