package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
)

// This file is a table's page: its server-drawn charts over the metrics
// rows, with every job marked, and its job history.

// JobMarks bounds the jobs a table page's charts mark: the newest JobMarks
// created by the last sample (one store.LedgerQueries page). When older
// jobs also ran within the charted range, the page says they are not
// marked and links to them.
const JobMarks = store.MaxQueryLimit

type tableData struct {
	Table    store.Table
	Name     string
	Timeline *timeline
	Charts   []chart
	// Marked is how many jobs the charts mark. MarkCut is set when older
	// jobs in the charted range are not marked (the newest MarkLimit were
	// read): the oldest one read, whose id is the cursor of the jobs page
	// that lists the older ones.
	Marked    int
	MarkLimit int
	MarkCut   *store.Job
	Jobs      []historyRow
	// MoreJobs says the table has more jobs than the history shows.
	MoreJobs bool
}

// historyRow is a job of the page's history table.
type historyRow struct {
	store.Job
	Took string // started to finished (or to now while in flight), "–" if not started
	// Outcomes is the decoded outcomes column, nil if the column is NULL
	// or not a list of objects; RawOutcomes is then the column as stored
	// ("" for NULL).
	Outcomes    []outcomeView
	RawOutcomes string
}

// outcomeView is one maintenance type of a finished job as the history
// shows it. (Not an embedding: the template's .Outcome would then be the
// embedded struct, not its field.)
type outcomeView store.Outcome

// Took is the type's wall time, "" if not recorded.
func (o outcomeView) Took() string {
	if o.DurationMs == nil {
		return ""
	}
	return (time.Duration(*o.DurationMs) * time.Millisecond).String()
}

// Snapshots is "before → after", "" if neither is recorded.
func (o outcomeView) Snapshots() string {
	if o.BeforeSnapshotID == 0 && o.AfterSnapshotID == 0 {
		return ""
	}
	id := func(v int64) string {
		if v == 0 {
			return "–"
		}
		return strconv.FormatInt(v, 10)
	}
	return id(o.BeforeSnapshotID) + " → " + id(o.AfterSnapshotID)
}

func (c *Console) table(w http.ResponseWriter, r *http.Request, s session) {
	ctx := r.Context()
	t, err := c.findTable(ctx, r.PathValue("name"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	ms, err := c.cfg.Store.ListSnapshotMetrics(ctx, t.ID)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	jobs, err := c.cfg.Store.ListJobs(ctx, t.ID, JobHistory)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	now := c.cfg.Now()
	d := tableData{Table: t, Name: t.Catalog + "." + t.Namespace + "." + t.Name, MarkLimit: JobMarks, MoreJobs: len(jobs) == JobHistory}
	for _, j := range jobs {
		d.Jobs = append(d.Jobs, history(j, now))
	}
	if len(ms) > 0 {
		marks, cut, err := c.markedJobs(ctx, t.ID, ms[0].RecordedAt, ms[len(ms)-1].RecordedAt, now)
		if err != nil {
			c.fail(w, r, s, err)
			return
		}
		d.Timeline, d.Charts, d.Marked = charts(ms, marks, now)
		if cut {
			d.MarkCut = &marks[len(marks)-1]
		}
	}
	c.render(w, s, http.StatusOK, "table", d.Name, d)
}

// markedJobs reads the jobs the charts over [t0, t1] may mark: the table's
// newest JobMarks created by t1 (a job created later cannot have run in the
// range), newest first. cut reports that the next older job still ran
// within the range, so the page must say older jobs are not marked.
func (c *Console) markedJobs(ctx context.Context, tableID int64, t0, t1, now time.Time) (jobs []store.Job, cut bool, err error) {
	// created_at < until; a job created in the millisecond after t1 is
	// read and then left out by the overlap test.
	q := store.JobQuery{TableID: tableID, Until: t1.Add(time.Millisecond), Limit: JobMarks}
	if jobs, err = c.ledger.QueryJobs(ctx, q); err != nil || len(jobs) < JobMarks {
		return jobs, false, err
	}
	q.BeforeID, q.Limit = jobs[len(jobs)-1].ID, 1
	older, err := c.ledger.QueryJobs(ctx, q)
	if err != nil {
		return nil, false, err
	}
	if len(older) == 0 {
		return jobs, false, nil
	}
	_, end := jobSpan(older[0], now)
	return jobs, !end.Before(t0), nil
}

// jobSpan is when j ran: from its start (its creation if it never started)
// to its finish, or to now while in flight (never before the start).
func jobSpan(j store.Job, now time.Time) (start, end time.Time) {
	start, end = j.StartedAt, j.FinishedAt
	if start.IsZero() {
		start = j.CreatedAt
	}
	if end.IsZero() {
		end = now
	}
	if end.Before(start) {
		end = start
	}
	return start, end
}

// history is j as the history table shows it.
func history(j store.Job, now time.Time) historyRow {
	h := historyRow{Job: j, Took: "–"}
	if !j.StartedAt.IsZero() {
		_, end := jobSpan(j, now)
		h.Took = age(end.Sub(j.StartedAt))
		if j.InFlight() {
			h.Took += " so far"
		}
	}
	outs, err := j.DecodeOutcomes()
	if err != nil {
		h.RawOutcomes = string(j.Outcomes)
	}
	for _, o := range outs {
		h.Outcomes = append(h.Outcomes, outcomeView(o))
	}
	return h
}

// findTable resolves a table given as a row id or CATALOG.NAMESPACE.TABLE
// (the newest incarnation).
func (c *Console) findTable(ctx context.Context, s string) (store.Table, error) {
	if s != "" && !strings.Contains(s, ".") {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return store.Table{}, fmt.Errorf("%w: table %q: want a table id or CATALOG.NAMESPACE.TABLE", invalid.ErrArgument, s)
		}
		return c.cfg.Store.GetTable(ctx, id)
	}
	name, err := admin.ParseTableName(s, "table")
	if err != nil {
		return store.Table{}, err
	}
	return c.cfg.Store.FindTable(ctx, name.Catalog, name.Namespace, name.Table)
}
