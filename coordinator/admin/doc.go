// Package admin holds the operator's actions on policies and attachments
// that the CLI and the HTTP API share (PolicyOps: create, alter, enable,
// delete, attach, detach, effective policies), with their validation, the
// check that an attachment's catalog is configured on a live node, and the
// JSON documents both print.
//
// What it must not do: parse policy content itself (package policy), or run
// SQL (package store).
package admin
