package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// LastFinished returns the newest finished_at of a (table, policy).
func (s *postgresStore) LastFinished(ctx context.Context, tableID, policyID int64) (time.Time, error) {
	var at *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT max(finished_at) FROM table_maintenance_job
		WHERE table_id = $1 AND policy_id = $2 AND finished_at IS NOT NULL`, tableID, policyID).Scan(&at)
	if err != nil {
		return time.Time{}, pgError("last finished", err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return at.UTC(), nil
}

// TableInFlightJobs returns one table's in-flight rows.
func (s *postgresStore) TableInFlightJobs(ctx context.Context, tableID int64) ([]Job, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+pgJobCols+` FROM table_maintenance_job
		WHERE finished_at IS NULL AND table_id = $1 ORDER BY id`, tableID)
	if err != nil {
		return nil, pgError("list in-flight jobs of table", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanPgJob(r) })
	if err != nil {
		return nil, pgError("list in-flight jobs of table", err)
	}
	return jobs, nil
}

// ListInFlightJobs pages through the in-flight rows of all tables.
func (s *postgresStore) ListInFlightJobs(ctx context.Context, afterID int64, limit int) ([]Job, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+pgJobCols+` FROM table_maintenance_job
		WHERE finished_at IS NULL AND id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, pgError("list in-flight jobs", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanPgJob(r) })
	if err != nil {
		return nil, pgError("list in-flight jobs", err)
	}
	return jobs, nil
}

// PurgeJobs deletes finished rows by age and count per table.
func (s *postgresStore) PurgeJobs(ctx context.Context, p Purge) (int64, error) {
	if err := validatePurge(p); err != nil {
		return 0, err
	}
	var before *time.Time
	if !p.FinishedBefore.IsZero() {
		before = &p.FinishedBefore
	}
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM table_maintenance_job WHERE id IN (
			SELECT id FROM (
				SELECT id, finished_at,
					row_number() OVER (PARTITION BY table_id ORDER BY finished_at DESC, id DESC) AS table_rank,
					row_number() OVER (PARTITION BY table_id, policy_id ORDER BY finished_at DESC, id DESC) AS policy_rank
				FROM table_maintenance_job WHERE finished_at IS NOT NULL
			) r
			WHERE policy_rank > 1
			  AND (($1::timestamptz IS NOT NULL AND finished_at < $1::timestamptz) OR ($2::int > 0 AND table_rank > $2::int))
		)`, before, p.KeepPerTable)
	if err != nil {
		return 0, pgError("purge jobs", err)
	}
	return tag.RowsAffected(), nil
}
