package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

func ptr[T any](v T) *T { return &v }

func TestTableRoutes(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		b := resSetup(t, backend)
		ctx := context.Background()
		orders := b.table("lake", "sales.eu", "orders", "u1")
		items := b.table("lake", "sales", "items", "u2")
		old := b.job(orders.ID, 1)
		require.NoError(t, b.st.FinishJob(ctx, old.ID, old.Fence, store.Finish{Status: store.StatusSucceeded}))
		last := b.job(orders.ID, 1)
		recorded := time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC)
		require.NoError(t, b.st.UpsertSnapshotMetrics(ctx, store.SnapshotMetrics{TableID: orders.ID, PolicyID: 1, SnapshotID: 41,
			Value: []byte(`{"file-number": 12, "small-file-number": 9}`), RecordedAt: recorded}))

		type tableDoc struct {
			ID         int64
			Name       string
			Catalog    string
			Namespace  string
			Table      string
			UUID       string
			LastJob    *jobDoc
			Metrics    *metricsDoc
			RecentJobs []jobDoc
		}
		var page struct {
			Tables []tableDoc
			Next   *int64
		}
		b.must(http.StatusOK, "GET", "/v1/tables?limit=1", "", &page)
		require.Len(t, page.Tables, 1)
		got := page.Tables[0]
		require.Equal(t, orders.ID, got.ID)
		require.Equal(t, "lake.sales.eu.orders", got.Name)
		require.Equal(t, "sales.eu", got.Namespace)
		require.Equal(t, "u1", got.UUID)
		require.Equal(t, last.ID, got.LastJob.ID)
		require.Equal(t, "pending", got.LastJob.Status)
		require.True(t, got.LastJob.InFlight)
		require.Equal(t, int64(41), got.Metrics.SnapshotID)
		require.JSONEq(t, `{"file-number": 12, "small-file-number": 9}`, string(got.Metrics.Value))
		require.Equal(t, orders.ID, *page.Next)

		b.must(http.StatusOK, "GET", fmt.Sprintf("/v1/tables?limit=1&after=%d", *page.Next), "", &page)
		require.Len(t, page.Tables, 1)
		require.Equal(t, items.ID, page.Tables[0].ID)
		require.Nil(t, page.Tables[0].LastJob)
		require.Nil(t, page.Tables[0].Metrics)
		b.must(http.StatusOK, "GET", fmt.Sprintf("/v1/tables?after=%d", items.ID), "", &page)
		require.Empty(t, page.Tables)
		require.Nil(t, page.Next, "the last page has no next")

		// One table, by id or by name, with its recent jobs.
		for _, ref := range []string{fmt.Sprint(orders.ID), "lake.sales.eu.orders"} {
			var one tableDoc
			b.must(http.StatusOK, "GET", "/v1/tables/"+ref, "", &one)
			require.Equal(t, orders.ID, one.ID, ref)
			require.Len(t, one.RecentJobs, 2)
			require.Equal(t, []int64{last.ID, old.ID}, []int64{one.RecentJobs[0].ID, one.RecentJobs[1].ID})
			require.Equal(t, last.ID, one.LastJob.ID)
			require.Equal(t, int64(41), one.Metrics.SnapshotID)
		}

		b.refuse(http.StatusBadRequest, "GET", "/v1/tables?limit=0", "", `limit "0"`)
		b.refuse(http.StatusBadRequest, "GET", "/v1/tables?limit=5000", "", `limit "5000"`)
		b.refuse(http.StatusBadRequest, "GET", "/v1/tables?after=x", "", `after "x"`)
		b.refuse(http.StatusBadRequest, "GET", "/v1/tables?page=2", "", `unknown query parameter "page"`)
		b.refuse(http.StatusBadRequest, "GET", "/v1/tables/abc", "", `table "abc": want a table id or CATALOG.NAMESPACE.TABLE`)
		b.refuse(http.StatusNotFound, "GET", "/v1/tables/999999", "", "table 999999")
		b.refuse(http.StatusNotFound, "GET", "/v1/tables/lake.sales.nope", "", "not found")
	})
}

func TestJobRoutes(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		b := resSetup(t, backend)
		ctx := context.Background()
		orders := b.table("lake", "sales", "orders", "u1")
		items := b.table("lake", "sales", "items", "u2")

		// A finished job with outcomes and metrics before and after.
		done := b.job(orders.ID, 1)
		require.NoError(t, b.st.SetJobID(ctx, done.ID, done.Fence, "run-77", "gravitino"))
		require.NoError(t, b.st.StartJob(ctx, done.ID, done.Fence, time.Time{}))
		require.NoError(t, b.st.SetBeforeSnapshot(ctx, done.ID, done.Fence, 100))
		for snap, files := range map[int64]int{100: 40, 200: 4} {
			require.NoError(t, b.st.UpsertSnapshotMetrics(ctx, store.SnapshotMetrics{TableID: orders.ID, PolicyID: 1, SnapshotID: snap,
				Value: []byte(fmt.Sprintf(`{"file-number": %d}`, files))}))
		}
		outcomes := `[{"type": "compaction", "outcome": "done"}, {"type": "snapshot-expiry", "outcome": "skipped", "reason": "below thresholds"}]`
		require.NoError(t, b.st.FinishJob(ctx, done.ID, done.Fence, store.Finish{Status: store.StatusSucceeded,
			AfterSnapshotID: ptr(int64(200)), Outcomes: []byte(outcomes)}))
		failed := b.job(orders.ID, 2)
		require.NoError(t, b.st.FinishJob(ctx, failed.ID, failed.Fence, store.Finish{Status: store.StatusFailed, Error: "boom"}))
		running := b.job(items.ID, 1)
		require.NoError(t, b.st.StartJob(ctx, running.ID, running.Fence, time.Time{}))
		pending := b.job(orders.ID, 1)

		var d jobDoc
		b.must(http.StatusOK, "GET", fmt.Sprintf("/v1/jobs/%d", done.ID), "", &d)
		require.Equal(t, "succeeded", d.Status)
		require.False(t, d.InFlight)
		require.Equal(t, "lake.sales.orders", d.Table.Name)
		require.Equal(t, []string{"compaction", "snapshot-expiry"}, d.Types)
		require.JSONEq(t, outcomes, string(d.Outcomes))
		require.Equal(t, int64(100), *d.BeforeSnapshotID)
		require.Equal(t, int64(200), *d.AfterSnapshotID)
		require.JSONEq(t, `{"file-number": 40}`, string(d.MetricsBefore.Value))
		require.JSONEq(t, `{"file-number": 4}`, string(d.MetricsAfter.Value))
		require.Equal(t, "run-77", d.ExternalJobID)
		require.Equal(t, ptr("gravitino"), d.Submitter, "the submitter kind is shown next to the external id")
		d = jobDoc{}
		b.must(http.StatusOK, "GET", fmt.Sprintf("/v1/jobs/%d", pending.ID), "", &d)
		require.True(t, d.InFlight)
		require.Equal(t, ptr(""), d.Submitter, "present and empty before the job was submitted")
		require.Nil(t, d.MetricsBefore)
		require.Equal(t, "null", string(d.Outcomes))

		type list struct {
			Jobs []jobDoc
			Next *int64
		}
		ids := func(path string) ([]int64, *int64) {
			t.Helper()
			var l list
			b.must(http.StatusOK, "GET", path, "", &l)
			out := []int64{}
			for _, j := range l.Jobs {
				out = append(out, j.ID)
			}
			return out, l.Next
		}
		all, next := ids("/v1/jobs")
		require.Equal(t, []int64{pending.ID, running.ID, failed.ID, done.ID}, all, "newest first")
		require.Nil(t, next)
		var l list
		b.must(http.StatusOK, "GET", "/v1/jobs?status=succeeded", "", &l)
		require.Len(t, l.Jobs, 1)
		require.Equal(t, [2]string{"run-77", "gravitino"}, [2]string{l.Jobs[0].ExternalJobID, *l.Jobs[0].Submitter})
		got, _ := ids("/v1/jobs?table=lake.sales.orders")
		require.Equal(t, []int64{pending.ID, failed.ID, done.ID}, got)
		got, _ = ids(fmt.Sprintf("/v1/jobs?table=%d&status=failed,succeeded", orders.ID))
		require.Equal(t, []int64{failed.ID, done.ID}, got)
		got, _ = ids("/v1/jobs?status=in-flight")
		require.Equal(t, []int64{pending.ID, running.ID}, got)
		got, _ = ids("/v1/jobs?status=finished")
		require.Equal(t, []int64{failed.ID, done.ID}, got)
		got, next = ids("/v1/jobs?limit=2")
		require.Equal(t, []int64{pending.ID, running.ID}, got)
		got, _ = ids(fmt.Sprintf("/v1/jobs?limit=2&before=%d", *next))
		require.Equal(t, []int64{failed.ID, done.ID}, got, "the next page")
		created := b.get(done.ID).CreatedAt
		window := url.Values{"since": {created.Add(-time.Hour).Format(time.RFC3339)}, "until": {created.Add(time.Hour).Format(time.RFC3339)}}
		got, _ = ids("/v1/jobs?" + window.Encode())
		require.Len(t, got, 4)
		got, _ = ids("/v1/jobs?since=" + url.QueryEscape(created.Add(time.Hour).Format(time.RFC3339)))
		require.Empty(t, got)
		got, _ = ids("/v1/jobs?until=" + url.QueryEscape(created.Add(-time.Hour).Format(time.RFC3339)))
		require.Empty(t, got)

		b.refuse(http.StatusBadRequest, "GET", "/v1/jobs?status=exploded", "", `unknown status "exploded"`)
		b.refuse(http.StatusBadRequest, "GET", "/v1/jobs?status=in-flight,finished", "", "status")
		b.refuse(http.StatusBadRequest, "GET", "/v1/jobs?since=yesterday", "", `since "yesterday"`)
		b.refuse(http.StatusBadRequest, "GET", "/v1/jobs?since=2030-01-02T00:00:00Z&until=2030-01-01T00:00:00Z", "", "until")
		b.refuse(http.StatusBadRequest, "GET", "/v1/jobs?limit=-1", "", `limit "-1"`)
		b.refuse(http.StatusBadRequest, "GET", "/v1/jobs?before=0", "", `before "0"`)
		b.refuse(http.StatusBadRequest, "GET", "/v1/jobs?table=lake..x", "", `table "lake..x": empty segment`)
		b.refuse(http.StatusBadRequest, "GET", "/v1/jobs?tabel=1", "", `unknown query parameter "tabel"`)
		b.refuse(http.StatusNotFound, "GET", "/v1/jobs?table=lake.sales.nope", "", "not found")
		b.refuse(http.StatusBadRequest, "GET", "/v1/jobs/abc", "", `id "abc"`)
		b.refuse(http.StatusNotFound, "GET", "/v1/jobs/999999", "", "999999")
	})
}

func TestCancelJob(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		b := resSetup(t, backend)
		ctx := context.Background()
		tables := []store.Table{b.table("lake", "db", "a", "u1"), b.table("lake", "db", "b", "u2"),
			b.table("lake", "db", "c", "u3"), b.table("lake", "db", "d", "u4"), b.table("lake", "db", "e", "u5")}
		submitted := func(tbl store.Table, ext string) store.Job {
			j := b.job(tbl.ID, 1)
			require.NoError(t, b.st.SetJobID(ctx, j.ID, j.Fence, ext, "local"))
			require.NoError(t, b.st.StartJob(ctx, j.ID, j.Fence, time.Time{}))
			return b.get(j.ID)
		}
		type result struct {
			Cancel string
			Job    jobDoc
		}
		var res result

		// A running job the submitter knows: asked to stop, the row is left
		// for its runner to close.
		running := submitted(tables[0], "local-7")
		b.sub.answer("local-7", nil)
		b.must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", running.ID), "", &res)
		require.Equal(t, "requested", res.Cancel)
		require.Equal(t, running.ID, res.Job.ID)
		require.True(t, res.Job.InFlight)
		require.Equal(t, []string{"local-7"}, b.sub.calls())
		require.Equal(t, running.Fence, b.get(running.ID).Fence, "the runner keeps its fence to close its own row")

		// A finished job: 409, the submitter is not asked.
		require.NoError(t, b.st.FinishJob(ctx, running.ID, running.Fence, store.Finish{Status: store.StatusCancelled}))
		b.refuse(http.StatusConflict, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", running.ID), "", "already finished: status cancelled")
		require.Len(t, b.sub.calls(), 1)

		// A job this node's submitter does not know: fenced out and closed.
		elsewhere := submitted(tables[1], "other-node-3")
		b.must(http.StatusOK, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", elsewhere.ID), "", &res)
		require.Equal(t, "closed", res.Cancel)
		require.Equal(t, "cancelled", res.Job.Status)
		require.Contains(t, res.Job.Error, "does not know job other-node-3")
		require.Greater(t, res.Job.Fence, elsewhere.Fence)
		require.ErrorIs(t, b.st.StartJob(ctx, elsewhere.ID, elsewhere.Fence, time.Time{}), store.ErrStaleFence, "its runner is fenced out")

		// A row not submitted yet: closed without asking the submitter.
		unsubmitted := b.job(tables[2].ID, 1)
		b.must(http.StatusOK, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", unsubmitted.ID), "", &res)
		require.Equal(t, "closed", res.Cancel)
		require.Contains(t, res.Job.Error, "before it was submitted")
		require.Equal(t, []string{"local-7", "other-node-3"}, b.sub.calls())

		// A job queued in this node's submitter: taken off the queue, and
		// its row (which no runner will ever close) closed at once.
		j := b.job(tables[4].ID, 1)
		require.NoError(t, b.st.SetJobID(ctx, j.ID, j.Fence, "local-8", "local"))
		b.sub.queue("local-8")
		b.must(http.StatusOK, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", j.ID), "", &res)
		require.Equal(t, "closed", res.Cancel)
		require.Equal(t, "cancelled", res.Job.Status)
		require.Contains(t, res.Job.Error, "before its runner started (job local-8 was queued)")
		require.Greater(t, res.Job.Fence, j.Fence)
		require.Equal(t, []string{"local-7", "other-node-3", "local-8"}, b.sub.calls())

		// A submitter that cannot be reached: 502, the row is untouched.
		broken := submitted(tables[3], "gravitino-9")
		b.sub.answer("gravitino-9", errors.New("connection refused"))
		b.refuse(http.StatusBadGateway, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", broken.ID), "", "connection refused")
		require.True(t, b.get(broken.ID).InFlight())

		b.refuse(http.StatusNotFound, "POST", "/v1/jobs/999999/cancel", "", "999999")
		b.refuse(http.StatusBadRequest, "POST", "/v1/jobs/x/cancel", "", `id "x"`)
	})
}
