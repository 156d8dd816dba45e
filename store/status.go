package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// KindCount is the queue depth of one task kind.
type KindCount struct {
	Name string `json:"kind"`
	// Total is the number of rows; Due those whose execution time has come
	// and that nobody holds; Picked those a node holds.
	Total  int `json:"total"`
	Due    int `json:"due"`
	Picked int `json:"picked"`
}

// TaskCounts returns the queue depth per task kind at now, by kind name.
func (s *postgresStore) TaskCounts(ctx context.Context, now time.Time) ([]KindCount, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT task_name, count(*), count(*) FILTER (WHERE NOT picked AND execution_time <= $1), count(*) FILTER (WHERE picked)
		FROM scheduled_tasks GROUP BY task_name ORDER BY task_name`, orNow(now, s.now))
	if err != nil {
		return nil, pgError("task counts", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (KindCount, error) {
		var k KindCount
		err := r.Scan(&k.Name, &k.Total, &k.Due, &k.Picked)
		return k, err
	})
	if err != nil {
		return nil, pgError("task counts", err)
	}
	return out, nil
}

// TaskCounts returns the queue depth per task kind at now, by kind name.
func (s *sqliteStore) TaskCounts(ctx context.Context, now time.Time) ([]KindCount, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT task_name, count(*), coalesce(sum(NOT picked AND execution_time <= ?1), 0), coalesce(sum(picked), 0)
		FROM scheduled_tasks GROUP BY task_name ORDER BY task_name`, sqliteTime(orNow(now, s.now)))
	if err != nil {
		return nil, sqliteError("task counts", err)
	}
	defer rows.Close()
	var out []KindCount
	for rows.Next() {
		var k KindCount
		if err := rows.Scan(&k.Name, &k.Total, &k.Due, &k.Picked); err != nil {
			return nil, sqliteError("task counts", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, sqliteError("task counts", err)
	}
	return out, nil
}

// LatestJobs returns the newest job row of up to limit tables, newest
// first: what `status` shows as each table's last run.
func (s *postgresStore) LatestJobs(ctx context.Context, limit int) ([]Job, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+jobCols+` FROM (
			SELECT DISTINCT ON (table_id) * FROM table_maintenance_job ORDER BY table_id, id DESC
		) j ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, pgError("latest jobs", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanJob(r) })
	if err != nil {
		return nil, pgError("latest jobs", err)
	}
	return jobs, nil
}

// LatestJobs returns the newest job row of up to limit tables.
func (s *sqliteStore) LatestJobs(ctx context.Context, limit int) ([]Job, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	jobs, err := collect(ctx, sqliteQ{s.r}, scanJob, `
		SELECT `+jobCols+` FROM table_maintenance_job
		WHERE id IN (SELECT max(id) FROM table_maintenance_job GROUP BY table_id)
		ORDER BY id DESC LIMIT ?1`, limit)
	if err != nil {
		return nil, sqliteError("latest jobs", err)
	}
	return jobs, nil
}
