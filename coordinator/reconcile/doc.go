// Package reconcile closes job rows nobody will close: rows whose submitter
// reports a terminal state, rows the submitter no longer knows past their
// deadline, and the in-flight rows of dead or restarted nodes (fence bumped
// first), so a table never stays blocked by a lost job.
//
// What it must not do: start or decide jobs, or close a row the submitter
// still vouches for (queued or running).
package reconcile
