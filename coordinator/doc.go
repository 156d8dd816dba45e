// Package coordinator owns scheduling in tms-coordinator: named task kinds
// run by pools of threads, one-shot and recurring (cron with a time zone),
// claimed exactly once across every coordinator node, heartbeated while
// their callback runs, revived by any node when their holder stops
// heartbeating, and completed under the claim's fencing token. It also owns
// node liveness: a node that cannot write its heartbeat for WatchdogTimeout
// stops claiming, cancels its callbacks and makes Engine.Run return
// ErrWatchdog, so its supervisor restarts it with fresh state.
//
// The engine is generic over task kinds; the maintenance handlers
// (policy-expand, cron-job, commit-job) register as Kinds. Callbacks must be
// short: long work (Spark, tms-runner) is tracked in the job ledger, never in
// a claimed task.
//
// What it must not do: touch data files or Iceberg tables, run SQL (every
// statement lives in package store, reached through store.Scheduler), or log
// through a global logger (a *zap.Logger is passed in Config). Time comes
// from Config.Clock, so tests drive it instead of sleeping.
package coordinator
