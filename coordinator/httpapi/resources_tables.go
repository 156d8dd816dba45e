package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/store"
)

// This file is /v1/tables. The documents of tables, jobs and metrics rows
// are package admin's (TableDoc, JobDoc, MetricsDoc), which /v1/jobs and
// the CLI's --json print too.

// recentJobs is how many job rows GET /v1/tables/{table} shows.
const recentJobs = 10

// tableStatusDoc is a table with its last job and latest metrics.
type tableStatusDoc struct {
	admin.TableDoc
	LastJob *admin.JobDoc     `json:"lastJob"`
	Metrics *admin.MetricsDoc `json:"metrics"`
	// RecentJobs is only set by GET /v1/tables/{table}.
	RecentJobs []admin.JobDoc `json:"recentJobs,omitempty"`
}

// tableList is GET /v1/tables: a page, and the after of the next page
// (null on the last page).
type tableList struct {
	Tables []tableStatusDoc `json:"tables"`
	Next   *int64           `json:"next"`
}

// listTables is GET /v1/tables?limit=&after=: registered tables by id,
// every incarnation its own row.
func (rs *resources) listTables(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "limit", "after")
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	limit, err := limitParam(q)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	var after int64
	if s := q.Get("after"); s != "" {
		if after, err = strconv.ParseInt(s, 10, 64); err != nil || after < 0 {
			rs.fail(w, r, badRequest("after %q: want the next value of the previous page (a table id)", s))
			return
		}
	}
	page, err := rs.ledger.ListTableStatus(r.Context(), after, limit)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	out := tableList{Tables: make([]tableStatusDoc, len(page))}
	for i, ts := range page {
		out.Tables[i] = tableStatusDoc{TableDoc: admin.TableDocOf(ts.Table), Metrics: admin.MetricsDocOf(ts.Metrics)}
		if ts.LastJob != nil {
			d := admin.JobDocOf(*ts.LastJob)
			out.Tables[i].LastJob = &d
		}
	}
	if len(page) == limit {
		out.Next = &page[len(page)-1].ID
	}
	jsonOK(w, out)
}

// getTable is GET /v1/tables/{table}: by id, or by CATALOG.NAMESPACE.TABLE
// (the newest incarnation), with its recent jobs and latest metrics.
func (rs *resources) getTable(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		rs.fail(w, r, err)
		return
	}
	ctx := r.Context()
	t, err := rs.findTable(ctx, "table", r.PathValue("table"))
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jobs, err := rs.st.ListJobs(ctx, t.ID, recentJobs)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	ms, err := rs.st.ListSnapshotMetrics(ctx, t.ID)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	doc := tableStatusDoc{TableDoc: admin.TableDocOf(t), RecentJobs: admin.JobDocsOf(jobs)}
	if len(jobs) > 0 {
		doc.LastJob = &doc.RecentJobs[0]
	}
	if len(ms) > 0 {
		doc.Metrics = admin.MetricsDocOf(&ms[len(ms)-1])
	}
	jsonOK(w, doc)
}

// findTable resolves a table given as field: a row id, or a dotted name
// whose newest incarnation is meant.
func (rs *resources) findTable(ctx context.Context, field, s string) (store.Table, error) {
	if s != "" && !strings.Contains(s, ".") {
		id, err := idParam(field, s)
		if err != nil {
			return store.Table{}, badRequest("%s %q: want a table id or CATALOG.NAMESPACE.TABLE", field, s)
		}
		return rs.st.GetTable(ctx, id)
	}
	name, err := admin.ParseTableName(s, field)
	if err != nil {
		return store.Table{}, err
	}
	return rs.st.FindTable(ctx, name.Catalog, name.Namespace, name.Table)
}
