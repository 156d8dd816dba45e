package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

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
