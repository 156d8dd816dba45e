// Package scheduler is the coordinator's generic scheduling engine (the role
// db-scheduler plays for Java services): named task kinds
// run by pools of threads, one-shot and recurring (cron with a time zone),
// claimed exactly once across every coordinator node, heartbeated while
// their callback runs, revived by any node when their holder stops
// heartbeating, and completed under the claim's fencing token. It also owns
// node liveness: a node that cannot write its heartbeat for WatchdogTimeout
// stops claiming, cancels its callbacks and makes Engine.Run return
// ErrWatchdog, so its supervisor restarts it with fresh state.
//
// The engine knows nothing of tables, policies or jobs: the maintenance flow
// (package flow: policy-expand, cron-job, commit-job, sync) and the
// reconciler register as Kinds. Callbacks must be short: long work
// (tms-runner, started by a submitter) is tracked in the job ledger, never in
// a claimed task.
//
// Decisions worth knowing:
//
//   - A claim takes as many due rows as the pool has free threads, in one
//     statement; the row's version (incremented by the claim) is the fencing
//     token every later write carries.
//   - A one-shot success that the handler did not complete itself is queued
//     on its pool, which deletes the finished rows (each guarded by its own
//     version) in the same statement as its next claim, and the thread is
//     free at once. The row stays picked until that commit, so no other
//     node can claim it.
//     Handlers that write rows of their own use Execution.Complete, which
//     runs the guarded completion and their writes in one transaction.
//   - An upsert that arrives while its row is running sets the row's
//     rerun_at; the running claim's completion puts the row back instead of
//     deleting it, so coalescing never loses an event.
//   - WatchdogTimeout defaults to half the stale-claim age and must stay
//     below it: a node cut off from the database stops before anyone
//     revives its claims. On a watchdog stop the node writes nothing more;
//     graceful shutdown instead releases (unpicks) rows whose callbacks it
//     cancelled at the deadline.
//   - A recurring task's next instant is computed from the completion time,
//     so missed instants are skipped, never run twice.
//
// What it must not do: import maintenance code (policy, flow, submit,
// jobspec, chain), touch data files or Iceberg tables, run SQL (every
// statement lives in package store, reached through store.Scheduler), or log
// through a global logger (a *zap.Logger is passed in Config). Time comes
// from Config.Clock, so tests drive it instead of sleeping.
package scheduler
