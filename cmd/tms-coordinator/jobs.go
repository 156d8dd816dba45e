package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
)

// `tms-coordinator jobs list|show|cancel` and `tables list|show` read the
// ledger directly (no serve node needed). jobs cancel closes the row in the
// database: its fence is bumped first, so a runner of it, wherever it runs
// or is queued, is fenced out at its next ledger write and commits nothing;
// to have a node's submitter stop a running runner at once, use the HTTP
// API (POST /v1/jobs/{id}/cancel) of the node that submitted it.

const jobsUsage = `usage: tms-coordinator jobs COMMAND [flags]

commands:
  list     [--table CATALOG.NAMESPACE.TABLE] [--status S,S] [--in-flight|--finished] [--since 24h] [--limit N]
  show     --id N     one job: status, reason, per-type outcomes, metrics before and after
  cancel   --id N     close an in-flight job cancelled (fence bumped first: its runner is fenced out)

every command takes --db (env TMS_DB) and --json
`

const tablesUsage = `usage: tms-coordinator tables COMMAND [flags]

commands:
  list     [--limit N]                      registered tables with their last job and latest metrics
  show     --table CATALOG.NAMESPACE.TABLE  every incarnation of the table with its job history

every command takes --db (env TMS_DB) and --json
`

// ledgerCmd is the shared setup of jobs and tables commands.
type ledgerCmd struct {
	env    cli.Env
	fs     *pflag.FlagSet
	db     string
	asJSON bool
}

func newLedgerCmd(env cli.Env, group, sub string) *ledgerCmd {
	c := &ledgerCmd{env: env, fs: cli.NewFlags("tms-coordinator", strings.TrimSpace(group+" "+sub), env.Stderr)}
	c.fs.StringVar(&c.db, "db", dbFromEnv(), "database URL: postgres://… or sqlite://PATH (env TMS_DB)")
	c.fs.BoolVar(&c.asJSON, "json", false, "print JSON: the /v1 documents, camelCase keys")
	return c
}

func (c *ledgerCmd) open(ctx context.Context) (store.Store, store.LedgerQueries, error) {
	st, err := store.Open(ctx, c.db, c.env.Log)
	if err != nil {
		return nil, nil, classify(err)
	}
	return st, st, nil
}

// loadJob checks --id, opens the ledger and reads job row id; the caller
// closes the store. hint says where ids are listed.
func (c *ledgerCmd) loadJob(ctx context.Context, id int64, hint string) (store.Store, store.Job, error) {
	if id <= 0 {
		return nil, store.Job{}, cli.Usagef("--id is required: a job row id (%s)", hint)
	}
	st, _, err := c.open(ctx)
	if err != nil {
		return nil, store.Job{}, err
	}
	j, err := st.GetJob(ctx, id)
	if err != nil {
		_ = st.Close()
		if errors.Is(err, store.ErrNotFound) {
			return nil, store.Job{}, cli.Usagef("no job %d in the ledger", id)
		}
		return nil, store.Job{}, err
	}
	return st, j, nil
}

// jobMetrics returns the metrics recorded at job j's before and after
// snapshots (nil where none), preferring the rows sampled for the job's
// own policy.
func jobMetrics(ctx context.Context, st store.Store, j store.Job) (before, after json.RawMessage, err error) {
	if j.BeforeSnapshotID == nil && j.AfterSnapshotID == nil {
		return nil, nil, nil
	}
	ms, err := st.ListSnapshotMetrics(ctx, j.TableID)
	if err != nil {
		return nil, nil, err
	}
	value := func(snap *int64) json.RawMessage {
		if m := store.MetricsAt(ms, snap, j.PolicyID); m != nil {
			return m.Value
		}
		return nil
	}
	return value(j.BeforeSnapshotID), value(j.AfterSnapshotID), nil
}

func (c *ledgerCmd) printJSON(v any) error {
	enc := json.NewEncoder(c.env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// dispatch runs group's sub-command from env.Args.
func dispatch(ctx context.Context, env cli.Env, group, usage string, cmds map[string]func(context.Context, cli.Env) error) error {
	if len(env.Args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return cli.Usagef("missing %s command", group)
	}
	sub := env.Args[0]
	if sub == "-h" || sub == "--help" || sub == "help" {
		_, err := fmt.Fprint(env.Stdout, usage)
		return err
	}
	run, ok := cmds[sub]
	if !ok {
		fmt.Fprint(env.Stderr, usage)
		return cli.Usagef("unknown %s command %q", group, sub)
	}
	env.Args = env.Args[1:]
	return run(ctx, env)
}

func runJobs(ctx context.Context, env cli.Env) error {
	return dispatch(ctx, env, "jobs", jobsUsage, map[string]func(context.Context, cli.Env) error{
		"list": jobsList, "show": jobsShow, "cancel": jobsCancel,
	})
}

func runTables(ctx context.Context, env cli.Env) error {
	return dispatch(ctx, env, "tables", tablesUsage, map[string]func(context.Context, cli.Env) error{
		"list": tablesList, "show": tablesShow,
	})
}

// jobOut is a job row as the jobs and tables commands print it. In JSON it
// is the /v1 job document (admin.JobDoc, camelCase) plus the table's name
// and the node that created the row, which /v1 leaves out.
type jobOut struct {
	admin.JobDoc
	TableName string `json:"tableName"`
	Node      string `json:"node,omitempty"`
}

// jobDetailOut is `jobs show --json`: the /v1/jobs/{id} document
// (admin.JobDetail) plus the node that created the row.
type jobDetailOut struct {
	admin.JobDetail
	Node string `json:"node,omitempty"`
}

// tableNames caches table rows' names.
type tableNames struct {
	st    store.Store
	names map[int64]string
}

func (n *tableNames) of(ctx context.Context, id int64) string {
	if n.names == nil {
		n.names = map[int64]string{}
	}
	if s, ok := n.names[id]; ok {
		return s
	}
	s := fmt.Sprintf("(table %d)", id)
	if t, err := n.st.GetTable(ctx, id); err == nil {
		s = t.Catalog + "." + t.Namespace + "." + t.Name
	}
	n.names[id] = s
	return s
}

func jobOutOf(j store.Job, table string) jobOut {
	return jobOut{JobDoc: admin.JobDocOf(j), TableName: table, Node: j.Node}
}

// took is how long job d ran (or has been in flight).
func took(d admin.JobDoc, now time.Time) string {
	end := now
	if d.FinishedAt != nil {
		end = *d.FinishedAt
	}
	return end.Sub(d.CreatedAt).Round(time.Millisecond).String()
}

func printJobLines(w io.Writer, lines []jobOut, withTable bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "JOB\tTABLE\tTYPES\tTRIGGER\tSTATUS\tCREATED\tTOOK\tNODE\tREASON"
	if !withTable {
		head = strings.Replace(head, "TABLE\t", "", 1)
	}
	fmt.Fprintln(tw, head)
	now := time.Now()
	for _, l := range lines {
		cols := []string{strconv.FormatInt(l.ID, 10), l.TableName, strings.Join(l.Types, ","), l.Trigger, l.Status,
			l.CreatedAt.Format(time.RFC3339), took(l.JobDoc, now), cmp.Or(l.Node, "-"), cmp.Or(oneLine(l.Error, 100), "-")}
		if !withTable {
			cols = append(cols[:1], cols[2:]...)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	if len(lines) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	return tw.Flush()
}

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func jobsList(ctx context.Context, env cli.Env) error {
	c := newLedgerCmd(env, "jobs", "list")
	var (
		tableName, statuses, since string
		inFlight, finished         bool
		limit                      int
	)
	c.fs.StringVar(&tableName, "table", "", "only this table's jobs (CATALOG.NAMESPACE.TABLE, its live incarnation)")
	c.fs.StringVar(&statuses, "status", "", "only jobs in these statuses, comma-separated ("+joinStatuses()+")")
	c.fs.BoolVar(&inFlight, "in-flight", false, "only jobs in flight")
	c.fs.BoolVar(&finished, "finished", false, "only finished jobs")
	c.fs.StringVar(&since, "since", "", "only jobs created since: RFC 3339 or a duration before now (24h)")
	c.fs.IntVar(&limit, "limit", 50, fmt.Sprintf("at most this many jobs, newest first (1 to %d)", store.MaxQueryLimit))
	if err := cli.Parse(c.fs, env.Args); err != nil {
		return err
	}
	q := store.JobQuery{Limit: limit}
	switch {
	case limit < 1 || limit > store.MaxQueryLimit:
		return cli.Usagef("--limit must be 1 to %d, got %d", store.MaxQueryLimit, limit)
	case inFlight && finished:
		return cli.Usagef("give --in-flight or --finished, not both")
	case inFlight || finished:
		q.InFlight = &inFlight
	}
	for s := range strings.SplitSeq(statuses, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(store.JobStatuses(), store.JobStatus(s)) {
			return cli.Usagef("--status: unknown status %q; want %s", s, joinStatuses())
		}
		q.Statuses = append(q.Statuses, store.JobStatus(s))
	}
	if since != "" {
		t, err := parseSince(since, time.Now())
		if err != nil {
			return cli.Usagef("--since: %v", err)
		}
		q.Since = t
	}
	st, lq, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if tableName != "" {
		t, err := findTable(ctx, st, tableName)
		if err != nil {
			return err
		}
		q.TableID = t.ID
	}
	jobs, err := lq.QueryJobs(ctx, q)
	if err != nil {
		return classify(err)
	}
	names := &tableNames{st: st}
	lines := make([]jobOut, 0, len(jobs))
	for _, j := range jobs {
		lines = append(lines, jobOutOf(j, names.of(ctx, j.TableID)))
	}
	if c.asJSON {
		return c.printJSON(lines)
	}
	return printJobLines(env.Stdout, lines, true)
}

func jobsShow(ctx context.Context, env cli.Env) error {
	c := newLedgerCmd(env, "jobs", "show")
	var id int64
	c.fs.Int64Var(&id, "id", 0, "the job row id (required)")
	if err := cli.Parse(c.fs, env.Args); err != nil {
		return err
	}
	st, j, err := c.loadJob(ctx, id, "jobs list shows them")
	if err != nil {
		return err
	}
	defer st.Close()
	t, err := st.GetTable(ctx, j.TableID)
	if err != nil {
		return fmt.Errorf("table of job %d: %w", j.ID, err)
	}
	var ms []store.SnapshotMetrics
	if j.BeforeSnapshotID != nil || j.AfterSnapshotID != nil {
		if ms, err = st.ListSnapshotMetrics(ctx, j.TableID); err != nil {
			return err
		}
	}
	d := jobDetailOut{JobDetail: admin.JobDetailOf(j, t, ms), Node: j.Node}
	if c.asJSON {
		return c.printJSON(d)
	}
	w := env.Stdout
	snap := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatInt(*p, 10)
	}
	fmt.Fprintf(w, "job %d on %s (table row %d)\n", d.ID, d.Table.Name, d.TableID)
	fmt.Fprintf(w, "  types:     %s (%s, policy %d)\n", strings.Join(d.Types, ","), d.Trigger, d.PolicyID)
	fmt.Fprintf(w, "  status:    %s\n", d.Status)
	if d.Error != "" {
		fmt.Fprintf(w, "  reason:    %s\n", d.Error)
	}
	fmt.Fprintf(w, "  node:      %s   submitter: %s   external id: %s   fence: %d\n", cmp.Or(d.Node, "-"), cmp.Or(d.Submitter, "-"),
		cmp.Or(d.ExternalJobID, "-"), d.Fence)
	fmt.Fprintf(w, "  created:   %s   took: %s\n", d.CreatedAt.Format(time.RFC3339), took(d.JobDoc, time.Now()))
	fmt.Fprintf(w, "  snapshots: %s → %s\n", snap(d.BeforeSnapshotID), snap(d.AfterSnapshotID))
	if outs, err := j.DecodeOutcomes(); err == nil && len(j.Outcomes) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tOUTCOME\tTOOK\tREASON")
		for _, o := range outs {
			var durMs int64
			if o.DurationMs != nil {
				durMs = *o.DurationMs
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", o.Type, o.Outcome, (time.Duration(durMs) * time.Millisecond).String(),
				cmp.Or(oneLine(cmp.Or(o.Error, o.Reason), 120), "-"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if d.MetricsBefore != nil || d.MetricsAfter != nil {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  METRIC\tBEFORE\tAFTER")
		for _, k := range []string{"data-file-number", "small-file-number", "data-file-mse", "delete-file-number", "total-file-size",
			"position-delete-record-count", "equality-delete-record-count", "deletion-vector-number", "delete-ratio",
			"manifest-number", "snapshot-number"} {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", k, metric(valueOf(d.MetricsBefore), k), metric(valueOf(d.MetricsAfter), k))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// valueOf is m's metrics object, nil for nil.
func valueOf(m *admin.MetricsDoc) json.RawMessage {
	if m == nil {
		return nil
	}
	return m.Value
}

// metric renders key of a metrics object, sizes in IEC units.
func metric(raw json.RawMessage, key string) string {
	var m map[string]any
	if raw == nil || json.Unmarshal(raw, &m) != nil || m[key] == nil {
		return "-"
	}
	if f, ok := m[key].(float64); ok && strings.HasSuffix(key, "-size") {
		return cli.HumanBytes(f)
	}
	return fmt.Sprint(m[key])
}

func jobsCancel(ctx context.Context, env cli.Env) error {
	c := newLedgerCmd(env, "jobs", "cancel")
	var id int64
	c.fs.Int64Var(&id, "id", 0, "the job row id (required)")
	if err := cli.Parse(c.fs, env.Args); err != nil {
		return err
	}
	st, j, err := c.loadJob(ctx, id, "jobs list --in-flight shows them")
	if err != nil {
		return err
	}
	defer st.Close()
	// The command line has no submitter: the row is fenced out and
	// closed, and its runner, queued or running, stops at its next write.
	res, err := admin.CancelJob(ctx, st, nil, j.ID, "from the command line (tms-coordinator jobs cancel)", time.Now())
	var nf *admin.NotInFlightError
	if errors.As(err, &nf) {
		return cli.Usagef("%s", nf.Error())
	}
	if err != nil {
		return err
	}
	j = res.Job
	l := jobOutOf(j, (&tableNames{st: st}).of(ctx, j.TableID))
	if c.asJSON {
		return c.printJSON(l)
	}
	_, err = fmt.Fprintf(env.Stdout, "cancelled job %d on %s (fence now %d)\n", l.ID, l.TableName, l.Fence)
	return err
}

// tableOut is a registered table as `tables` prints it. In JSON it is the
// /v1 table document (admin.TableDoc with lastJob, metrics and, from
// tables show, recentJobs) plus whether it is the live incarnation.
type tableOut struct {
	admin.TableDoc
	Live       bool              `json:"live"`
	LastJob    *jobOut           `json:"lastJob"`
	Metrics    *admin.MetricsDoc `json:"metrics"`
	RecentJobs []jobOut          `json:"recentJobs,omitempty"`
}

func tableOutOf(ts store.TableStatus, live bool) tableOut {
	l := tableOut{TableDoc: admin.TableDocOf(ts.Table), Live: live, Metrics: admin.MetricsDocOf(ts.Metrics)}
	if ts.LastJob != nil {
		jl := jobOutOf(*ts.LastJob, l.Name)
		l.LastJob = &jl
	}
	return l
}

// allTableStatus pages through every registered table.
func allTableStatus(ctx context.Context, lq store.LedgerQueries, keep func(store.TableStatus) bool, limit int) ([]store.TableStatus, error) {
	var out []store.TableStatus
	for after := int64(0); ; {
		page, err := lq.ListTableStatus(ctx, after, store.MaxQueryLimit)
		if err != nil {
			return nil, err
		}
		for _, ts := range page {
			if keep(ts) {
				out = append(out, ts)
			}
			after = ts.ID
		}
		if len(page) < store.MaxQueryLimit || (limit > 0 && len(out) >= limit) {
			break
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// liveIDs marks, of ts, the newest row of each name.
func liveIDs(ts []store.TableStatus) map[int64]bool {
	newest := map[string]int64{}
	for _, t := range ts {
		k := t.Catalog + "\x00" + t.Namespace + "\x00" + t.Name
		newest[k] = max(newest[k], t.ID)
	}
	live := map[int64]bool{}
	for _, id := range newest {
		live[id] = true
	}
	return live
}

func tablesList(ctx context.Context, env cli.Env) error {
	c := newLedgerCmd(env, "tables", "list")
	var limit int
	c.fs.IntVar(&limit, "limit", 1000, "at most this many tables, by id")
	if err := cli.Parse(c.fs, env.Args); err != nil {
		return err
	}
	if limit < 1 {
		return cli.Usagef("--limit must be positive, got %d", limit)
	}
	st, lq, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	all, err := allTableStatus(ctx, lq, func(store.TableStatus) bool { return true }, 0)
	if err != nil {
		return err
	}
	live := liveIDs(all)
	var lines []tableOut
	for _, ts := range all {
		if live[ts.ID] && len(lines) < limit {
			lines = append(lines, tableOutOf(ts, true))
		}
	}
	if c.asJSON {
		return c.printJSON(lines)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tROW\tFILES\tSMALL\tBYTES\tSNAPSHOTS\tLAST JOB\tSTATUS\tFINISHED")
	for _, l := range lines {
		last, status, fin := "-", "-", "-"
		if l.LastJob != nil {
			last, status = fmt.Sprintf("%d %s", l.LastJob.ID, strings.Join(l.LastJob.Types, ",")), l.LastJob.Status
			if l.LastJob.FinishedAt != nil {
				fin = l.LastJob.FinishedAt.Format(time.RFC3339)
			}
		}
		m := valueOf(l.Metrics)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, l.ID, metric(m, "data-file-number"),
			metric(m, "small-file-number"), metric(m, "total-file-size"), metric(m, "snapshot-number"), last, status, fin)
	}
	if len(lines) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	return tw.Flush()
}

func tablesShow(ctx context.Context, env cli.Env) error {
	c := newLedgerCmd(env, "tables", "show")
	var (
		name  string
		limit int
	)
	c.fs.StringVar(&name, "table", "", "the table, CATALOG.NAMESPACE.TABLE (required)")
	c.fs.IntVar(&limit, "limit", 50, fmt.Sprintf("jobs per incarnation, newest first (1 to %d)", store.MaxQueryLimit))
	if err := cli.Parse(c.fs, env.Args); err != nil {
		return err
	}
	if limit < 1 || limit > store.MaxQueryLimit {
		return cli.Usagef("--limit must be 1 to %d, got %d", store.MaxQueryLimit, limit)
	}
	st, lq, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	live, err := findTable(ctx, st, name)
	if err != nil {
		return err
	}
	incs, err := allTableStatus(ctx, lq, func(ts store.TableStatus) bool {
		return ts.Catalog == live.Catalog && ts.Namespace == live.Namespace && ts.Name == live.Name
	}, 0)
	if err != nil {
		return err
	}
	var lines []tableOut
	for i := len(incs) - 1; i >= 0; i-- { // newest incarnation first
		l := tableOutOf(incs[i], incs[i].ID == live.ID)
		jobs, err := lq.QueryJobs(ctx, store.JobQuery{TableID: l.ID, Limit: limit})
		if err != nil {
			return err
		}
		for _, j := range jobs {
			l.RecentJobs = append(l.RecentJobs, jobOutOf(j, l.Name))
		}
		lines = append(lines, l)
	}
	if c.asJSON {
		return c.printJSON(lines)
	}
	for i, l := range lines {
		state := "live"
		if !l.Live {
			state = "dropped and recreated since (history kept)"
		}
		if i > 0 {
			fmt.Fprintln(env.Stdout)
		}
		fmt.Fprintf(env.Stdout, "%s  row %d  table-uuid %s  registered %s  (%s)\n", l.Name, l.ID, l.UUID, l.CreatedAt.Format(time.RFC3339), state)
		if l.Metrics != nil {
			m := l.Metrics.Value
			fmt.Fprintf(env.Stdout, "  now: %s data files (%s small), %s, %s delete files, %s manifests, %s snapshots\n",
				metric(m, "data-file-number"), metric(m, "small-file-number"), metric(m, "total-file-size"),
				metric(m, "delete-file-number"), metric(m, "manifest-number"), metric(m, "snapshot-number"))
		}
		if err := printJobLines(env.Stdout, l.RecentJobs, false); err != nil {
			return err
		}
	}
	return nil
}

// findTable returns the live row of CATALOG.NAMESPACE.TABLE, or a usage
// error naming it.
func findTable(ctx context.Context, st store.Store, name string) (store.Table, error) {
	ident, err := catalogs.ParseIdent(name)
	if err != nil || len(ident) < 3 {
		return store.Table{}, cli.Usagef("--table %q: want CATALOG.NAMESPACE.TABLE", name)
	}
	t, err := st.FindTable(ctx, ident[0], strings.Join(ident[1:len(ident)-1], "."), ident[len(ident)-1])
	if errors.Is(err, store.ErrNotFound) {
		return store.Table{}, cli.Usagef("--table %s: no such table in the ledger", name)
	}
	return t, err
}

func joinStatuses() string {
	var s []string
	for _, st := range store.JobStatuses() {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

// parseSince reads RFC 3339 or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("duration %q must not be negative", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor a duration like 24h", s)
	}
	return t, nil
}
