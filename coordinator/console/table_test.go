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
