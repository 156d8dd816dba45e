package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tms-dev/tms/store"
)

// The tables page and a table's page.

func TestTablesPage(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	var tbls []store.Table
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		tbls = append(tbls, f.table(n))
	}
	require.NoError(t, f.st.UpsertSnapshotMetrics(context.Background(), store.SnapshotMetrics{TableID: tbls[0].ID, SnapshotID: 9,
		Value: json.RawMessage(`{"data-file-number": 1234, "small-file-number": 77, "data-file-mse": 1.5e17, "delete-file-number": 5,
			"manifest-number": 12, "snapshot-number": 31}`), RecordedAt: now}))
	j := f.job(tbls[0].ID)
	ck := f.login(readToken)

	r := f.do(http.MethodGet, "/ui", ck, nil)
	require.Equal(t, http.StatusOK, r.code)
	for _, want := range []string{"Data files", "Small files", "Data-file MSE", "Delete files", "Manifests", "Snapshots",
		`<td class="n">1234</td>`, `<td class="n">77</td>`, `<td class="n">1.5e&#43;17</td>`, `<td class="n">5</td>`,
		`<td class="n">12</td>`, `<td class="n">31</td>`, fmt.Sprintf(`<a href="/ui/jobs/%d">compaction, snapshot-expiry</a>`, j.ID),
		`class="status-pending">pending<`} {
		require.Contains(t, r.body, want)
	}
	for _, tb := range tbls {
		require.Contains(t, r.body, "cat.db."+tb.Name+"<")
	}
	require.NotContains(t, r.body, "Next page")

	// Paged by ?limit= and ?after=.
	r = f.do(http.MethodGet, "/ui?limit=2", ck, nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "cat.db.a<")
	require.Contains(t, r.body, "cat.db.b<")
	require.NotContains(t, r.body, "cat.db.c<")
	next := fmt.Sprintf(`/ui?after=%d&amp;limit=2`, tbls[1].ID)
	require.Contains(t, r.body, next)
	r = f.do(http.MethodGet, strings.ReplaceAll(next, "&amp;", "&"), ck, nil)
	require.Contains(t, r.body, "cat.db.c<")
	require.Contains(t, r.body, "cat.db.d<")
	require.NotContains(t, r.body, "cat.db.b<")
	r = f.do(http.MethodGet, fmt.Sprintf("/ui?after=%d&limit=2", tbls[3].ID), ck, nil)
	require.Contains(t, r.body, "cat.db.e<")
	require.NotContains(t, r.body, "Next page")

	for _, bad := range []string{"/ui?limit=0", "/ui?limit=1001", "/ui?limit=x", "/ui?after=-1"} {
		require.Equal(t, http.StatusBadRequest, f.do(http.MethodGet, bad, ck, nil).code, bad)
	}
	// The pages not built yet answer, and unknown pages are 404.
	for _, p := range []string{"/ui/plan"} {
		r := f.do(http.MethodGet, p, ck, nil)
		require.Equal(t, http.StatusOK, r.code, p)
		require.Contains(t, r.body, "not built yet")
	}
	require.Equal(t, http.StatusNotFound, f.do(http.MethodGet, "/ui/nope", ck, nil).code)
}

func TestTablePage(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	tbl, empty := f.table("orders"), f.table("empty")
	rows := []string{
		`{"file-number": 10, "small-file-number": 8, "delete-file-number": 2, "manifest-number": 4, "snapshot-number": 3}`,
		`{"file-number": 12, "small-file-number": 9, "delete-file-number": 2, "manifest-number": 5, "snapshot-number": 4}`,
		`{"file-number": 3}`, // other keys absent: no point there
		`{"file-number": 4, "small-file-number": 0, "delete-file-number": 0, "manifest-number": 1, "snapshot-number": 1}`,
	}
	for i, v := range rows {
		require.NoError(t, f.st.UpsertSnapshotMetrics(context.Background(), store.SnapshotMetrics{TableID: tbl.ID, PolicyID: 1,
			SnapshotID: int64(100 + i), Value: json.RawMessage(v), RecordedAt: now.Add(time.Duration(i) * time.Hour)}))
	}
	done := f.job(tbl.ID)
	f.fail(done, "it broke")
	live := f.job(tbl.ID)
	require.NoError(t, f.st.SetBeforeSnapshot(context.Background(), live.ID, live.Fence, 103))
	require.NoError(t, f.st.SetJobID(context.Background(), live.ID, live.Fence, "ext-77", "local"))
	ck := f.login(readToken)

	r := f.do(http.MethodGet, tablePage(tbl), ck, nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Equal(t, len(rows), strings.Count(r.body, `<circle class="sample"`))
	require.Equal(t, 5, strings.Count(r.body, `<polyline class="line"`))
	require.Equal(t, 4+3*4, strings.Count(r.body, `<circle class="point"`))
	for _, want := range []string{"Files (data and delete)", "Small files", "Delete files", "Manifests", "Snapshots",
		"2030-06-01 12:00", "2030-06-01 15:00", ">12</text>", // y axis max of file-number
		`points="60,`, "snapshot 103, policy 1",
		fmt.Sprintf(`<a href="/ui/jobs/%d">%d</a>`, live.ID, live.ID), ">ext-77<", ">local<", ">103<", "it broke", ">commit<"} {
		require.Contains(t, r.body, want)
	}
	require.Less(t, strings.Index(r.body, fmt.Sprintf(`/ui/jobs/%d"`, live.ID)), strings.Index(r.body, fmt.Sprintf(`/ui/jobs/%d"`, done.ID)),
		"newest job first")

	// By row id too.
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, fmt.Sprintf("/ui/tables/%d", tbl.ID), ck, nil).code)

	r = f.do(http.MethodGet, tablePage(empty), ck, nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Zero(t, strings.Count(r.body, "<circle"))
	require.Contains(t, r.body, "No metrics recorded yet.")
	require.Contains(t, r.body, "No jobs yet.")

	for _, p := range []string{"/ui/tables/cat.db.missing", "/ui/tables/999"} {
		r = f.do(http.MethodGet, p, ck, nil)
		require.Equal(t, http.StatusNotFound, r.code, p)
		require.Contains(t, r.body, "<h1>Not found</h1>")
	}
	require.Equal(t, http.StatusBadRequest, f.do(http.MethodGet, "/ui/tables/cat..x", ck, nil).code)
}
