// Package submit owns how a maintenance job is started and tracked outside
// the coordinator's claims: the Submitter interface (Submit, Status,
// Cancel, Close), the job request a flow hands it, and its implementations:
// LocalSubmitter (tms-runner as a child process, with its concurrency
// limit, SIGTERM-then-SIGKILL cancel and log files), CommandSubmitter (the
// operator's argv templates for submit, status and cancel, run without a
// shell) and GravitinoSubmitter (runs of a Gravitino job template over its
// REST API).
//
// What it must not do: decide whether a job should run (package flow does),
// write the job ledger (the runner writes its own row under its fence), or
// put a credential into a runner's argv or the ledger.
package submit
