package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
)

// statusOutput is `status --json`.
type statusOutput struct {
	Queue    []store.KindCount `json:"queue"`
	InFlight []statusJob       `json:"in_flight"`
	Tables   []statusJob       `json:"tables"`
}

// statusJob is one job row with its table's name and, for finished rows,
// the metrics recorded at its before and after snapshots.
type statusJob struct {
	ID            int64           `json:"id"`
	JobID         string          `json:"job_id,omitempty"`
	Table         string          `json:"table"`
	PolicyID      int64           `json:"policy_id"`
	Types         []string        `json:"types"`
	Trigger       string          `json:"trigger"`
	Status        string          `json:"status"`
	Error         string          `json:"error,omitempty"`
	BeforeSnap    *int64          `json:"before_snapshot_id"`
	AfterSnap     *int64          `json:"after_snapshot_id"`
	CreatedAt     time.Time       `json:"created_at"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
	MetricsBefore json.RawMessage `json:"metrics_before,omitempty"`
	MetricsAfter  json.RawMessage `json:"metrics_after,omitempty"`
}

func runStatus(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "status", env.Stderr)
	var (
		db     string
		asJSON bool
		limit  int
	)
	fs.StringVar(&db, "db", dbFromEnv(), "database URL: postgres://… or sqlite://PATH (env TMS_DB)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.IntVar(&limit, "tables", 50, "show the last run of at most this many tables (most recent first)")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	if limit < 1 {
		return cli.Usagef("--tables must be positive, got %d", limit)
	}
	st, err := store.Open(ctx, db, env.Log)
	if err != nil {
		return classify(err)
	}
	defer st.Close()

	var out statusOutput
	if out.Queue, err = st.TaskCounts(ctx, time.Time{}); err != nil {
		return err
	}
	flight, err := st.ListInFlightJobs(ctx, 0, 1000)
	if err != nil {
		return err
	}
	latest, err := st.LatestJobs(ctx, limit)
	if err != nil {
		return err
	}
	names := map[int64]string{}
	describe := func(j store.Job, withMetrics bool) (statusJob, error) {
		name, ok := names[j.TableID]
		if !ok {
			t, err := st.GetTable(ctx, j.TableID)
			if err != nil {
				return statusJob{}, err
			}
			name = t.Catalog + "." + t.Namespace + "." + t.Name
			names[j.TableID] = name
		}
		s := statusJob{ID: j.ID, JobID: j.JobID, Table: name, PolicyID: j.PolicyID, Types: j.Types, Trigger: string(j.Trigger),
			Status: string(j.Status), Error: j.Error, BeforeSnap: j.BeforeSnapshotID, AfterSnap: j.AfterSnapshotID, CreatedAt: j.CreatedAt}
		if !j.InFlight() {
			at := j.FinishedAt
			s.FinishedAt = &at
		}
		if withMetrics && (j.BeforeSnapshotID != nil || j.AfterSnapshotID != nil) {
			ms, err := st.ListSnapshotMetrics(ctx, j.TableID)
			if err != nil {
				return statusJob{}, err
			}
			for _, m := range ms {
				if j.BeforeSnapshotID != nil && m.SnapshotID == *j.BeforeSnapshotID {
					s.MetricsBefore = m.Value
				}
				if j.AfterSnapshotID != nil && m.SnapshotID == *j.AfterSnapshotID {
					s.MetricsAfter = m.Value
				}
			}
		}
		return s, nil
	}
	for _, j := range flight {
		s, err := describe(j, false)
		if err != nil {
			return err
		}
		out.InFlight = append(out.InFlight, s)
	}
	for _, j := range latest {
		s, err := describe(j, true)
		if err != nil {
			return err
		}
		out.Tables = append(out.Tables, s)
	}
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return printStatus(env, out)
}

// printStatus prints the three sections as tables.
func printStatus(env cli.Env, out statusOutput) error {
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tTOTAL\tDUE\tPICKED")
	for _, k := range out.Queue {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", k.Name, k.Total, k.Due, k.Picked)
	}
	if len(out.Queue) == 0 {
		fmt.Fprintln(tw, "(empty)\t\t\t")
	}
	fmt.Fprintln(tw, "\t\t\t")
	fmt.Fprintln(tw, "IN FLIGHT\tTABLE\tTYPES\tSTATUS\tSINCE\tEXTERNAL ID")
	for _, j := range out.InFlight {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Table, strings.Join(j.Types, ","), j.Status, j.CreatedAt.Format(time.RFC3339), j.JobID)
	}
	if len(out.InFlight) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t\t\t")
	}
	fmt.Fprintln(tw, "\t\t\t\t\t")
	fmt.Fprintln(tw, "TABLE\tLAST JOB\tTRIGGER\tTYPES\tSTATUS\tFILES\tBYTES\tSNAPSHOT")
	for _, j := range out.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", j.Table, j.ID, j.Trigger, strings.Join(j.Types, ","), j.Status,
			beforeAfter(j, "data-file-number"), beforeAfter(j, "total-file-size"), snapPair(j))
	}
	return tw.Flush()
}

// beforeAfter renders metric key as "before → after" from the job's rows.
func beforeAfter(j statusJob, key string) string {
	get := func(raw json.RawMessage) string {
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil || m[key] == nil {
			return "?"
		}
		return fmt.Sprint(m[key])
	}
	if j.MetricsBefore == nil && j.MetricsAfter == nil {
		return "-"
	}
	return get(j.MetricsBefore) + " → " + get(j.MetricsAfter)
}

func snapPair(j statusJob) string {
	s := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return s(j.BeforeSnap) + " → " + s(j.AfterSnap)
}
