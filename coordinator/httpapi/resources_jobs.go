package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/store"
)

// This file is /v1/jobs: the ledger's job rows, filtered, one with its
// outcomes and metrics, and cancel.

// jobList is GET /v1/jobs: a page, newest first, and the before of the
// next page (null on the last page).
type jobList struct {
	Jobs []admin.JobDoc `json:"jobs"`
	Next *int64         `json:"next"`
}

// Pseudo statuses of the status filter.
const (
	statusInFlight = "in-flight"
	statusFinished = "finished"
)

// listJobs is GET /v1/jobs?table=&status=&since=&until=&limit=&before=.
func (rs *resources) listJobs(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "table", "status", "since", "until", "limit", "before")
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jq, err := rs.jobQuery(r.Context(), q)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jobs, err := rs.ledger.QueryJobs(r.Context(), jq)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	out := jobList{Jobs: admin.JobDocsOf(jobs)}
	if len(jobs) == jq.Limit {
		out.Next = &jobs[len(jobs)-1].ID
	}
	jsonOK(w, out)
}

// jobQuery turns the query parameters into a store.JobQuery.
func (rs *resources) jobQuery(ctx context.Context, q url.Values) (store.JobQuery, error) {
	var jq store.JobQuery
	var err error
	get := q.Get
	if jq.Limit, err = limitParam(q); err != nil {
		return jq, err
	}
	if s := get("table"); s != "" {
		t, err := rs.findTable(ctx, "table", s)
		if err != nil {
			return jq, err
		}
		jq.TableID = t.ID
	}
	if s := get("status"); s != "" {
		for _, st := range strings.Split(s, ",") {
			st = strings.TrimSpace(st)
			switch st {
			case statusInFlight, statusFinished:
				inFlight := st == statusInFlight
				if jq.InFlight != nil && *jq.InFlight != inFlight {
					return jq, badRequest("status %q: in-flight and finished exclude each other", s)
				}
				jq.InFlight = &inFlight
				continue
			}
			if !slices.Contains(store.JobStatuses(), store.JobStatus(st)) {
				return jq, badRequest("status %q: unknown status %q; want a comma-separated list of %s, %s or %s",
					s, st, joinStatuses(), statusInFlight, statusFinished)
			}
			jq.Statuses = append(jq.Statuses, store.JobStatus(st))
		}
	}
	now := rs.now()
	if jq.Since, err = timeParam("since", get("since"), now); err != nil {
		return jq, err
	}
	if jq.Until, err = timeParam("until", get("until"), now); err != nil {
		return jq, err
	}
	if !jq.Since.IsZero() && !jq.Until.IsZero() && !jq.Until.After(jq.Since) {
		return jq, badRequest("until %q must be after since %q", get("until"), get("since"))
	}
	if s := get("before"); s != "" {
		if jq.BeforeID, err = idParam("before", s); err != nil {
			return jq, err
		}
	}
	return jq, nil
}

func joinStatuses() string {
	statuses := store.JobStatuses()
	names := make([]string, len(statuses))
	for i, s := range statuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func (rs *resources) getJob(w http.ResponseWriter, r *http.Request) {
	id, err := jobIDParam(r)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	d, err := rs.jobDetail(r.Context(), id)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jsonOK(w, d)
}

// jobIDParam is the {id} of a /v1/jobs/{id} route, which takes no query
// parameters.
func jobIDParam(r *http.Request) (int64, error) {
	if _, err := query(r); err != nil {
		return 0, err
	}
	return idParam("id", r.PathValue("id"))
}

// jobDetail is GET /v1/jobs/{id}: the row, its table, the per-type
// outcomes the runner recorded, its spec, and the table's metrics at the
// before and after snapshots.
func (rs *resources) jobDetail(ctx context.Context, id int64) (admin.JobDetail, error) {
	j, err := rs.st.GetJob(ctx, id)
	if err != nil {
		return admin.JobDetail{}, err
	}
	t, err := rs.st.GetTable(ctx, j.TableID)
	if err != nil {
		return admin.JobDetail{}, fmt.Errorf("table of job %d: %w", j.ID, err)
	}
	ms, err := rs.st.ListSnapshotMetrics(ctx, j.TableID)
	if err != nil {
		return admin.JobDetail{}, err
	}
	return admin.JobDetailOf(j, t, ms), nil
}

// cancelResult answers POST /v1/jobs/{id}/cancel.
type cancelResult struct {
	// Cancel says what was done: "requested" (the submitter was asked to
	// stop the job; its runner closes the row cancelled, or the reconciler
	// does) or "closed" (the row was fenced out and closed cancelled here,
	// because no submitter on this node knows a job for it).
	Cancel string          `json:"cancel"`
	Job    admin.JobDetail `json:"job"`
}

// cancelJob is POST /v1/jobs/{id}/cancel. A finished row is 409. A row
// with an external job id is cancelled through the submitter (202); a row
// not yet submitted, whose job this node's submitter does not know
// (submitted by another node or before a restart), or whose job ended
// without its runner closing the row (a queued job taken off the queue),
// is fenced out and closed cancelled (200), so its runner, wherever it
// runs, stops at its next ledger write or commit check.
func (rs *resources) cancelJob(w http.ResponseWriter, r *http.Request) {
	id, err := jobIDParam(r)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	ctx := r.Context()
	res, err := admin.CancelJob(ctx, rs.st, rs.sub, id, "over the HTTP API", rs.now())
	var nf *admin.NotInFlightError
	var se *admin.SubmitterError
	switch {
	case errors.As(err, &nf):
		rs.fail(w, r, &httpError{code: http.StatusConflict, msg: nf.Error()})
		return
	case errors.As(err, &se):
		rs.log.Warn("cancel failed", zap.Int64("job", id), zap.String("external_job_id", se.JobID), zap.Error(se.Err))
		rs.fail(w, r, &httpError{code: http.StatusBadGateway, msg: se.Error()})
		return
	case err != nil:
		rs.fail(w, r, err)
		return
	}
	j := res.Job
	code, how := http.StatusAccepted, "requested"
	if res.Closed {
		code, how = http.StatusOK, "closed"
	}
	rs.log.Info("job cancelled over the HTTP API", zap.Int64("job", j.ID), zap.String("external_job_id", j.JobID), zap.String("cancel", how))
	d, err := rs.jobDetail(ctx, j.ID)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	writeJSON(w, code, cancelResult{Cancel: how, Job: d})
}
