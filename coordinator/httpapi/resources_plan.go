package httpapi

import (
	"net/http"
	"strconv"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/coordinator/flow"
)

// This file is GET /v1/plan: what would run now and why, per table and
// policy (flow.Plan, a dry run that enqueues nothing).

// plan is GET /v1/plan?table=CATALOG.NAMESPACE.TABLE or ?limit=&after=
// (a page of tables by id; limit 1 to flow.MaxPlanLimit, default
// flow.DefaultPlanLimit).
func (rs *resources) plan(w http.ResponseWriter, r *http.Request) {
	if rs.planFn == nil {
		writeError(w, http.StatusNotFound, "this server has no plan (it runs without the maintenance flow)")
		return
	}
	q, err := query(r, "table", "limit", "after")
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	pq := flow.PlanQuery{Now: rs.now()}
	if s := q.Get("table"); s != "" {
		if q.Has("limit") || q.Has("after") {
			rs.fail(w, r, badRequest("table selects one table; give it without limit and after"))
			return
		}
		name, err := admin.ParseTableName(s, "table")
		if err != nil {
			rs.fail(w, r, err)
			return
		}
		pq.Catalog, pq.Namespace, pq.Name = name.Catalog, name.Namespace, name.Table
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > flow.MaxPlanLimit {
			rs.fail(w, r, badRequest("limit %q: want a whole number from 1 to %d", s, flow.MaxPlanLimit))
			return
		}
		pq.Limit = n
	}
	if s := q.Get("after"); s != "" {
		if pq.AfterID, err = strconv.ParseInt(s, 10, 64); err != nil || pq.AfterID < 0 {
			rs.fail(w, r, badRequest("after %q: want the next value of the previous page (a table id)", s))
			return
		}
	}
	p, err := rs.planFn(r.Context(), pq)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jsonOK(w, p)
}
