package console

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// This file is the tables page (/ui): every registered table with its
// current health (its latest metrics), its last job and its newest job of
// each maintenance type, unhealthy tables first. The page reads one page of
// store.LedgerQueries.ListTableHealth, which filters, sorts and pages in
// the database (see store/table_health.go for why by offset).
//
// Query parameters, all optional; a bad one answers 400 naming it:
//
//	sort    health (the default), name, data-files, small-files, mse,
//	        delete-files, manifests, snapshots, oldest or last-job
//	order   asc or desc; without it the sort's own (name ascending, the
//	        others unhealthiest, largest or newest first)
//	q       a case-insensitive substring of catalog.namespace.table
//	status  the last job's status (failed, succeeded, …) or none (no job);
//	        several comma-separated or repeated
//	limit   the page size, 1 to store.MaxQueryLimit (DefaultTableLimit)
//	offset  how many matching tables to skip
//
// The column headers are links that sort (again: the other way round), and
// the filter is a GET form, so every view has a URL.

// metricColumns are the metrics the tables page shows, by the sampler's
// JSON keys (sampler.Metrics), with the sort of each.
var metricColumns = []struct {
	Key, Label string
	Sort       store.TableSort
	// age formats the value, milliseconds, as a duration.
	age bool
}{
	{"data-file-number", "Data files", store.SortDataFiles, false},
	{"small-file-number", "Small files", store.SortSmallFiles, false},
	{"data-file-mse", "Data-file MSE", store.SortMSE, false},
	{"delete-file-number", "Delete files", store.SortDeleteFiles, false},
	{"manifest-number", "Manifests", store.SortManifests, false},
	{"snapshot-number", "Snapshots", store.SortSnapshots, false},
	{"oldest-snapshot-age-ms", "Oldest snapshot", store.SortOldest, true},
}

// noJob is the status filter's value for tables without any job.
const noJob = "none"

// tablesData is the tables page.
type tablesData struct {
	// Head is the header row before the per-type columns.
	Head []tablesHead
	// Types are the maintenance types, in chain order: a column each.
	Types []policy.Type
	// Columns is the number of columns.
	Columns int
	Rows    []tablesRow
	// Filter is the form's current values.
	Filter tablesFilter
	// Statuses are the status filter's choices.
	Statuses []string
	// Order says in words how the rows are ordered; HealthLink, when not
	// sorted by health, goes back to that order.
	Order      string
	HealthLink string
	// Total is the number of matching tables; From and To (1-based) the
	// rows of this page, 0 when it has none.
	Total, From, To int
	// Filtered is set when q or status narrow the list.
	Filtered bool
	// Prev and Next are the neighbouring pages, First the first page (for
	// a page past the end); "" where there is none.
	Prev, Next, First string
	// Planned is set when the rows carry their plan (the console has one).
	Planned bool
}

// tablesHead is a column header: a link that sorts by the column, if it
// has a sort.
type tablesHead struct {
	Label string
	Href  string
	// Arrow marks the current sort: ▲ ascending, ▼ descending.
	Arrow   string
	Numeric bool
}

// tablesFilter is what the filter form shows.
type tablesFilter struct {
	Q, Status, Sort, Order string
	Limit                  int
}

// tablesRow is a row of the tables page.
type tablesRow struct {
	store.Table
	// Metrics are formatted, in metricColumns order; "–" if absent.
	Metrics []string
	LastJob *store.Job
	// Unhealthy is set when the last job failed or was lost, the first key
	// of the health order.
	Unhealthy bool
	// Types is the newest job of each maintenance type, in Types order.
	Types []typeCell
	// Plan is the plan of each effective policy of the table (nil without
	// a plan on this console), and Due the earliest instant one of them
	// next fires, with DueBy saying what says so; OnCommit is set when an
	// onCommit policy waits for a commit.
	Plan     []flow.PlanItem
	Due      *time.Time
	DueBy    string
	OnCommit bool
}

// typeCell is a table's newest job of one maintenance type and that type's
// outcome in it.
type typeCell struct {
	Job *store.Job // nil: the type never ran on the table
	// Outcome is the type's outcome in the job (done, skipped, ended-drift,
	// conflict, failed), or the job's status where the job recorded none
	// for it (in flight, lost, cancelled …).
	Outcome string
	// Detail is the outcome's reason or error, for the cell's tooltip.
	Detail string
	// When is the job's finish time, or its creation while in flight.
	When time.Time
}

// tablesQuery maps the page's query parameters onto a
// store.TableHealthQuery and the form's values.
func tablesQuery(q url.Values) (store.TableHealthQuery, tablesFilter, error) {
	hq := store.TableHealthQuery{Limit: DefaultTableLimit, Search: q.Get("q")}
	f := tablesFilter{Q: hq.Search, Sort: q.Get("sort"), Order: q.Get("order")}
	if f.Sort != "" {
		hq.Sort = store.TableSort(f.Sort)
		if !slices.Contains(store.TableSorts(), hq.Sort) {
			return hq, f, &badParam{"sort", fmt.Sprintf("unknown sort %q; want one of %s", f.Sort, joinSorts())}
		}
	}
	if f.Order != "" {
		hq.Order = store.SortOrder(f.Order)
		if hq.Order != store.OrderAsc && hq.Order != store.OrderDesc {
			return hq, f, &badParam{"order", fmt.Sprintf("%q: want asc or desc", f.Order)}
		}
	}
	if len(hq.Search) > store.MaxTableSearch {
		return hq, f, &badParam{"q", fmt.Sprintf("%d bytes: want at most %d", len(hq.Search), store.MaxTableSearch)}
	}
	statuses := statusParam(q)
	f.Status = strings.Join(statuses, ",")
	for _, s := range statuses {
		switch {
		case s == noJob:
			hq.NoJob = true
		case slices.Contains(store.JobStatuses(), store.JobStatus(s)):
			hq.LastStatuses = append(hq.LastStatuses, store.JobStatus(s))
		default:
			return hq, f, &badParam{"status", fmt.Sprintf("unknown job status %q; want %s or one of %s",
				s, noJob, joinStatuses(store.JobStatuses()))}
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxQueryLimit {
			return hq, f, &badParam{"limit", fmt.Sprintf("%q: want 1 to %d", v, store.MaxQueryLimit)}
		}
		hq.Limit = n
	}
	f.Limit = hq.Limit
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return hq, f, &badParam{"offset", fmt.Sprintf("%q: want a number of tables, 0 or more", v)}
		}
		hq.Offset = n
	}
	return hq, f, nil
}

func joinSorts() string {
	var out []string
	for _, s := range store.TableSorts() {
		out = append(out, string(s))
	}
	return strings.Join(out, ", ")
}

func (c *Console) tables(w http.ResponseWriter, r *http.Request, s session) {
	hq, f, err := tablesQuery(r.URL.Query())
	if err != nil {
		c.message(w, s, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	page, err := c.ledger.ListTableHealth(r.Context(), hq)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	sort := cmp.Or(hq.Sort, store.SortHealth)
	order := cmp.Or(hq.Order, sort.DefaultOrder())
	d := tablesData{Types: policy.Types(), Filter: f, Statuses: statusChoices(), Total: page.Total,
		Filtered: f.Q != "" || f.Status != "", Order: orderText(sort, order)}
	link := func(sort store.TableSort, order store.SortOrder, offset int) string {
		v := url.Values{}
		if sort != store.SortHealth {
			v.Set("sort", string(sort))
		}
		if order != sort.DefaultOrder() {
			v.Set("order", string(order))
		}
		if f.Q != "" {
			v.Set("q", f.Q)
		}
		if f.Status != "" {
			v.Set("status", f.Status)
		}
		if hq.Limit != DefaultTableLimit {
			v.Set("limit", strconv.Itoa(hq.Limit))
		}
		if offset > 0 {
			v.Set("offset", strconv.Itoa(offset))
		}
		if len(v) == 0 {
			return "/ui"
		}
		return "/ui?" + v.Encode()
	}
	head := func(label string, by store.TableSort, numeric bool) tablesHead {
		h := tablesHead{Label: label, Numeric: numeric, Href: link(by, by.DefaultOrder(), 0)}
		if by == sort {
			h.Arrow = "▲"
			next := store.OrderDesc
			if order == store.OrderDesc {
				h.Arrow, next = "▼", store.OrderAsc
			}
			h.Href = link(by, next, 0)
		}
		return h
	}
	d.Head = append(d.Head, head("Table", store.SortName, false))
	for _, m := range metricColumns {
		d.Head = append(d.Head, head(m.Label, m.Sort, true))
	}
	d.Head = append(d.Head, head("Last job", store.SortLastJob, false))
	d.Columns = len(d.Head) + 2 + len(d.Types) // + status and finished
	if sort != store.SortHealth {
		d.HealthLink = link(store.SortHealth, store.SortHealth.DefaultOrder(), 0)
	}

	d.Rows = make([]tablesRow, len(page.Tables))
	for i, th := range page.Tables {
		d.Rows[i] = tableRowOf(th, d.Types)
	}
	if err := c.planRows(r.Context(), d.Rows); err != nil {
		c.fail(w, r, s, err)
		return
	}
	d.Planned = c.cfg.Plan != nil
	if n := len(page.Tables); n > 0 {
		d.From, d.To = hq.Offset+1, hq.Offset+n
	} else if hq.Offset > 0 {
		d.First = link(sort, order, 0)
	}
	if hq.Offset > 0 && page.Total > 0 {
		d.Prev = link(sort, order, max(0, min(hq.Offset, page.Total)-hq.Limit))
	}
	if hq.Offset+hq.Limit < page.Total {
		d.Next = link(sort, order, hq.Offset+hq.Limit)
	}
	if d.Planned {
		d.Columns += 2
	}
	c.render(w, s, http.StatusOK, "tables", "Tables", d)
}

// statusChoices are the status filter's values: none, then the job
// statuses.
func statusChoices() []string {
	out := []string{noJob}
	for _, s := range store.JobStatuses() {
		out = append(out, string(s))
	}
	return out
}

// orderText says how the page is ordered.
func orderText(sort store.TableSort, order store.SortOrder) string {
	if sort == store.SortHealth {
		if order == store.OrderAsc {
			return "healthiest first (the unhealthy-first order reversed); tables without metrics after those with"
		}
		return "unhealthy first: tables whose last job failed or was lost, then by small files + delete files, " +
			"then manifests, then snapshots (most first); tables without metrics after those with"
	}
	what := map[store.TableSort]string{store.SortName: "name", store.SortLastJob: "the last job's creation"}[sort]
	for _, m := range metricColumns {
		if m.Sort == sort {
			what = strings.ToLower(m.Label)
		}
	}
	dir := "ascending"
	if order == store.OrderDesc {
		dir = "descending"
	}
	return "by " + what + ", " + dir + "; tables without it last"
}

// tableRowOf formats one table for the page.
func tableRowOf(th store.TableHealth, types []policy.Type) tablesRow {
	var m map[string]any
	if th.Metrics != nil {
		_ = json.Unmarshal(th.Metrics.Value, &m)
	}
	row := tablesRow{Table: th.Table, LastJob: th.LastJob,
		Unhealthy: th.LastJob != nil && (th.LastJob.Status == store.StatusFailed || th.LastJob.Status == store.StatusLost)}
	for _, k := range metricColumns {
		if k.age {
			row.Metrics = append(row.Metrics, formatAge(m[k.Key]))
		} else {
			row.Metrics = append(row.Metrics, formatMetric(m[k.Key]))
		}
	}
	for _, t := range types {
		row.Types = append(row.Types, typeCellOf(th.LastJobOf[string(t)], t))
	}
	return row
}

// typeCellOf is type t's cell for job j (nil: never ran).
func typeCellOf(j *store.Job, t policy.Type) typeCell {
	if j == nil {
		return typeCell{}
	}
	cell := typeCell{Job: j, Outcome: string(j.Status), When: j.FinishedAt}
	if j.InFlight() {
		cell.When = j.CreatedAt
	}
	outs, _ := j.DecodeOutcomes() // absent or not an array: the status stands
	for _, o := range outs {
		if o.Type == string(t) && o.Outcome != "" {
			cell.Outcome = o.Outcome
			cell.Detail = strings.TrimSpace(strings.Join(slices.DeleteFunc([]string{o.Reason, o.Error}, func(s string) bool { return s == "" }), ": "))
			break
		}
	}
	if cell.Detail == "" && j.Error != "" && (j.Status == store.StatusFailed || j.Status == store.StatusLost) {
		cell.Detail = j.Error
	}
	return cell
}

// formatMetric renders a metric value: integers as such, other numbers
// with 4 significant digits, absent as a dash.
func formatMetric(v any) string {
	f, ok := v.(float64)
	switch {
	case v == nil:
		return "–"
	case !ok:
		return fmt.Sprint(v)
	case f == math.Trunc(f) && math.Abs(f) < 1e15:
		return strconv.FormatInt(int64(f), 10)
	default:
		return strconv.FormatFloat(f, 'g', 4, 64)
	}
}

// formatAge renders a metric in milliseconds as a duration in its two
// largest units (3d 4h, 5h 12m, 7m 3s, 450ms); absent as a dash.
func formatAge(v any) string {
	f, ok := v.(float64)
	if !ok || !(f >= 0 && f < 9e12) { // 9e12 ms, 285 years: a time.Duration holds it
		return formatMetric(v)
	}
	d := time.Duration(f) * time.Millisecond
	two := func(a int64, ua string, b int64, ub string) string {
		if b == 0 {
			return fmt.Sprintf("%d%s", a, ua)
		}
		return fmt.Sprintf("%d%s %d%s", a, ua, b, ub)
	}
	switch {
	case d >= 24*time.Hour:
		return two(int64(d/(24*time.Hour)), "d", int64(d%(24*time.Hour)/time.Hour), "h")
	case d >= time.Hour:
		return two(int64(d/time.Hour), "h", int64(d%time.Hour/time.Minute), "m")
	case d >= time.Minute:
		return two(int64(d/time.Minute), "m", int64(d%time.Minute/time.Second), "s")
	case d >= time.Second:
		return two(int64(d/time.Second), "s", 0, "")
	}
	return two(int64(d/time.Millisecond), "ms", 0, "")
}

// planRows adds the plan of the page's tables: their effective policies,
// each one's verdict, and when the next of them is due (flow.Plan of the
// listed tables, a few queries for the whole page).
func (c *Console) planRows(ctx context.Context, rows []tablesRow) error {
	if c.cfg.Plan == nil || len(rows) == 0 {
		return nil
	}
	tables := make([]store.Table, len(rows))
	at := make(map[int64]int, len(rows))
	for i, row := range rows {
		tables[i], at[row.ID] = row.Table, i
	}
	p, err := c.cfg.Plan(ctx, flow.PlanQuery{Tables: tables, Now: c.cfg.Now()})
	if err != nil {
		return err
	}
	for _, it := range p.Items {
		row := &rows[at[it.TableID]]
		row.Plan = append(row.Plan, it)
		switch {
		case it.Verdict == flow.PlanOff:
		case it.Due != nil && (row.Due == nil || it.Due.Before(*row.Due)):
			row.Due, row.DueBy = it.Due, it.Policy+": "+it.DueBy
		case it.Due == nil && slices.Contains(it.Triggers, "onCommit"):
			row.OnCommit = true
		}
	}
	return nil
}
