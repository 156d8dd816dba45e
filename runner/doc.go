// Package runner owns the job side of TMS: what `tms-runner run` and
// `tms-runner replay` do between reading a job and exiting. It reads the job
// spec from the ledger row, opens the catalog (overlaying credentials that
// come from the environment or a file, never from the spec), checks that the
// table is the incarnation the ledger knows, drives package chain, and writes
// what happened back to the ledger: before_snapshot_id, metrics at every
// sampled snapshot, after_snapshot_id, status, per-type outcomes, error and
// finished_at.
//
// Every ledger write carries the job row's fence, and the fence is checked
// again right before every Iceberg commit (chain's BeforeCommit hook). Once a
// write or check reports store.ErrStaleFence the runner is a zombie: it stops
// before its next commit, writes nothing more, and returns an error wrapping
// store.ErrStaleFence.
//
// The package must not run SQL (it only uses store.Store) and must not hold
// Iceberg maintenance logic (it only calls chain.Run); it loads the table
// itself only to identify it (uuid, name) for the ledger.
package runner
