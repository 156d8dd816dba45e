package store

import (
	"context"
	"database/sql"
	"fmt"
)

// CloseJob fences the row out and finishes it, in one transaction.
func (s *postgresStore) CloseJob(ctx context.Context, id int64, f Finish) (Job, error) {
	if err := validateFinish(f); err != nil {
		return Job{}, err
	}
	at := orNow(f.At, s.now)
	var updated, exists bool
	// As FinishJob, with the fence bumped by the same update.
	err := s.pool.QueryRow(ctx, `
		WITH u AS (
			UPDATE table_maintenance_job
			SET fence = fence + 1, status = $2, after_snapshot_id = $3, error = nullif($4, ''), finished_at = $5, outcomes = $6::jsonb
			WHERE id = $1 AND finished_at IS NULL
			RETURNING table_id
		), `+pgWakeWaiting("$5")+`
		SELECT EXISTS (SELECT 1 FROM u), EXISTS (SELECT 1 FROM table_maintenance_job WHERE id = $1), (SELECT count(*) FROM n)`,
		id, string(f.Status), f.AfterSnapshotID, f.Error, at, nullJSON(f.Outcomes)).
		Scan(&updated, &exists, new(int64))
	if err != nil {
		return Job{}, pgError("close job", err)
	}
	return s.closed(ctx, id, updated, exists)
}

// CloseJob fences the row out and finishes it, in one transaction.
func (s *sqliteStore) CloseJob(ctx context.Context, id int64, f Finish) (Job, error) {
	if err := validateFinish(f); err != nil {
		return Job{}, err
	}
	at := sqliteTime(orNow(f.At, s.now))
	var updated, exists bool
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE table_maintenance_job
			SET fence = fence + 1, status = ?2, after_snapshot_id = ?3, error = nullif(?4, ''), finished_at = ?5, outcomes = ?6
			WHERE id = ?1 AND finished_at IS NULL`,
			id, string(f.Status), f.AfterSnapshotID, f.Error, at, nullJSON(f.Outcomes))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if updated = n == 1; updated {
			exists = true
			return sqliteWakeWaiting(ctx, tx, id, at)
		}
		err = tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM table_maintenance_job WHERE id = ?1)`, id).Scan(&exists)
		return err
	})
	if err != nil {
		return Job{}, sqliteError("close job", err)
	}
	return s.closed(ctx, id, updated, exists)
}

// closed is CloseJob's answer once its transaction ended: the row as it
// is now, ErrNotInFlight if it was finished before, ErrNotFound if there
// is none.
func (s *sqlStore) closed(ctx context.Context, id int64, updated, exists bool) (Job, error) {
	if !exists {
		return Job{}, notFound("job", id)
	}
	j, err := s.GetJob(ctx, id)
	if err != nil {
		return Job{}, err
	}
	if !updated {
		return j, fmt.Errorf("%w: job %d is %s since %s", ErrNotInFlight, id, j.Status, j.FinishedAt.Format("2006-01-02T15:04:05Z07:00"))
	}
	return j, nil
}
