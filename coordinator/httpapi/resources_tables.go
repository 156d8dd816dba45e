package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/store"
)

// This file is /v1/tables and the JSON shapes of tables, jobs and metrics
// that /v1/jobs shares.

// recentJobs is how many job rows GET /v1/tables/{table} shows.
const recentJobs = 10

// tableDoc is a registered table in JSON.
type tableDoc struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"` // CATALOG.NAMESPACE.TABLE
	Catalog   string    `json:"catalog"`
	Namespace string    `json:"namespace"`
	Table     string    `json:"table"`
	UUID      string    `json:"uuid"`
	CreatedAt time.Time `json:"createdAt"`
}

func tableDocOf(t store.Table) tableDoc {
	return tableDoc{ID: t.ID, Name: t.Catalog + "." + t.Namespace + "." + t.Name, Catalog: t.Catalog,
		Namespace: t.Namespace, Table: t.Name, UUID: t.UUID, CreatedAt: t.CreatedAt}
}

// tableStatusDoc is a table with its last job and latest metrics.
type tableStatusDoc struct {
	tableDoc
	LastJob *jobDoc     `json:"lastJob"`
	Metrics *metricsDoc `json:"metrics"`
	// RecentJobs is only set by GET /v1/tables/{table}.
	RecentJobs []jobDoc `json:"recentJobs,omitempty"`
}

// metricsDoc is a metrics row in JSON.
type metricsDoc struct {
	SnapshotID int64           `json:"snapshotId"`
	PolicyID   int64           `json:"policyId"`
	RecordedAt time.Time       `json:"recordedAt"`
	Value      json.RawMessage `json:"value"`
}

func metricsDocOf(m *store.SnapshotMetrics) *metricsDoc {
	if m == nil {
		return nil
	}
	return &metricsDoc{SnapshotID: m.SnapshotID, PolicyID: m.PolicyID, RecordedAt: m.RecordedAt, Value: m.Value}
}

// jobDoc is a job row in JSON, without its spec and outcomes (see
// jobDetail).
type jobDoc struct {
	ID               int64      `json:"id"`
	ExternalJobID    string     `json:"externalJobId"`
	Submitter        string     `json:"submitter"` // local, command or gravitino; empty if unknown
	TableID          int64      `json:"tableId"`
	PolicyID         int64      `json:"policyId"`
	Types            []string   `json:"types"`
	Trigger          string     `json:"trigger"`
	Status           string     `json:"status"`
	InFlight         bool       `json:"inFlight"`
	Fence            int64      `json:"fence"`
	BeforeSnapshotID *int64     `json:"beforeSnapshotId"`
	AfterSnapshotID  *int64     `json:"afterSnapshotId"`
	Error            string     `json:"error,omitempty"`
	CreatedAt        time.Time  `json:"createdAt"`
	StartedAt        *time.Time `json:"startedAt"`
	FinishedAt       *time.Time `json:"finishedAt"`
}

func jobDocOf(j store.Job) jobDoc {
	return jobDoc{ID: j.ID, ExternalJobID: j.JobID, Submitter: j.Submitter, TableID: j.TableID, PolicyID: j.PolicyID, Types: j.Types,
		Trigger: string(j.Trigger), Status: string(j.Status), InFlight: j.InFlight(), Fence: j.Fence,
		BeforeSnapshotID: j.BeforeSnapshotID, AfterSnapshotID: j.AfterSnapshotID, Error: j.Error,
		CreatedAt: j.CreatedAt, StartedAt: optTime(j.StartedAt), FinishedAt: optTime(j.FinishedAt)}
}

func jobDocsOf(jobs []store.Job) []jobDoc {
	out := make([]jobDoc, len(jobs))
	for i, j := range jobs {
		out[i] = jobDocOf(j)
	}
	return out
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
		out.Tables[i] = tableStatusDoc{tableDoc: tableDocOf(ts.Table), Metrics: metricsDocOf(ts.Metrics)}
		if ts.LastJob != nil {
			d := jobDocOf(*ts.LastJob)
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
	doc := tableStatusDoc{tableDoc: tableDocOf(t), RecentJobs: jobDocsOf(jobs)}
	if len(jobs) > 0 {
		doc.LastJob = &doc.RecentJobs[0]
	}
	if len(ms) > 0 {
		doc.Metrics = metricsDocOf(&ms[len(ms)-1])
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
