// Package admin holds the operator's actions that the CLI, the HTTP API
// and the console share: on policies and attachments (PolicyOps: create,
// alter, enable, delete, attach, detach, effective policies) and on job
// rows (CancelJob, over store.CloseJob), with their validation, the
// check that an attachment's catalog is configured on a live node, and the
// JSON documents both print.
//
// What it must not do: parse policy content itself (package policy), or run
// SQL (package store).
package admin
