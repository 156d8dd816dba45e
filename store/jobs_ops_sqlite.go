package store

import (
	"context"
	"database/sql"
	"time"
)

// LastFinished returns the newest finished_at of a (table, policy).
func (s *sqliteStore) LastFinished(ctx context.Context, tableID, policyID int64) (time.Time, error) {
	var at sql.NullString
	err := s.r.QueryRowContext(ctx, `
		SELECT max(finished_at) FROM table_maintenance_job
		WHERE table_id = ?1 AND policy_id = ?2 AND finished_at IS NOT NULL`, tableID, policyID).Scan(&at)
	if err != nil {
		return time.Time{}, sqliteError("last finished", err)
	}
	if !at.Valid {
		return time.Time{}, nil
	}
	t, err := parseSQLiteTime(at.String)
	if err != nil {
		return time.Time{}, sqliteError("last finished", err)
	}
	return t, nil
}

// TableInFlightJobs returns one table's in-flight rows.
func (s *sqliteStore) TableInFlightJobs(ctx context.Context, tableID int64) ([]Job, error) {
	return s.queryJobs(ctx, "list in-flight jobs of table", `
		SELECT `+sqliteJobCols+` FROM table_maintenance_job
		WHERE finished_at IS NULL AND table_id = ?1 ORDER BY id`, tableID)
}

// ListInFlightJobs pages through the in-flight rows of all tables.
func (s *sqliteStore) ListInFlightJobs(ctx context.Context, afterID int64, limit int) ([]Job, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	return s.queryJobs(ctx, "list in-flight jobs", `
		SELECT `+sqliteJobCols+` FROM table_maintenance_job
		WHERE finished_at IS NULL AND id > ?1 ORDER BY id LIMIT ?2`, afterID, limit)
}

// queryJobs runs a job-row query on the read pool.
func (s *sqliteStore) queryJobs(ctx context.Context, op, query string, args ...any) ([]Job, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, sqliteError(op, err)
	}
	defer rows.Close()
	var jobs []Job
	for rows.Next() {
		j, err := scanSQLiteJob(rows)
		if err != nil {
			return nil, sqliteError(op, err)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, sqliteError(op, err)
	}
	return jobs, nil
}

// PurgeJobs deletes finished rows by age and count per table.
func (s *sqliteStore) PurgeJobs(ctx context.Context, p Purge) (int64, error) {
	if err := validatePurge(p); err != nil {
		return 0, err
	}
	var before any
	if !p.FinishedBefore.IsZero() {
		before = sqliteTime(p.FinishedBefore)
	}
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			DELETE FROM table_maintenance_job WHERE id IN (
				SELECT id FROM (
					SELECT id, finished_at,
						row_number() OVER (PARTITION BY table_id ORDER BY finished_at DESC, id DESC) AS table_rank,
						row_number() OVER (PARTITION BY table_id, policy_id ORDER BY finished_at DESC, id DESC) AS policy_rank
					FROM table_maintenance_job WHERE finished_at IS NOT NULL
				)
				WHERE policy_rank > 1
				  AND ((?1 IS NOT NULL AND finished_at < ?1) OR (?2 > 0 AND table_rank > ?2))
			)`, before, p.KeepPerTable)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, sqliteError("purge jobs", err)
	}
	return n, nil
}
