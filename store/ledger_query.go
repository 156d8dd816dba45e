package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// This file holds the ledger reads of the HTTP API: job rows filtered by
// table, status and creation time, and the registered tables with their
// last job and latest metrics. LedgerQueries is implemented here once for
// both backends, on sqlStore's seam (sqlstore.go); Store embeds it.

// MaxQueryLimit bounds one QueryJobs or ListTableStatus page.
const MaxQueryLimit = 1000

// JobQuery filters job rows. Zero fields do not filter.
type JobQuery struct {
	// TableID keeps the rows of one table; 0 means every table.
	TableID int64
	// Statuses keeps rows in one of these statuses; empty means any.
	Statuses []JobStatus
	// InFlight, when set, keeps only in-flight rows (true) or only finished
	// ones (false).
	InFlight *bool
	// Since keeps rows created at or after it; Until rows created before it.
	Since, Until time.Time
	// BeforeID keeps rows with a smaller id: the cursor of the next page
	// (the last id of the previous one). 0 starts at the newest row.
	BeforeID int64
	// Limit is the page size: 1 to MaxQueryLimit.
	Limit int
}

// TableStatus is a registered table with the last thing TMS did to it and
// the last thing it measured.
type TableStatus struct {
	Table
	// LastJob is the table's newest job row (by id), nil if none.
	LastJob *Job
	// Metrics is the table's most recently recorded metrics row (by
	// recorded_at, then policy and snapshot id, the last of
	// ListSnapshotMetrics), nil if none.
	Metrics *SnapshotMetrics
}

// LedgerQueries is the read API for operators.
type LedgerQueries interface {
	// QueryJobs returns the job rows q keeps, newest first (by id).
	// ErrInvalidArgument for a limit out of range, an unknown status or
	// Until not after Since.
	QueryJobs(ctx context.Context, q JobQuery) ([]Job, error)
	// ListTables returns up to limit (1 to MaxQueryLimit) registered
	// tables with id > afterID, ascending by id, every incarnation its own
	// row.
	ListTables(ctx context.Context, afterID int64, limit int) ([]Table, error)
	// ListTableStatus returns up to limit (1 to MaxQueryLimit) registered
	// tables with id > afterID, ascending by id, every incarnation its own
	// row, with their last job and latest metrics.
	ListTableStatus(ctx context.Context, afterID int64, limit int) ([]TableStatus, error)
	// ListTableHealth returns one page of the registered tables, filtered
	// and ordered by q (unhealthy first by default), with their latest
	// metrics, last job and newest job of each maintenance type
	// (table_health.go).
	ListTableHealth(ctx context.Context, q TableHealthQuery) (TableHealthPage, error)
}

// Compile-time checks that both backends implement LedgerQueries.
var (
	_ LedgerQueries = (*postgresStore)(nil)
	_ LedgerQueries = (*sqliteStore)(nil)
)

// JobStatuses returns the statuses a job row may have, in lifecycle order.
func JobStatuses() []JobStatus {
	return []JobStatus{StatusPending, StatusRunning, StatusSucceeded, StatusFailed, StatusSkipped, StatusCancelled, StatusLost}
}

func validateQueryLimit(limit int) error {
	if limit <= 0 || limit > MaxQueryLimit {
		return fmt.Errorf("%w: limit must be between 1 and %d, got %d", ErrInvalidArgument, MaxQueryLimit, limit)
	}
	return nil
}

func validateJobQuery(q JobQuery) error {
	if err := validateQueryLimit(q.Limit); err != nil {
		return err
	}
	for _, s := range q.Statuses {
		if !slices.Contains(JobStatuses(), s) {
			return fmt.Errorf("%w: unknown job status %q", ErrInvalidArgument, s)
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return fmt.Errorf("%w: until (%s) must be after since (%s)", ErrInvalidArgument,
			q.Until.UTC().Format(time.RFC3339Nano), q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.TableID < 0 || q.BeforeID < 0 {
		return fmt.Errorf("%w: table and cursor ids must not be negative", ErrInvalidArgument)
	}
	return nil
}

// jobQuerySQL renders q as a query of jobCols; p renders placeholder i and
// timeArg a time as the backend binds it.
func jobQuerySQL(p func(int) string, timeArg func(time.Time) any, q JobQuery) (string, []any) {
	var where []string
	var args []any
	bind := func(v any) string {
		args = append(args, v)
		return p(len(args))
	}
	if q.TableID != 0 {
		where = append(where, "table_id = "+bind(q.TableID))
	}
	if len(q.Statuses) > 0 {
		ph := make([]string, len(q.Statuses))
		for i, s := range q.Statuses {
			ph[i] = bind(string(s))
		}
		where = append(where, "status IN ("+strings.Join(ph, ", ")+")")
	}
	if q.InFlight != nil && *q.InFlight {
		where = append(where, "finished_at IS NULL")
	} else if q.InFlight != nil {
		where = append(where, "finished_at IS NOT NULL")
	}
	if !q.Since.IsZero() {
		where = append(where, "created_at >= "+bind(timeArg(utc(q.Since))))
	}
	if !q.Until.IsZero() {
		where = append(where, "created_at < "+bind(timeArg(utc(q.Until))))
	}
	if q.BeforeID > 0 {
		where = append(where, "id < "+bind(q.BeforeID))
	}
	query := "SELECT " + jobCols + " FROM table_maintenance_job"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	return query + " ORDER BY id DESC LIMIT " + bind(q.Limit), args
}

// The three queries of ListTableStatus, over one page of tables: the page
// is a contiguous id range (after, last], so the last jobs and latest
// metrics are read for that range, not table by table. p renders
// placeholder i (1: after id, 2: limit or last id).
func tablePageSQL(p func(int) string) string {
	return `SELECT ` + tableCols + ` FROM maintained_table WHERE id > ` + p(1) + ` ORDER BY id LIMIT ` + p(2)
}

func lastJobsSQL(p func(int) string) string {
	return `SELECT ` + jobCols + ` FROM table_maintenance_job WHERE id IN (
		SELECT max(id) FROM table_maintenance_job WHERE table_id > ` + p(1) + ` AND table_id <= ` + p(2) + ` GROUP BY table_id)`
}

func latestMetricsSQL(p func(int) string) string {
	return `SELECT table_id, policy_id, snapshot_id, metrics_value, recorded_at FROM table_latest_metrics
		WHERE table_id > ` + p(1) + ` AND table_id <= ` + p(2)
}

// joinTableStatus attaches jobs and metrics to their tables.
func joinTableStatus(tables []Table, jobs []Job, metrics []SnapshotMetrics) []TableStatus {
	out := make([]TableStatus, len(tables))
	at := make(map[int64]int, len(tables))
	for i, t := range tables {
		out[i].Table = t
		at[t.ID] = i
	}
	for _, j := range jobs {
		if i, ok := at[j.TableID]; ok {
			out[i].LastJob = &j
		}
	}
	for _, m := range metrics {
		if i, ok := at[m.TableID]; ok {
			out[i].Metrics = &m
		}
	}
	return out
}

// QueryJobs returns the job rows q keeps, newest first.
func (s *sqlStore) QueryJobs(ctx context.Context, q JobQuery) ([]Job, error) {
	if err := validateJobQuery(q); err != nil {
		return nil, err
	}
	query, args := jobQuerySQL(s.b.param, s.b.timeArg, q)
	jobs, err := collect(ctx, s.b.read(), scanJob, query, args...)
	if err != nil {
		return nil, s.b.wrap("query jobs", err)
	}
	return jobs, nil
}

// ListTables returns a page of tables by id.
func (s *sqlStore) ListTables(ctx context.Context, afterID int64, limit int) ([]Table, error) {
	if err := validateQueryLimit(limit); err != nil {
		return nil, err
	}
	tables, err := collect(ctx, s.b.read(), scanTable, tablePageSQL(s.b.param), afterID, limit)
	if err != nil {
		return nil, s.b.wrap("list tables", err)
	}
	return tables, nil
}

// ListTableStatus returns a page of tables with their last job and latest
// metrics (table_latest_metrics' row).
func (s *sqlStore) ListTableStatus(ctx context.Context, afterID int64, limit int) ([]TableStatus, error) {
	if err := validateQueryLimit(limit); err != nil {
		return nil, err
	}
	tables, err := s.ListTables(ctx, afterID, limit)
	if err != nil {
		return nil, err
	}
	r := s.b.read()
	if len(tables) == 0 {
		return []TableStatus{}, nil
	}
	last := tables[len(tables)-1].ID
	jobs, err := collect(ctx, r, scanJob, lastJobsSQL(s.b.param), afterID, last)
	if err != nil {
		return nil, s.b.wrap("list tables: last jobs", err)
	}
	metrics, err := collect(ctx, r, scanMetrics, latestMetricsSQL(s.b.param), afterID, last)
	if err != nil {
		return nil, s.b.wrap("list tables: metrics", err)
	}
	return joinTableStatus(tables, jobs, metrics), nil
}

// MetricsAt picks, out of a table's metrics rows ms (oldest first, as
// ListSnapshotMetrics returns them), the row of snapshot: the one of
// policyID if there is one, else the newest; nil when snapshot is nil or
// has no row. A job's metrics before and after are MetricsAt its before
// and after snapshot with its policy.
func MetricsAt(ms []SnapshotMetrics, snapshot *int64, policyID int64) *SnapshotMetrics {
	if snapshot == nil {
		return nil
	}
	var pick *SnapshotMetrics
	for i := range ms {
		m := &ms[i]
		if m.SnapshotID != *snapshot {
			continue
		}
		if pick == nil || pick.PolicyID != policyID {
			pick = m
		}
	}
	return pick
}
