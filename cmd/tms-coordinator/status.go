package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
)

// statusOutput is `status --json`.
type statusOutput struct {
	Nodes    []statusNode      `json:"nodes"`
	Queue    []store.KindCount `json:"queue"`
	InFlight []statusJob       `json:"in_flight"`
	NextDue  []statusDue       `json:"next_due"`
	Tables   []statusJob       `json:"tables"`
	// DeadNodeAfter is the heartbeat age that makes a node dead here.
	DeadNodeAfter string `json:"dead_node_after"`
	// Unconfigured are the attachments whose catalog no live node has
	// (they maintain nothing); null when no live node said its catalogs.
	Unconfigured *[]admin.AttachmentDoc `json:"unconfigured_attachments"`
}

// statusNode is a coordinator node and whether it is alive.
type statusNode struct {
	ID            string    `json:"id"`
	StartedAt     time.Time `json:"started_at"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Alive         bool      `json:"alive"`
}

// statusDue is a maintenance task row and when it is due: a policy's next
// instant (policy-expand), a (table, policy) waiting to run (cron-job) or a
// table's commit-job.
type statusDue struct {
	Kind     string    `json:"kind"`
	Instance string    `json:"instance"`
	Table    string    `json:"table,omitempty"`
	Policy   string    `json:"policy,omitempty"`
	Due      time.Time `json:"due"`
	Picked   bool      `json:"picked"`
}

// statusJob is one job row with its table's name and, for finished rows,
// the metrics recorded at its before and after snapshots.
type statusJob struct {
	ID         int64      `json:"id"`
	JobID      string     `json:"job_id,omitempty"`
	Submitter  string     `json:"submitter,omitempty"`
	Table      string     `json:"table"`
	PolicyID   int64      `json:"policy_id"`
	Types      []string   `json:"types"`
	Trigger    string     `json:"trigger"`
	Status     string     `json:"status"`
	Error      string     `json:"error,omitempty"`
	BeforeSnap *int64     `json:"before_snapshot_id"`
	AfterSnap  *int64     `json:"after_snapshot_id"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Node is the coordinator node that created the row; NodeDead marks an
	// in-flight row whose node is dead or gone (the reconciler closes it).
	Node          string          `json:"node,omitempty"`
	NodeDead      bool            `json:"node_dead,omitempty"`
	MetricsBefore json.RawMessage `json:"metrics_before,omitempty"`
	MetricsAfter  json.RawMessage `json:"metrics_after,omitempty"`
}

func runStatus(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "status", env.Stderr)
	var (
		db        string
		asJSON    bool
		limit     int
		dueRows   int
		deadAfter time.Duration
	)
	fs.StringVar(&db, "db", dbFromEnv(), "database URL: postgres://… or sqlite://PATH (env TMS_DB)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.IntVar(&limit, "tables", 50, "show the last run of at most this many tables (most recent first)")
	fs.IntVar(&dueRows, "due", 20, "show at most this many maintenance rows due next")
	fs.DurationVar(&deadAfter, "dead-after", scheduler.DefaultHeartbeatInterval*scheduler.DefaultMissedHeartbeatsLimit,
		"a node whose heartbeat is older is dead (serve's heartbeat interval × missed-heartbeats limit)")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	switch {
	case limit < 1:
		return cli.Usagef("--tables must be positive, got %d", limit)
	case dueRows < 0:
		return cli.Usagef("--due must not be negative, got %d", dueRows)
	case deadAfter <= 0:
		return cli.Usagef("--dead-after must be positive, got %s", deadAfter)
	}
	st, err := store.Open(ctx, db, env.Log)
	if err != nil {
		return classify(err)
	}
	defer st.Close()

	now := time.Now()
	out := statusOutput{DeadNodeAfter: deadAfter.String()}
	if out.Queue, err = st.TaskCounts(ctx, time.Time{}); err != nil {
		return err
	}
	nodes, err := st.ListNodes(ctx)
	if err != nil {
		return err
	}
	alive := map[string]bool{}
	for _, n := range nodes {
		alive[n.ID] = now.Sub(n.LastHeartbeat) <= deadAfter
		out.Nodes = append(out.Nodes, statusNode{ID: n.ID, StartedAt: n.StartedAt, LastHeartbeat: n.LastHeartbeat, Alive: alive[n.ID]})
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
		s := statusJob{ID: j.ID, JobID: j.JobID, Submitter: j.Submitter, Table: name, PolicyID: j.PolicyID, Types: j.Types, Trigger: string(j.Trigger),
			Status: string(j.Status), Error: j.Error, BeforeSnap: j.BeforeSnapshotID, AfterSnap: j.AfterSnapshotID, CreatedAt: j.CreatedAt,
			Node: j.Node}
		if !j.InFlight() {
			at := j.FinishedAt
			s.FinishedAt = &at
		} else if j.Node != "" && !alive[j.Node] {
			s.NodeDead = true
		}
		if withMetrics {
			var err error
			if s.MetricsBefore, s.MetricsAfter, err = jobMetrics(ctx, st, j); err != nil {
				return statusJob{}, err
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
	ops, err := admin.NewPolicyOps(st, nil)
	if err != nil {
		return err
	}
	catalogs := admin.LiveNodeCatalogs(st, deadAfter, time.Now)
	ops.CheckCatalogs(catalogs)
	if _, known, err := catalogs(ctx); err != nil {
		return err
	} else if known {
		docs, err := ops.List(ctx)
		if err != nil {
			return err
		}
		bad := []admin.AttachmentDoc{}
		for _, d := range docs {
			for _, a := range d.Attachments {
				if a.CatalogConfigured != nil && !*a.CatalogConfigured {
					bad = append(bad, a)
				}
			}
		}
		out.Unconfigured = &bad
	}
	if out.NextDue, err = nextDue(ctx, st, dueRows, func(id int64) string {
		if _, ok := names[id]; !ok {
			if t, err := st.GetTable(ctx, id); err == nil {
				names[id] = t.Catalog + "." + t.Namespace + "." + t.Name
			}
		}
		return names[id]
	}); err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return printStatus(env, out)
}

// nextDueScan is how many rows of each maintenance kind nextDue reads.
const nextDueScan = 5000

// nextDue returns the n maintenance rows due soonest (of the first
// nextDueScan rows of each kind): each policy's next instant, the
// (table, policy) rows waiting to run and the tables' commit-jobs.
func nextDue(ctx context.Context, st store.Store, n int, tableName func(int64) string) ([]statusDue, error) {
	policyNames := map[int64]string{}
	policyName := func(id int64) string {
		if _, ok := policyNames[id]; !ok {
			if p, err := st.GetPolicyByID(ctx, id); err == nil {
				policyNames[id] = p.Name
			}
		}
		return policyNames[id]
	}
	var out []statusDue
	for _, kind := range []string{flow.KindPolicyExpand, flow.KindCronJob, flow.KindCommitJob} {
		ts, err := st.ListTasks(ctx, kind, nextDueScan)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			d := statusDue{Kind: kind, Instance: t.Instance, Due: t.ExecutionTime, Picked: t.Picked}
			var tableID, policyID int64
			switch kind {
			case flow.KindPolicyExpand:
				policyID, _ = strconv.ParseInt(t.Instance, 10, 64)
			case flow.KindCronJob:
				_, _ = fmt.Sscanf(t.Instance, "table:%d:%d", &tableID, &policyID)
			case flow.KindCommitJob:
				tableID, _ = strconv.ParseInt(t.Instance, 10, 64)
			}
			if tableID != 0 {
				d.Table = tableName(tableID)
			}
			if policyID != 0 {
				d.Policy = policyName(policyID)
			}
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b statusDue) int { return a.Due.Compare(b.Due) })
	return out[:min(n, len(out))], nil
}

// printStatus prints the sections as tables; an empty one says (none).
func printStatus(env cli.Env, out statusOutput) error {
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	now := time.Now()
	fmt.Fprintf(tw, "NODE\tSTARTED\tLAST HEARTBEAT\tSTATE\n")
	for _, n := range out.Nodes {
		state := "alive"
		if !n.Alive {
			state = "DEAD (no heartbeat for " + out.DeadNodeAfter + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s ago\t%s\n", n.ID, n.StartedAt.Format(time.RFC3339), now.Sub(n.LastHeartbeat).Round(time.Second), state)
	}
	if len(out.Nodes) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t")
	}
	tw = nextSection(tw, env.Stdout)
	fmt.Fprintln(tw, "QUEUE\tTOTAL\tDUE\tPICKED")
	for _, k := range out.Queue {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", k.Name, k.Total, k.Due, k.Picked)
	}
	if len(out.Queue) == 0 {
		fmt.Fprintln(tw, "(empty)\t\t\t")
	}
	tw = nextSection(tw, env.Stdout)
	fmt.Fprintln(tw, "IN FLIGHT\tTABLE\tTYPES\tSTATUS\tSINCE\tNODE\tSUBMITTER\tEXTERNAL ID")
	for _, j := range out.InFlight {
		node := cmp.Or(j.Node, "-")
		if j.NodeDead {
			node += " (DEAD: the reconciler closes it)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Table, strings.Join(j.Types, ","), j.Status,
			j.CreatedAt.Format(time.RFC3339), node, cmp.Or(j.Submitter, "-"), cmp.Or(j.JobID, "-"))
	}
	if len(out.InFlight) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t\t\t\t\t")
	}
	tw = nextSection(tw, env.Stdout)
	fmt.Fprintln(tw, "NEXT DUE\tKIND\tTABLE\tPOLICY\tSTATE")
	for _, d := range out.NextDue {
		state := "due in " + d.Due.Sub(now).Round(time.Second).String()
		switch {
		case d.Picked:
			state = "running its handler"
		case !d.Due.After(now):
			state = "due now"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Due.Format(time.RFC3339), d.Kind, cmp.Or(d.Table, "-"), cmp.Or(d.Policy, "-"), state)
	}
	if len(out.NextDue) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t\t")
	}
	tw = nextSection(tw, env.Stdout)
	fmt.Fprintln(tw, "TABLE\tLAST JOB\tTRIGGER\tTYPES\tSTATUS\tFILES\tBYTES\tSNAPSHOT")
	var failed []statusJob
	for _, j := range out.Tables {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", j.Table, j.ID, j.Trigger, strings.Join(j.Types, ","), j.Status,
			beforeAfter(j, "data-file-number", nil), beforeAfter(j, "total-file-size", cli.HumanBytes), snapPair(j))
		if j.Error != "" {
			failed = append(failed, j)
		}
	}
	if len(out.Tables) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t\t\t\t\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case out.Unconfigured == nil:
		fmt.Fprintln(env.Stdout, "\nATTACHMENTS TO A CATALOG NO NODE HAS: not known (no live node has said which catalogs it has)")
	case len(*out.Unconfigured) > 0:
		fmt.Fprintln(env.Stdout, "\nATTACHMENTS TO A CATALOG NO NODE HAS (they maintain nothing)")
		for _, a := range *out.Unconfigured {
			fmt.Fprintf(env.Stdout, "  policy %s on %s %s\n", a.Policy, a.Level, a.Object)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintln(env.Stdout, "\nWHY (last jobs that did not succeed)")
		for _, j := range failed {
			fmt.Fprintf(env.Stdout, "  job %d %s %s: %s\n", j.ID, j.Table, j.Status, j.Error)
		}
	}
	return nil
}

// nextSection flushes one section's table and starts the next after a
// blank line, so each section sizes its own columns.
func nextSection(tw *tabwriter.Writer, w io.Writer) *tabwriter.Writer {
	_ = tw.Flush()
	fmt.Fprintln(w)
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// beforeAfter renders metric key as "before → after" from the job's rows,
// each value through format when it is a number and format is not nil.
func beforeAfter(j statusJob, key string, format func(float64) string) string {
	get := func(raw json.RawMessage) string {
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil || m[key] == nil {
			return "?"
		}
		if f, ok := m[key].(float64); ok && format != nil {
			return format(f)
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
