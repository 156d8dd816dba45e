package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/console"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
)

// The jobs, job and queue pages, and cancelling from the job page.

func TestJobPageAndCancel(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		tbl := f.table("orders")
		done := f.job(tbl.ID)
		f.fail(done, "no")
		live := f.job(tbl.ID)
		livePage, cancelPath := fmt.Sprintf("/ui/jobs/%d", live.ID), fmt.Sprintf("/ui/jobs/%d/cancel", live.ID)
		adminCk, readCk := f.login(adminToken), f.login(readToken)

		// The admin sees the cancel form on an in-flight job only.
		r := f.do(http.MethodGet, livePage, adminCk, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.Contains(t, r.body, `action="`+cancelPath+`"`)
		require.Contains(t, r.body, "cat.db.orders")
		require.Contains(t, r.body, "(in flight)")
		adminCSRF := csrfOf(t, r.body)
		r = f.do(http.MethodGet, fmt.Sprintf("/ui/jobs/%d", done.ID), adminCk, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.NotContains(t, r.body, "/cancel")
		r = f.do(http.MethodGet, livePage, readCk, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.NotContains(t, r.body, "/cancel")
		readCSRF := csrfOf(t, r.body) // the logout form's
		require.NotEqual(t, adminCSRF, readCSRF)

		// CSRF guard.
		for _, tc := range []struct {
			name string
			form url.Values
			hdr  []string
		}{
			{"missing", url.Values{}, nil},
			{"wrong", url.Values{"csrf": {strings.Repeat("ab", 32)}}, nil},
			{"not hex", url.Values{"csrf": {"zz"}}, nil},
			{"another session's", url.Values{"csrf": {readCSRF}}, nil},
			{"cross-site origin", url.Values{"csrf": {adminCSRF}}, []string{"Origin", "https://evil.example"}},
			{"null origin", url.Values{"csrf": {adminCSRF}}, []string{"Origin", "null"}},
			{"sec-fetch-site", url.Values{"csrf": {adminCSRF}}, []string{"Sec-Fetch-Site", "cross-site"}},
			{"same-site is not same-origin", url.Values{"csrf": {adminCSRF}}, []string{"Sec-Fetch-Site", "same-site"}},
			{"a same-origin Origin does not outvote Sec-Fetch-Site", url.Values{"csrf": {adminCSRF}}, []string{"Origin", f.srv.URL, "Sec-Fetch-Site", "cross-site"}},
		} {
			r := f.do(http.MethodPost, cancelPath, adminCk, tc.form, tc.hdr...)
			require.Equal(t, http.StatusForbidden, r.code, tc.name)
			require.Contains(t, r.body, "CSRF check failed", tc.name)
		}
		// The read token cannot cancel, even with its own CSRF token.
		r = f.do(http.MethodPost, cancelPath, readCk, url.Values{"csrf": {readCSRF}})
		require.Equal(t, http.StatusForbidden, r.code)
		require.Contains(t, r.body, "needs the admin token")
		require.Empty(t, f.cancelled())

		// Right: same-origin, admin cookie, its CSRF token.
		r = f.do(http.MethodPost, cancelPath, adminCk, url.Values{"csrf": {adminCSRF}}, "Origin", f.srv.URL, "Sec-Fetch-Site", "same-origin")
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Contains(t, r.body, fmt.Sprintf("cancel of job %d &lt;requested&gt;", live.ID))
		require.Equal(t, []int64{live.ID}, f.cancelled())

		r = f.do(http.MethodPost, "/ui/jobs/999/cancel", adminCk, url.Values{"csrf": {adminCSRF}})
		require.Equal(t, http.StatusNotFound, r.code)
		require.Equal(t, http.StatusNotFound, f.do(http.MethodGet, "/ui/jobs/999", readCk, nil).code)
		require.Equal(t, http.StatusBadRequest, f.do(http.MethodGet, "/ui/jobs/x", readCk, nil).code)
		require.Equal(t, []int64{live.ID}, f.cancelled())
	})
}

func TestCancelErrorsAndUnavailable(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, func(c *console.Config) {
		c.Cancel = func(context.Context, int64) (string, error) { return "", errors.New("submitter <down>") }
	})
	live := f.job(f.table("orders").ID)
	ck := f.login(adminToken)
	csrf := csrfOf(t, f.do(http.MethodGet, fmt.Sprintf("/ui/jobs/%d", live.ID), ck, nil).body)
	r := f.do(http.MethodPost, fmt.Sprintf("/ui/jobs/%d/cancel", live.ID), ck, url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusInternalServerError, r.code)
	require.NotContains(t, r.body, "submitter")

	// Without a Cancel func: no button, and the POST answers 501.
	g := setup(t, store.BackendSQLite, func(c *console.Config) { c.Cancel = nil })
	live = g.job(g.table("orders").ID)
	ck = g.login(adminToken)
	r = g.do(http.MethodGet, fmt.Sprintf("/ui/jobs/%d", live.ID), ck, nil)
	require.NotContains(t, r.body, "/cancel")
	r = g.do(http.MethodPost, fmt.Sprintf("/ui/jobs/%d/cancel", live.ID), ck, url.Values{"csrf": {csrfOf(t, r.body)}})
	require.Equal(t, http.StatusNotImplemented, r.code)
}

// section returns the part of body from the heading title to the next
// heading (or the end).
func section(t *testing.T, body, title string) string {
	t.Helper()
	i := strings.Index(body, "<h2>"+title+"</h2>")
	require.GreaterOrEqual(t, i, 0, "no section %q", title)
	rest := body[i+len(title)+9:]
	if j := strings.Index(rest, "<h2>"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// jobLink is a job id's link on the jobs and queue pages.
func jobLink(id int64) string { return fmt.Sprintf(`<a href="/ui/jobs/%d">%d</a>`, id, id) }

func TestJobsPage(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		a, b := f.table("a"), f.table("b")
		failedA := f.job(a.ID)
		f.fail(failedA, "disk full")
		runningA := f.job(a.ID)
		require.NoError(t, f.st.StartJob(context.Background(), runningA.ID, runningA.Fence, now.Add(-90*time.Second)))
		require.NoError(t, f.st.SetJobID(context.Background(), runningA.ID, runningA.Fence, "ext-9", "local"))
		pendingB := f.job(b.ID)
		ck := f.login(readToken)

		r := f.do(http.MethodGet, "/ui/jobs", ck, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		running, recent := section(t, r.body, "Running"), section(t, r.body, "Recent jobs")
		for _, j := range []store.Job{runningA, pendingB} {
			require.Contains(t, running, jobLink(j.ID))
		}
		require.NotContains(t, running, jobLink(failedA.ID))
		for _, want := range []string{jobLink(failedA.ID), jobLink(runningA.ID), jobLink(pendingB.ID),
			`<a href="` + tablePage(a) + `">cat.db.a</a>`, `<a href="` + tablePage(b) + `">cat.db.b</a>`,
			"compaction, snapshot-expiry", ">commit<", `class="status-failed">failed<`, `class="status-running">running<`,
			">local<", ">ext-9<", "disk full", ">1m30s so far<"} {
			require.Contains(t, recent, want)
		}
		require.Less(t, strings.Index(recent, jobLink(pendingB.ID)), strings.Index(recent, jobLink(failedA.ID)), "newest first")
		require.NotContains(t, r.body, "Next page")

		// Status filter.
		r = f.do(http.MethodGet, "/ui/jobs?status=failed", ck, nil)
		require.Equal(t, http.StatusOK, r.code)
		recent = section(t, r.body, "Recent jobs")
		require.Contains(t, recent, jobLink(failedA.ID))
		require.NotContains(t, recent, jobLink(runningA.ID))
		require.NotContains(t, recent, jobLink(pendingB.ID))
		require.Contains(t, r.body, `<option value="failed" selected>`)
		r = f.do(http.MethodGet, "/ui/jobs?status=failed,pending", ck, nil)
		recent = section(t, r.body, "Recent jobs")
		require.Contains(t, recent, jobLink(failedA.ID))
		require.Contains(t, recent, jobLink(pendingB.ID))
		require.NotContains(t, recent, jobLink(runningA.ID))

		// Table filter, by name or row id; it also narrows the running rows.
		for _, q := range []string{"table=cat.db.b", fmt.Sprintf("table=%d", b.ID)} {
			r = f.do(http.MethodGet, "/ui/jobs?"+q, ck, nil)
			require.Equal(t, http.StatusOK, r.code, q)
			running, recent = section(t, r.body, "Running"), section(t, r.body, "Recent jobs")
			require.Contains(t, recent, jobLink(pendingB.ID), q)
			require.NotContains(t, recent, jobLink(failedA.ID), q)
			require.NotContains(t, running, jobLink(runningA.ID), q)
		}

		// In-flight and creation-time filters.
		r = f.do(http.MethodGet, "/ui/jobs?inflight=false", ck, nil)
		recent = section(t, r.body, "Recent jobs")
		require.Contains(t, recent, jobLink(failedA.ID))
		require.NotContains(t, recent, jobLink(pendingB.ID))
		r = f.do(http.MethodGet, "/ui/jobs?since=2000-01-01&until=2999-01-01T00:00:00Z", ck, nil)
		require.Contains(t, section(t, r.body, "Recent jobs"), jobLink(failedA.ID))
		r = f.do(http.MethodGet, "/ui/jobs?until=2000-01-01T10:00", ck, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.Contains(t, section(t, r.body, "Recent jobs"), "No jobs.")

		// Pages through ?before=, keeping the filters.
		r = f.do(http.MethodGet, "/ui/jobs?limit=2&inflight=true", ck, nil)
		recent = section(t, r.body, "Recent jobs")
		require.Contains(t, recent, jobLink(pendingB.ID))
		require.Contains(t, recent, jobLink(runningA.ID))
		next := fmt.Sprintf(`/ui/jobs?before=%d&amp;inflight=true&amp;limit=2`, runningA.ID)
		require.Contains(t, r.body, `<a href="`+next+`">Next page</a>`)
		r = f.do(http.MethodGet, strings.ReplaceAll(next, "&amp;", "&"), ck, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.NotContains(t, r.body, "<h2>Running</h2>", "running rows on the first page only")
		require.Contains(t, section(t, r.body, "Recent jobs"), "No jobs.")
		require.NotContains(t, r.body, "Next page")

		// A bad filter is a 400 naming the parameter.
		for _, tc := range []struct{ query, param string }{
			{"status=bogus", "status"}, {"status=failed,nope", "status"}, {"table=cat.db.missing", "table"},
			{"table=cat..x", "table"}, {"table=-3", "table"}, {"inflight=maybe", "inflight"}, {"since=yesterday", "since"},
			{"until=2030-13-01", "until"}, {"since=2030-01-02&until=2030-01-01", "until"}, {"limit=0", "limit"},
			{"limit=1001", "limit"}, {"before=x", "before"}, {"before=0", "before"},
		} {
			r := f.do(http.MethodGet, "/ui/jobs?"+tc.query, ck, nil)
			require.Equal(t, http.StatusBadRequest, r.code, tc.query)
			require.Contains(t, r.body, "Query parameter "+tc.param+":", tc.query)
		}
	})
}

func TestJobsPageEscapesAndCutsErrors(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		tbl := f.table("<script>x</script>")
		const evil = `<img src=x onerror=alert(1)>`
		f.fail(f.job(tbl.ID), evil)
		long := strings.Repeat("é", 199) + "<b>" + strings.Repeat("z", 100)
		f.fail(f.job(tbl.ID), long)
		ck := f.login(readToken)

		r := f.do(http.MethodGet, "/ui/jobs?status=bogus<script>", ck, nil)
		require.Equal(t, http.StatusBadRequest, r.code)
		require.NotContains(t, r.body, "<script>")

		r = f.do(http.MethodGet, "/ui/jobs?table="+url.QueryEscape(`"><script>`), ck, nil)
		require.Equal(t, http.StatusBadRequest, r.code)
		require.NotContains(t, r.body, "<script>")

		r = f.do(http.MethodGet, "/ui/jobs?table="+url.QueryEscape("cat.db.<script>x</script>"), ck, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.NotContains(t, r.body, "<img")
		require.NotContains(t, r.body, "<script>")
		require.NotContains(t, r.body, "<b>")
		require.Contains(t, r.body, "&lt;img src=x onerror=alert(1)&gt;")
		require.Contains(t, r.body, `value="cat.db.&lt;script&gt;x&lt;/script&gt;"`, "the filter form is refilled, escaped")
		require.Contains(t, r.body, `href="`+tablePage(tbl)+`"`)
		// The long error is cut at 200 characters.
		require.Contains(t, r.body, strings.Repeat("é", 199)+"&lt;…<")
		require.NotContains(t, r.body, "zzz")
	})
}

func TestQueuePage(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, func(cfg *console.Config) {
			cfg.NodeID = "node-live"
			cfg.Watchdog = func() error { return errors.New("claims not heartbeated for <2m>") }
		})
		ctx := context.Background()
		for _, task := range []store.NewTask{
			{TaskKey: store.TaskKey{Name: "cron-job", Instance: "table:1:1"}, ExecutionTime: now.Add(2 * time.Hour)},
			{TaskKey: store.TaskKey{Name: "cron-job", Instance: "table:2:1"}, ExecutionTime: now.Add(90 * time.Minute)},
			{TaskKey: store.TaskKey{Name: "commit-job", Instance: "7"}, ExecutionTime: now.Add(-time.Minute)},
		} {
			created, err := f.st.UpsertTask(ctx, task, now)
			require.NoError(t, err)
			require.True(t, created)
		}
		require.NoError(t, f.st.RegisterNode(ctx, "node-live", now.Add(-time.Hour)))
		require.NoError(t, f.st.HeartbeatNode(ctx, "node-live", now.Add(-10*time.Second)))
		require.NoError(t, f.st.SetNodeCatalogs(ctx, "node-live", []string{"cat", "other"}))
		require.NoError(t, f.st.RegisterNode(ctx, "node-dead", now.Add(-2*time.Hour)))

		// One in-flight row per table.
		newJob := func(table, node string) store.Job {
			j, err := f.st.CreateJob(ctx, store.NewJob{TableID: f.table(table).ID, Types: []string{"compaction"}, Trigger: store.TriggerCron, Node: node})
			require.NoError(t, err)
			return j
		}
		finished := newJob("orders", "node-dead")
		f.fail(finished, "done")
		deadJob, goneJob, liveJob, manual := newJob("t1", "node-dead"), newJob("t2", "node-gone"), newJob("t3", "node-live"), newJob("t4", "")
		ck := f.login(readToken)

		r := f.do(http.MethodGet, "/ui/queue", ck, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		tasks := section(t, r.body, "Scheduled tasks")
		require.Contains(t, tasks, `<td>cron-job</td><td class="n">2</td><td class="n">0</td><td class="n">0</td>`)
		require.Contains(t, tasks, "<td>2030-06-01 13:30:00Z (in 1h30m0s)</td>")
		require.Contains(t, tasks, `<td>commit-job</td><td class="n">1</td><td class="n">1</td><td class="n">0</td>`)
		require.Contains(t, tasks, "<td>2030-06-01 11:59:00Z (due now)</td>")

		nodes := section(t, r.body, "Coordinator nodes")
		require.Contains(t, nodes, "older than 6m0s.")
		require.Contains(t, nodes, `<td>node-live</td><td>alive</td>
<td>2030-06-01 11:59:50Z</td><td class="n">10s</td><td>2030-06-01 11:00:00Z</td><td>cat, other</td>`)
		require.Contains(t, nodes, `<td>node-dead</td><td class="status-failed">dead</td>
<td>2030-06-01 10:00:00Z</td><td class="n">2h0m0s</td><td>2030-06-01 10:00:00Z</td><td>not reported</td>`)
		require.Contains(t, nodes, "<td>cat, other</td><td>unhealthy (this node): claims not heartbeated for &lt;2m&gt;</td>", "this node's watchdog")
		require.Contains(t, nodes, "<td>not reported</td><td>– (its /readyz)</td>", "another node's is not in the ledger")

		orphans := section(t, r.body, "Rows owned by dead nodes")
		require.Contains(t, orphans, "4 in-flight rows read")
		require.Contains(t, orphans, jobLink(deadJob.ID))
		require.Contains(t, orphans, "<td>node-dead</td><td>dead: last heartbeat 2h0m0s ago</td>")
		require.Contains(t, orphans, jobLink(goneJob.ID))
		require.Contains(t, orphans, "<td>node-gone</td><td>no node row</td>")
		require.Contains(t, orphans, `<a href="/ui/tables/cat.db.t1">cat.db.t1</a>`)
		for _, j := range []store.Job{liveJob, manual, finished} {
			require.NotContains(t, orphans, jobLink(j.ID))
		}

		// With a longer dead-node limit node-dead is alive and its row not listed.
		c, err := console.New(console.Config{Store: f.st, ReadToken: readToken, Now: func() time.Time { return now },
			DeadNodeAfter: 3 * time.Hour})
		require.NoError(t, err)
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/ui/queue", nil)
		req.Header.Set("Authorization", "Bearer "+readToken)
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		require.Contains(t, rec.Body.String(), "<td>node-dead</td><td>alive</td>")
		orphans = section(t, rec.Body.String(), "Rows owned by dead nodes")
		require.NotContains(t, orphans, jobLink(deadJob.ID))
		require.Contains(t, orphans, jobLink(goneJob.ID))
	})
}

func TestQueuePageEmpty(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	r := f.do(http.MethodGet, "/ui/queue", adminToken, nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "No scheduled tasks.")
	require.Contains(t, r.body, "No coordinator nodes registered.")
	require.Contains(t, r.body, "0 in-flight rows read")
	_, err := console.New(console.Config{Store: f.st, DeadNodeAfter: -time.Second})
	require.ErrorIs(t, err, invalid.ErrArgument)
}

// TestJobPageMetricsAndLog: a job's page shows the metrics at its before
// and after snapshots (its policy's rows) and where its runner log is.
func TestJobPageMetricsAndLog(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, func(cfg *console.Config) {
			cfg.LocalLogPath = func(id int64) string { return fmt.Sprintf("/var/log/tms/job-%d.log", id) }
		})
		ctx := context.Background()
		tbl := f.table("orders")
		j, err := f.st.CreateJob(ctx, store.NewJob{TableID: tbl.ID, PolicyID: 7, Types: []string{"compaction"}, Trigger: store.TriggerCron, Node: "node-a"})
		require.NoError(t, err)
		pending := f.do(http.MethodGet, fmt.Sprintf("/ui/jobs/%d", j.ID), readToken, nil)
		require.Contains(t, pending.body, "none yet: the job has not been submitted")
		require.Contains(t, pending.body, "No metrics recorded at the job")
		require.NoError(t, f.st.SetJobID(ctx, j.ID, j.Fence, "local-1-1-x", "local"))
		require.NoError(t, f.st.StartJob(ctx, j.ID, j.Fence, time.Time{}))
		require.NoError(t, f.st.SetBeforeSnapshot(ctx, j.ID, j.Fence, 11))
		after := int64(12)
		for _, m := range []store.SnapshotMetrics{
			{TableID: tbl.ID, PolicyID: 7, SnapshotID: 11, Value: json.RawMessage(`{"data-file-number": 200, "data-file-mse": 2.5e17}`)},
			{TableID: tbl.ID, PolicyID: 9, SnapshotID: 11, Value: json.RawMessage(`{"data-file-number": 999}`)}, // another policy's row
			{TableID: tbl.ID, PolicyID: 7, SnapshotID: 12, Value: json.RawMessage(`{"data-file-number": 1, "data-file-mse": 0}`)},
		} {
			require.NoError(t, f.st.UpsertSnapshotMetrics(ctx, m))
		}
		require.NoError(t, f.st.FinishJob(ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded, AfterSnapshotID: &after}))
		r := f.do(http.MethodGet, fmt.Sprintf("/ui/jobs/%d", j.ID), readToken, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Contains(t, r.body, `<tr><td>data-file-number</td><td class="n">200</td><td class="n">1</td></tr>`)
		require.Contains(t, r.body, `<tr><td>data-file-mse</td><td class="n">2.5e&#43;17</td><td class="n">0</td></tr>`)
		require.NotContains(t, r.body, ">999<", "the job's policy's row")
		require.Contains(t, r.body, fmt.Sprintf("/var/log/tms/job-%d.log on node node-a", j.ID))
	})
}
