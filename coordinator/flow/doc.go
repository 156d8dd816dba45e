// Package flow is the maintenance flow: the task kinds the coordinator
// registers with the scheduler (sync, policy-expand, cron-job, commit-job),
// their gates (one job in flight per table, the policy's cooldown,
// superseded tables), the job row and spec each run gets, and table
// discovery under an attachment (Discover). A job it decides on goes to a
// submit.Submitter.
//
// What it must not do: parse policy JSON (package policy does), run SQL
// (package store), start processes (package submit), or read commit
// sources (package ingress feeds it through UpsertCommit).
package flow
