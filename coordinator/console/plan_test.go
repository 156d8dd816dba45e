package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/console"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/store"
)

// TestPlanPage: the plan page shows the flow's plan, one row per (table,
// policy) with its verdict, reason and threshold decision, escapes table
// names, filters by verdict, pages by table, and refuses bad parameters.
func TestPlanPage(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		var fl *flow.Flow
		f := setup(t, backend, func(cfg *console.Config) {
			var err error
			fl, err = flow.NewFlow(cfg.Store, nil, flow.FlowConfig{DBURL: "unused://the plan submits nothing"})
			require.NoError(t, err)
			cfg.Plan = fl.Plan
		})
		ctx := context.Background()
		mk := func(name, typ, content string, enabled bool, obj store.PolicyObject) {
			_, err := f.st.CreatePolicy(ctx, store.NewPolicy{Name: name, Type: typ, Enabled: enabled, Content: json.RawMessage(content)})
			require.NoError(t, err)
			_, _, err = f.st.Attach(ctx, name, obj)
			require.NoError(t, err)
		}
		big, evil := f.table("big"), f.table("<script>alert(1)</script>")
		mk("compact", "system_iceberg_compaction", `{"schedule": {"crontab": "@daily"}, "minDataFileMse": 100}`, true,
			store.PolicyObject{Level: store.LevelCatalog, Catalog: "cat"})
		mk("expire", "system_iceberg_snapshot_expiration", `{"schedule": {"onCommit": true}}`, false,
			store.PolicyObject{Level: store.LevelTable, Catalog: "cat", Namespace: "db", Table: "big"})
		require.NoError(t, f.st.UpsertSnapshotMetrics(ctx, store.SnapshotMetrics{TableID: big.ID, SnapshotID: 7,
			Value: json.RawMessage(`{"data-file-number": 6, "small-file-number": 6, "data-file-mse": 250}`), RecordedAt: now.Add(-time.Hour)}))

		r := f.do(http.MethodGet, "/ui/plan", readToken, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Equal(t, 3, strings.Count(r.body, `<td class="verdict-`), "compaction on both tables, expiry on big")
		require.Equal(t, 2, strings.Count(r.body, `<td class="verdict-run">`))
		require.Equal(t, 1, strings.Count(r.body, `<td class="verdict-off">`))
		require.Contains(t, r.body, html.EscapeString("<script>alert(1)</script>"))
		require.NotContains(t, r.body, "<script>alert(1)")
		p, err := fl.Plan(ctx, flow.PlanQuery{Now: now})
		require.NoError(t, err)
		for _, it := range p.Items {
			require.Contains(t, r.body, html.EscapeString(it.Reason), "%s %s", it.Table, it.Type)
		}
		require.Contains(t, r.body, html.EscapeString("data-file-mse 250 ≥ minDataFileMse 100"))
		require.Contains(t, r.body, "no usable sample yet")
		require.Contains(t, r.body, "no policy-expand row yet", "without a policy-expand row, the crontab's own next instant")
		require.Contains(t, r.body, "snapshot 7")

		r = f.do(http.MethodGet, "/ui/plan?verdict=off", readToken, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Equal(t, 1, strings.Count(r.body, `<td class="verdict-`))
		require.Contains(t, r.body, "policy disabled")

		r = f.do(http.MethodGet, "/ui/plan?limit=1", readToken, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Contains(t, r.body, "/ui/plan?after=")
		require.NotContains(t, r.body, html.EscapeString(evil.Name), "the second table is on the next page")

		r = f.do(http.MethodGet, "/ui/plan?table="+"cat.db.big", readToken, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Equal(t, 2, strings.Count(r.body, `<td class="verdict-`))

		for path, want := range map[string]int{
			"/ui/plan?verdict=maybe":     http.StatusBadRequest,
			"/ui/plan?limit=0":           http.StatusBadRequest,
			"/ui/plan?after=x":           http.StatusBadRequest,
			"/ui/plan?table=nodots":      http.StatusBadRequest,
			"/ui/plan?table=cat.db.none": http.StatusNotFound,
		} {
			r := f.do(http.MethodGet, path, readToken, nil)
			require.Equal(t, want, r.code, "%s: %s", path, r.body)
		}
		r = f.do(http.MethodGet, "/ui/plan", nil, nil)
		require.Equal(t, http.StatusSeeOther, r.code, "no token: to the login form")
	})
}

// TestPlanPageWithoutFlow: a console without a plan says so.
func TestPlanPageWithoutFlow(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	r := f.do(http.MethodGet, "/ui/plan", readToken, nil)
	require.Equal(t, http.StatusNotImplemented, r.code)
	require.Contains(t, r.body, "no plan")
}
