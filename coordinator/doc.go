// Package coordinator is tms-coordinator's control plane, one package per
// responsibility; a commit-job's way runs downwards through them:
//
//	ingress    commits enter: webhook logic, catalog watcher, catalog trigger
//	flow       the task kinds and their gates; the job row and spec of a run
//	submit     starting and tracking a job (Submitter; the local runner)
//	reconcile  closing rows nobody else will (terminal, lost, dead nodes)
//	scheduler  the generic engine: kinds, pools, claims, heartbeats, cron
//	admin      operator actions on policies and attachments (CLI and API)
//	httpapi    the HTTP server: probes, metrics, webhook, /v1 resources
//	config     serve's configuration: flags, TMS_* variables, the file
//
// Policies are defined in package policy, the job spec in package jobspec,
// and every SQL statement lives in package store.
package coordinator
