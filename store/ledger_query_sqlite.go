package store

import (
	"context"
	"time"
)

// QueryJobs returns the job rows q keeps, newest first.
func (s *sqliteStore) QueryJobs(ctx context.Context, q JobQuery) ([]Job, error) {
	if err := validateJobQuery(q); err != nil {
		return nil, err
	}
	query, args := jobQuerySQL(sqliteJobCols, sqlitePlaceholder, func(t time.Time) any { return sqliteTime(t) }, q)
	return s.queryJobs(ctx, "query jobs", query, args...)
}

// ListTableStatus returns a page of tables with their last job and latest
// metrics.
func (s *sqliteStore) ListTableStatus(ctx context.Context, afterID int64, limit int) ([]TableStatus, error) {
	if err := validateQueryLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, tablePageSQL(sqliteTableCols, sqlitePlaceholder), afterID, limit)
	tables, err := collectSQLite(rows, err, scanSQLiteTableRow)
	if err != nil {
		return nil, sqliteError("list tables", err)
	}
	if len(tables) == 0 {
		return []TableStatus{}, nil
	}
	last := tables[len(tables)-1].ID
	jobs, err := s.queryJobs(ctx, "list tables: last jobs", lastJobsSQL(sqliteJobCols, sqlitePlaceholder), afterID, last)
	if err != nil {
		return nil, err
	}
	rows, err = s.r.QueryContext(ctx, latestMetricsSQL(sqlitePlaceholder), afterID, last)
	metrics, err := collectSQLite(rows, err, scanSQLiteMetrics)
	if err != nil {
		return nil, sqliteError("list tables: metrics", err)
	}
	return joinTableStatus(tables, jobs, metrics), nil
}
