package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// QueryJobs returns the job rows q keeps, newest first.
func (s *postgresStore) QueryJobs(ctx context.Context, q JobQuery) ([]Job, error) {
	if err := validateJobQuery(q); err != nil {
		return nil, err
	}
	query, args := jobQuerySQL(pgJobCols, pgPlaceholder, func(t time.Time) any { return t }, q)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, pgError("query jobs", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanPgJob(r) })
	if err != nil {
		return nil, pgError("query jobs", err)
	}
	return jobs, nil
}

// ListTableStatus returns a page of tables with their last job and latest
// metrics.
func (s *postgresStore) ListTableStatus(ctx context.Context, afterID int64, limit int) ([]TableStatus, error) {
	if err := validateQueryLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, tablePageSQL(pgTableCols, pgPlaceholder), afterID, limit)
	if err != nil {
		return nil, pgError("list tables", err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) { return scanPgTable(r) })
	if err != nil {
		return nil, pgError("list tables", err)
	}
	if len(tables) == 0 {
		return []TableStatus{}, nil
	}
	last := tables[len(tables)-1].ID
	rows, err = s.pool.Query(ctx, lastJobsSQL(pgJobCols, pgPlaceholder), afterID, last)
	if err != nil {
		return nil, pgError("list tables: last jobs", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanPgJob(r) })
	if err != nil {
		return nil, pgError("list tables: last jobs", err)
	}
	rows, err = s.pool.Query(ctx, latestMetricsSQL(pgPlaceholder), afterID, last)
	if err != nil {
		return nil, pgError("list tables: metrics", err)
	}
	metrics, err := pgx.CollectRows(rows, scanPgMetrics)
	if err != nil {
		return nil, pgError("list tables: metrics", err)
	}
	return joinTableStatus(tables, jobs, metrics), nil
}
