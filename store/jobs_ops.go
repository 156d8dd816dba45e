package store

import (
	"context"
	"fmt"
	"time"
)

// This file holds the ledger reads and housekeeping the coordinator needs
// beside the runner's fenced writes: the cron gate (LastFinished), the
// reconciler's sweep (TableInFlightJobs, ListInFlightJobs) and history
// purging (PurgeJobs), written once for both backends on sqlStore's seam
// (sqlstore.go).

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

// LastFinished returns the newest finished_at of a (table, policy).
func (s *sqlStore) LastFinished(ctx context.Context, tableID, policyID int64) (time.Time, error) {
	var at time.Time
	err := s.b.read().queryRow(ctx, `
		SELECT max(finished_at) FROM table_maintenance_job
		WHERE table_id = `+s.b.param(1)+` AND policy_id = `+s.b.param(2)+` AND finished_at IS NOT NULL`, tableID, policyID).
		Scan(scanTime(&at))
	if err != nil {
		return time.Time{}, s.b.wrap("last finished", err)
	}
	return at, nil
}

// TableInFlightJobs returns one table's in-flight rows.
func (s *sqlStore) TableInFlightJobs(ctx context.Context, tableID int64) ([]Job, error) {
	jobs, err := collect(ctx, s.b.read(), scanJob, `
		SELECT `+jobCols+` FROM table_maintenance_job
		WHERE finished_at IS NULL AND table_id = `+s.b.param(1)+` ORDER BY id`, tableID)
	if err != nil {
		return nil, s.b.wrap("list in-flight jobs of table", err)
	}
	return jobs, nil
}

// ListInFlightJobs pages through the in-flight rows of all tables.
func (s *sqlStore) ListInFlightJobs(ctx context.Context, afterID int64, limit int) ([]Job, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	jobs, err := collect(ctx, s.b.read(), scanJob, `
		SELECT `+jobCols+` FROM table_maintenance_job
		WHERE finished_at IS NULL AND id > `+s.b.param(1)+` ORDER BY id LIMIT `+s.b.param(2), afterID, limit)
	if err != nil {
		return nil, s.b.wrap("list in-flight jobs", err)
	}
	return jobs, nil
}

// PurgeJobs deletes finished rows by age and count per table, in one
// statement. Both limits are placeholders that may be off (NULL, 0), cast so
// PostgreSQL knows their types.
func (s *sqlStore) PurgeJobs(ctx context.Context, p Purge) (int64, error) {
	if err := validatePurge(p); err != nil {
		return 0, err
	}
	var before any
	if !p.FinishedBefore.IsZero() {
		before = s.b.timeArg(p.FinishedBefore)
	}
	before1, keep2 := s.b.typed(1, "timestamptz"), s.b.typed(2, "int")
	var n int64
	err := s.b.inTx(ctx, func(q dbQ) error {
		var err error
		n, err = q.exec(ctx, `
			DELETE FROM table_maintenance_job WHERE id IN (
				SELECT id FROM (
					SELECT id, finished_at,
						row_number() OVER (PARTITION BY table_id ORDER BY finished_at DESC, id DESC) AS table_rank,
						row_number() OVER (PARTITION BY table_id, policy_id ORDER BY finished_at DESC, id DESC) AS policy_rank
					FROM table_maintenance_job WHERE finished_at IS NOT NULL
				) r
				WHERE policy_rank > 1
				  AND ((`+before1+` IS NOT NULL AND finished_at < `+before1+`) OR (`+keep2+` > 0 AND table_rank > `+keep2+`))
			)`, before, p.KeepPerTable)
		return err
	})
	if err != nil {
		return 0, s.b.wrap("purge jobs", err)
	}
	return n, nil
}
