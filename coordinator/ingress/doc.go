// Package ingress is where commits enter the coordinator: the commit
// webhook's logic (events resolved to maintained tables, recorded for
// idempotency and turned into commit-jobs in one group-committed
// transaction; package httpapi serves it), the catalog watcher (polls
// metadata locations), and the catalog trigger (PostgreSQL NOTIFY from a
// JDBC catalog). Each ends in the table's commit-job row, which package
// flow runs.
//
// What it must not do: decide or submit jobs (a commit-job's gates are the
// flow's), or run SQL itself.
package ingress
