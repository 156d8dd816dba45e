package store

import (
	"fmt"
	"time"
)

// This file declares the ledger reads and housekeeping the coordinator
// needs beside the runner's fenced writes: the cron gate (LastFinished), the
// reconciler's sweep (ListInFlightJobs) and history purging (PurgeJobs).
// Both backends implement them in jobs_ops_postgres.go and
// jobs_ops_sqlite.go.

// Purge says which finished job rows PurgeJobs deletes. A row goes when it
// finished before FinishedBefore, or when its table has more than
// KeepPerTable newer finished rows. The newest finished row of every
// (table, policy) is always kept, because the cooldown (minIntervalMs) is
// measured from it. In-flight rows are never purged.
type Purge struct {
	// FinishedBefore is the age limit; zero means none.
	FinishedBefore time.Time
	// KeepPerTable is the count limit per table; zero means none.
	KeepPerTable int
}

func validatePurge(p Purge) error {
	if p.KeepPerTable < 0 {
		return fmt.Errorf("%w: purge keepPerTable must not be negative, got %d", ErrInvalidArgument, p.KeepPerTable)
	}
	return nil
}
