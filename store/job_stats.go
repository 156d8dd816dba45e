package store

import (
	"context"
	"database/sql"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// This file holds JobStats, the ledger counts the coordinator's metrics read
// at scrape time.

// OutcomeCount is how many times finished job rows ended one maintenance
// type with one outcome.
type OutcomeCount struct {
	// Type is the maintenance type (compaction, manifest-rewrite, …).
	Type string
	// Outcome is the per-type outcome the runner recorded (done, skipped,
	// ended-drift, conflict, failed) or, for a row closed without per-type
	// outcomes (by the reconciler or a cancel), the row's status for each
	// type of its chain (lost, cancelled, failed …).
	Outcome string
	Count   int64
}

// JobStats is what Store.JobStats counts.
type JobStats struct {
	// InFlight is the number of job rows not yet finished.
	InFlight int64
	// Outcomes are the finished rows' outcomes, by type then outcome.
	Outcomes []OutcomeCount
}

// outcomeTally sums OutcomeCounts by (type, outcome).
type outcomeTally map[[2]string]int64

// addChain counts n rows of the comma-joined chain types as outcome.
func (t outcomeTally) addChain(types, outcome string, n int64) {
	for typ := range strings.SplitSeq(types, ",") {
		t[[2]string{typ, outcome}] += n
	}
}

func (t outcomeTally) sorted() []OutcomeCount {
	out := make([]OutcomeCount, 0, len(t))
	for k, n := range t {
		out = append(out, OutcomeCount{Type: k[0], Outcome: k[1], Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].Outcome < out[j].Outcome
	})
	return out
}

// The three statements of JobStats. Rows with per-type outcomes are counted
// per array element; rows without are grouped by chain and status, and the
// chain is split in Go (the same on both backends).
const (
	jobStatsInFlight = `SELECT count(*) FROM table_maintenance_job WHERE finished_at IS NULL`
	jobStatsByStatus = `SELECT types, status, count(*) FROM table_maintenance_job
		WHERE finished_at IS NOT NULL AND outcomes IS NULL GROUP BY types, status`
	pgJobStatsOutcomes = `SELECT e->>'type', e->>'outcome', count(*)
		FROM table_maintenance_job j CROSS JOIN LATERAL jsonb_array_elements(j.outcomes) e
		WHERE j.finished_at IS NOT NULL AND jsonb_typeof(j.outcomes) = 'array'
			AND e->>'type' IS NOT NULL AND e->>'outcome' IS NOT NULL
		GROUP BY 1, 2`
	sqliteJobStatsOutcomes = `SELECT json_extract(e.value, '$.type'), json_extract(e.value, '$.outcome'), count(*)
		FROM table_maintenance_job j, json_each(j.outcomes) e
		WHERE j.finished_at IS NOT NULL AND json_type(j.outcomes) = 'array'
			AND json_extract(e.value, '$.type') IS NOT NULL AND json_extract(e.value, '$.outcome') IS NOT NULL
		GROUP BY 1, 2`
)

// JobStats counts in-flight rows and finished rows' outcomes.
func (s *postgresStore) JobStats(ctx context.Context) (JobStats, error) {
	var st JobStats
	if err := s.pool.QueryRow(ctx, jobStatsInFlight).Scan(&st.InFlight); err != nil {
		return JobStats{}, pgError("job stats", err)
	}
	tally := outcomeTally{}
	for i, q := range []string{pgJobStatsOutcomes, jobStatsByStatus} {
		rows, err := s.pool.Query(ctx, q)
		if err != nil {
			return JobStats{}, pgError("job stats", err)
		}
		var a, b string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&a, &b, &n}, func() error {
			if i == 0 {
				tally[[2]string{a, b}] += n
			} else {
				tally.addChain(a, b, n)
			}
			return nil
		})
		if err != nil {
			return JobStats{}, pgError("job stats", err)
		}
	}
	st.Outcomes = tally.sorted()
	return st, nil
}

// JobStats counts in-flight rows and finished rows' outcomes.
func (s *sqliteStore) JobStats(ctx context.Context) (JobStats, error) {
	var st JobStats
	if err := s.r.QueryRowContext(ctx, jobStatsInFlight).Scan(&st.InFlight); err != nil {
		return JobStats{}, sqliteError("job stats", err)
	}
	tally := outcomeTally{}
	for i, q := range []string{sqliteJobStatsOutcomes, jobStatsByStatus} {
		if err := sqliteEachRow(ctx, s.r, q, func(a, b string, n int64) {
			if i == 0 {
				tally[[2]string{a, b}] += n
			} else {
				tally.addChain(a, b, n)
			}
		}); err != nil {
			return JobStats{}, sqliteError("job stats", err)
		}
	}
	st.Outcomes = tally.sorted()
	return st, nil
}

// sqliteEachRow calls fn with each (text, text, count) row of q.
func sqliteEachRow(ctx context.Context, db *sql.DB, q string, fn func(a, b string, n int64)) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a, b string
		var n int64
		if err := rows.Scan(&a, &b, &n); err != nil {
			return err
		}
		fn(a, b, n)
	}
	return rows.Err()
}
