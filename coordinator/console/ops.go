package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
)

// Limits of the jobs and queue pages.
const (
	// DefaultJobLimit is the jobs page's page size without ?limit=.
	DefaultJobLimit = 100
	// ErrorPreview is how many characters of a job's error the jobs page
	// shows; the job's own page has all of it.
	ErrorPreview = 200
	// TaskScan is how many rows of each task kind the queue page reads to
	// find the kind's next due time (the store has no per-kind minimum).
	TaskScan = 5000
	// InFlightScan bounds the in-flight rows the queue page reads to find
	// those of dead nodes; inFlightPage is one read's size.
	InFlightScan = 10000
	inFlightPage = 500
)

// jobRow is a job row as the jobs and queue pages show it.
type jobRow struct {
	store.Job
	Table     *store.Table // nil if the table row is gone
	TableName string
	Duration  string // started to finished (or to now while in flight), "–" if not started
	ErrorText string // the error, cut at ErrorPreview characters
	Reason    string // queue page: why the row's node cannot run it
}

// jobFilter is the jobs page's filter as the request gave it, to refill
// the form.
type jobFilter struct {
	Status, Table, InFlight, Since, Until string
	Limit                                 int
}

type jobsData struct {
	Filter   jobFilter
	Statuses []store.JobStatus
	// Running are the in-flight rows (of the filtered table), on the first
	// page only; RunningMore says there are more than shown.
	Running     []jobRow
	RunningMore bool
	FirstPage   bool
	Rows        []jobRow
	Next        string // URL of the next page, "" on the last
}

// badParam is a 400 naming a query parameter.
type badParam struct{ name, msg string }

func (e *badParam) Error() string { return "Query parameter " + e.name + ": " + e.msg }

// jobQuery maps the jobs page's query parameters onto a store.JobQuery:
// status (repeated or comma-separated), table (row id or
// CATALOG.NAMESPACE.TABLE), inflight (true/false), since and until
// (RFC 3339, 2006-01-02T15:04 or 2006-01-02, UTC unless an offset is
// given), limit (1 to store.MaxQueryLimit) and before (the cursor: a job
// id).
func (c *Console) jobQuery(ctx context.Context, q url.Values) (store.JobQuery, jobFilter, error) {
	jq := store.JobQuery{Limit: DefaultJobLimit}
	f := jobFilter{Table: q.Get("table"), InFlight: q.Get("inflight"), Since: q.Get("since"), Until: q.Get("until")}
	statuses := statusParam(q)
	f.Status = strings.Join(statuses, ",")
	for _, s := range statuses {
		if !slices.Contains(store.JobStatuses(), store.JobStatus(s)) {
			return jq, f, &badParam{"status", fmt.Sprintf("unknown job status %q; want one of %s", s, joinStatuses(store.JobStatuses()))}
		}
		jq.Statuses = append(jq.Statuses, store.JobStatus(s))
	}
	if f.Table != "" {
		t, err := c.findTable(ctx, f.Table)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return jq, f, &badParam{"table", fmt.Sprintf("no table %q", f.Table)}
		case err != nil && (errors.Is(err, invalid.ErrArgument) || isInputError(err)):
			return jq, f, &badParam{"table", err.Error()}
		case err != nil:
			return jq, f, err
		}
		jq.TableID = t.ID
	}
	if f.InFlight != "" {
		b, err := strconv.ParseBool(f.InFlight)
		if err != nil {
			return jq, f, &badParam{"inflight", fmt.Sprintf("%q: want true or false", f.InFlight)}
		}
		jq.InFlight = &b
	}
	var err error
	if jq.Since, err = parseWhen(f.Since); err != nil {
		return jq, f, &badParam{"since", err.Error()}
	}
	if jq.Until, err = parseWhen(f.Until); err != nil {
		return jq, f, &badParam{"until", err.Error()}
	}
	if !jq.Since.IsZero() && !jq.Until.IsZero() && !jq.Until.After(jq.Since) {
		return jq, f, &badParam{"until", fmt.Sprintf("%s is not after since (%s)", c.when(jq.Until), c.when(jq.Since))}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxQueryLimit {
			return jq, f, &badParam{"limit", fmt.Sprintf("%q: want 1 to %d", v, store.MaxQueryLimit)}
		}
		jq.Limit = n
	}
	f.Limit = jq.Limit
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return jq, f, &badParam{"before", fmt.Sprintf("%q: want a job id", v)}
		}
		jq.BeforeID = n
	}
	return jq, f, nil
}

func isInputError(err error) bool {
	var ie *admin.InputError
	return errors.As(err, &ie)
}

func joinStatuses(ss []store.JobStatus) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

// whenLayouts are the time forms since and until accept.
var whenLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseWhen parses a since or until value; "" is the zero time.
func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, l := range whenLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want a time like 2006-01-02T15:04:05Z, 2006-01-02T15:04 (UTC) or 2006-01-02", s)
}

func (c *Console) jobs(w http.ResponseWriter, r *http.Request, s session) {
	ctx := r.Context()
	q := r.URL.Query()
	jq, f, err := c.jobQuery(ctx, q)
	var bp *badParam
	if errors.As(err, &bp) {
		c.message(w, s, http.StatusBadRequest, "Bad request", bp.Error())
		return
	} else if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := jobsData{Filter: f, Statuses: store.JobStatuses(), FirstPage: jq.BeforeID == 0}
	rows := newJobRows(c, ctx)
	if d.FirstPage {
		yes := true
		running, err := c.ledger.QueryJobs(ctx, store.JobQuery{TableID: jq.TableID, InFlight: &yes, Limit: jq.Limit + 1})
		if err != nil {
			c.fail(w, r, s, err)
			return
		}
		if len(running) > jq.Limit {
			running, d.RunningMore = running[:jq.Limit], true
		}
		if d.Running, err = rows.of(running); err != nil {
			c.fail(w, r, s, err)
			return
		}
	}
	recent, err := c.ledger.QueryJobs(ctx, jq)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	if d.Rows, err = rows.of(recent); err != nil {
		c.fail(w, r, s, err)
		return
	}
	if len(recent) == jq.Limit {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("before", strconv.FormatInt(recent[len(recent)-1].ID, 10))
		d.Next = "/ui/jobs?" + next.Encode()
	}
	c.render(w, s, http.StatusOK, "jobs", "Jobs", d)
}

// jobRows builds jobRows, reading each table row once.
type jobRows struct {
	c      *Console
	ctx    context.Context
	tables map[int64]*store.Table
}

func newJobRows(c *Console, ctx context.Context) *jobRows {
	return &jobRows{c: c, ctx: ctx, tables: map[int64]*store.Table{}}
}

func (b *jobRows) of(jobs []store.Job) ([]jobRow, error) {
	out := make([]jobRow, 0, len(jobs))
	for _, j := range jobs {
		row, err := b.row(j)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, nil
}

func (b *jobRows) row(j store.Job) (jobRow, error) {
	t, ok := b.tables[j.TableID]
	if !ok {
		got, err := b.c.cfg.Store.GetTable(b.ctx, j.TableID)
		switch {
		case err == nil:
			t = &got
		case !errors.Is(err, store.ErrNotFound):
			return jobRow{}, err
		}
		b.tables[j.TableID] = t
	}
	row := jobRow{Job: j, Table: t, Duration: "–", ErrorText: cut(j.Error, ErrorPreview)}
	if t != nil {
		row.TableName = t.Catalog + "." + t.Namespace + "." + t.Name
	}
	if !j.StartedAt.IsZero() {
		end := j.FinishedAt
		if end.IsZero() {
			end = b.c.cfg.Now()
		}
		row.Duration = age(end.Sub(j.StartedAt))
		if j.InFlight() {
			row.Duration += " so far"
		}
	}
	return row, nil
}

// cut shortens s to n characters, marking the cut with an ellipsis.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// age formats a duration to the second; negative (clock skew) is 0s.
func age(d time.Duration) string {
	return max(d, 0).Round(time.Second).String()
}

// kindRow is a task kind of the queue page.
type kindRow struct {
	store.KindCount
	// NextDue is the earliest execution time of the kind's unpicked rows
	// ("–" if none); Partial says only the first TaskScan rows were read.
	NextDue string
	Partial bool
}

// nodeRow is a coordinator node of the queue page.
type nodeRow struct {
	store.Node
	Age      string // of the last heartbeat
	Dead     bool
	Catalogs string
	// Watchdog is this node's engine health ("healthy" or the watchdog's
	// error); other nodes' is not in the ledger, only behind their /readyz.
	Watchdog string
}

type queueData struct {
	Kinds     []kindRow
	TaskScan  int
	Nodes     []nodeRow
	DeadAfter string
	// Orphans are in-flight rows whose node is dead or has no row; Scanned
	// is how many in-flight rows were read, Capped that the scan stopped at
	// InFlightScan.
	Orphans []jobRow
	Scanned int
	Capped  bool
}

func (c *Console) queue(w http.ResponseWriter, r *http.Request, s session) {
	ctx := r.Context()
	now := c.cfg.Now()
	d := queueData{TaskScan: TaskScan, DeadAfter: c.cfg.DeadNodeAfter.String()}
	counts, err := c.cfg.Store.TaskCounts(ctx, now)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	for _, k := range counts {
		row := kindRow{KindCount: k, NextDue: "–", Partial: k.Total > TaskScan}
		ts, err := c.cfg.Store.ListTasks(ctx, k.Name, TaskScan)
		if err != nil {
			c.fail(w, r, s, err)
			return
		}
		var next time.Time
		for _, t := range ts {
			if !t.Picked && (next.IsZero() || t.ExecutionTime.Before(next)) {
				next = t.ExecutionTime
			}
		}
		if !next.IsZero() {
			row.NextDue = c.when(next)
			if !next.After(now) {
				row.NextDue += " (due now)"
			} else {
				row.NextDue += " (in " + age(next.Sub(now)) + ")"
			}
		}
		d.Kinds = append(d.Kinds, row)
	}
	nodes, err := c.cfg.Store.ListNodes(ctx)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	byID := make(map[string]nodeRow, len(nodes))
	for _, n := range nodes {
		row := nodeRow{Node: n, Age: age(now.Sub(n.LastHeartbeat)), Dead: now.Sub(n.LastHeartbeat) > c.cfg.DeadNodeAfter,
			Catalogs: "not reported"}
		if n.Catalogs != nil {
			row.Catalogs = strings.Join(n.Catalogs, ", ")
		}
		row.Watchdog = "– (its /readyz)"
		if c.cfg.Watchdog != nil && n.ID == c.cfg.NodeID {
			row.Watchdog = "healthy (this node)"
			if err := c.cfg.Watchdog(); err != nil {
				row.Watchdog = "unhealthy (this node): " + err.Error()
			}
		}
		byID[n.ID] = row
		d.Nodes = append(d.Nodes, row)
	}
	rows := newJobRows(c, ctx)
	for after := int64(0); d.Scanned < InFlightScan; {
		page, err := c.cfg.Store.ListInFlightJobs(ctx, after, min(inFlightPage, InFlightScan-d.Scanned))
		if err != nil {
			c.fail(w, r, s, err)
			return
		}
		d.Scanned += len(page)
		for _, j := range page {
			n, ok := byID[j.Node]
			var reason string
			switch {
			case j.Node == "":
				continue
			case !ok:
				reason = "no node row"
			case n.Dead:
				reason = "dead: last heartbeat " + n.Age + " ago"
			default:
				continue
			}
			row, err := rows.row(j)
			if err != nil {
				c.fail(w, r, s, err)
				return
			}
			row.Reason = reason
			d.Orphans = append(d.Orphans, row)
		}
		if len(page) < inFlightPage {
			break
		}
		after = page[len(page)-1].ID
		d.Capped = d.Scanned >= InFlightScan
	}
	c.render(w, s, http.StatusOK, "queue", "Queue and nodes", d)
}

// statusParam is the status parameter's values: every status=… given,
// split at commas, blanks dropped.
func statusParam(q url.Values) []string {
	var out []string
	for _, v := range q["status"] {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
