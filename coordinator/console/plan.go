package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/coordinator/flow"
)

// This file is the plan page: what would run now and why, per table and
// policy, as GET /v1/plan and `tms-coordinator plan` answer it (the
// flow's dry run; nothing is enqueued).

// planVerdicts are the verdicts in the order the page explains them.
var planVerdicts = []string{flow.PlanRun, flow.PlanSkip, flow.PlanWait, flow.PlanOff}

type planData struct {
	Plan    flow.Plan
	Items   []flow.PlanItem // the page's items the verdict filter keeps
	Counts  map[string]int  // items per verdict on the page
	Table   string
	Verdict string
	Limit   int
	Next    string // the next page's URL, "" on the last
}

func (c *Console) plan(w http.ResponseWriter, r *http.Request, s session) {
	if c.cfg.Plan == nil {
		c.message(w, s, http.StatusNotImplemented, "Plan", "This coordinator has no plan: it runs without the maintenance flow.")
		return
	}
	q := r.URL.Query()
	d := planData{Table: q.Get("table"), Verdict: q.Get("verdict"), Limit: flow.DefaultPlanLimit, Counts: map[string]int{}}
	pq := flow.PlanQuery{Now: c.cfg.Now()}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > flow.MaxPlanLimit {
			c.message(w, s, http.StatusBadRequest, "Bad request", fmt.Sprintf("limit %q: want 1 to %d", v, flow.MaxPlanLimit))
			return
		}
		d.Limit = n
	}
	pq.Limit = d.Limit
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			c.message(w, s, http.StatusBadRequest, "Bad request", fmt.Sprintf("after %q: want a table id", v))
			return
		}
		pq.AfterID = n
	}
	if d.Verdict != "" && !slices.Contains(planVerdicts, d.Verdict) {
		c.message(w, s, http.StatusBadRequest, "Bad request", fmt.Sprintf("verdict %q: want one of run, skip, wait, off", d.Verdict))
		return
	}
	if d.Table != "" {
		name, err := admin.ParseTableName(d.Table, "table")
		if err != nil {
			c.fail(w, r, s, err)
			return
		}
		pq = flow.PlanQuery{Catalog: name.Catalog, Namespace: name.Namespace, Name: name.Table, Now: pq.Now}
	}
	p, err := c.cfg.Plan(r.Context(), pq)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d.Plan = p
	for _, it := range p.Items {
		d.Counts[it.Verdict]++
		if d.Verdict == "" || it.Verdict == d.Verdict {
			d.Items = append(d.Items, it)
		}
	}
	if p.Next != 0 {
		v := url.Values{"after": {strconv.FormatInt(p.Next, 10)}, "limit": {strconv.Itoa(d.Limit)}}
		if d.Verdict != "" {
			v.Set("verdict", d.Verdict)
		}
		d.Next = "/ui/plan?" + v.Encode()
	}
	c.render(w, s, http.StatusOK, "plan", "Plan", d)
}

// whenPtr formats an optional time for the plan page.
func (c *Console) whenPtr(t *time.Time) string {
	if t == nil {
		return "–"
	}
	return c.when(*t)
}
