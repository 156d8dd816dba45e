package store

import (
	"context"
	"time"
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
func (s *sqlStore) TaskCounts(ctx context.Context, now time.Time) ([]KindCount, error) {
	out, err := collect(ctx, s.b.read(), func(row scanner) (k KindCount, err error) {
		return k, row.Scan(&k.Name, &k.Total, &k.Due, &k.Picked)
	}, `
		SELECT task_name, count(*), count(*) FILTER (WHERE NOT picked AND execution_time <= `+s.b.param(1)+`), count(*) FILTER (WHERE picked)
		FROM scheduled_tasks GROUP BY task_name ORDER BY task_name`, s.b.timeArg(orNow(now, s.clock)))
	if err != nil {
		return nil, s.b.wrap("task counts", err)
	}
	return out, nil
}

// LatestJobs returns the newest job row of up to limit tables, newest
// first: what `status` shows as each table's last run.
func (s *sqlStore) LatestJobs(ctx context.Context, limit int) ([]Job, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	jobs, err := collect(ctx, s.b.read(), scanJob, s.b.stmts().latestJobs, limit)
	if err != nil {
		return nil, s.b.wrap("latest jobs", err)
	}
	return jobs, nil
}
