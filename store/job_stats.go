package store

import (
	"context"
	"sort"
	"strings"
)

// This file holds JobStats, the ledger counts the coordinator's metrics read
// at scrape time, written once for both backends on sqlStore's seam
// (sqlstore.go).

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

// The shared statements of JobStats; the third, the per-type outcomes, is
// each backend's own (dialectStmts.jobStatsOutcomes). Rows with per-type
// outcomes are counted per array element; rows without are grouped by
// chain and status, and the chain is split in Go (the same on both
// backends).
const (
	jobStatsInFlight = `SELECT count(*) FROM table_maintenance_job WHERE finished_at IS NULL`
	jobStatsByStatus = `SELECT types, status, count(*) FROM table_maintenance_job
		WHERE finished_at IS NOT NULL AND outcomes IS NULL GROUP BY types, status`
)

// JobStats counts in-flight rows and finished rows' outcomes.
func (s *sqlStore) JobStats(ctx context.Context) (JobStats, error) {
	var st JobStats
	if err := s.b.read().queryRow(ctx, jobStatsInFlight).Scan(&st.InFlight); err != nil {
		return JobStats{}, s.b.wrap("job stats", err)
	}
	tally := outcomeTally{}
	for i, q := range []string{s.b.stmts().jobStatsOutcomes, jobStatsByStatus} {
		err := s.b.read().query(ctx, func(row scanner) error {
			var a, b string
			var n int64
			if err := row.Scan(&a, &b, &n); err != nil {
				return err
			}
			if i == 0 {
				tally[[2]string{a, b}] += n
			} else {
				tally.addChain(a, b, n)
			}
			return nil
		}, q)
		if err != nil {
			return JobStats{}, s.b.wrap("job stats", err)
		}
	}
	st.Outcomes = tally.sorted()
	return st, nil
}
