// Command tms-coordinator is the TMS sidecar beside the catalog: it runs the
// maintenance flow (serve), manages policies (policy), takes commit events
// (enqueue-commit), reports (status, plan), migrates its database (migrate),
// checks that the database answers (ping) and that a configuration file
// holds what serve takes (config check), and measures the scheduling
// engine (bench: a no-op drain). serve also answers HTTP: health, metrics,
// commit events and the /v1 resources (see coordinator/httpapi).
package main

import "github.com/tms-dev/tms/internal/cli"

func main() { cli.Main("tms-coordinator", commands()) }

func commands() []cli.Command {
	return []cli.Command{
		{Name: "bench", Summary: "drain N no-op tasks with K in-process nodes; prints tms_tasks_per_sec", Run: runBench},
		{Name: "migrate", Summary: "apply the database migrations (--check: only report)", Run: runMigrate},
		{Name: "config", Summary: "config check FILE: check serve's configuration file without starting anything (each problem as FILE:LINE: key KEY: …, exit 2)", Run: runConfig},
		{Name: "ping", Summary: "check that the database answers", Run: runPing},
		{Name: "serve", Summary: "run the maintenance flow: schedule, claim, submit runners, reconcile (until SIGTERM)", Run: runServe},
		{Name: "enqueue-commit", Summary: "tell the coordinator a table got a commit (upserts its commit-job)", Run: runEnqueueCommit},
		{Name: "status", Summary: "queue depth per task kind, jobs in flight, and each table's last run with before/after metrics", Run: runStatus},
		{Name: "jobs", Summary: "list, show and cancel maintenance jobs (the ledger's rows)", Run: runJobs},
		{Name: "plan", Summary: "what would run now and why, per table and policy: the gates and thresholds on the latest metrics (a dry run; nothing is enqueued)", Run: runPlan},
		{Name: "tables", Summary: "list the maintained tables and show one table's incarnations and job history", Run: runTables},
		{Name: "policy", Summary: "create, alter, enable, disable, delete, attach, detach, list and show maintenance policies", Run: runPolicy},
	}
}
