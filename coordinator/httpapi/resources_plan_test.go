package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/store"
)

// TestPlanResource: GET /v1/plan answers flow.Plan at the resources' clock,
// a page of tables or one table by name, and refuses bad parameters by
// name; without a plan the route is 404.
func TestPlanResource(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			b := resSetup(t, backend)
			fl, err := flow.NewFlow(b.st, nil, flow.FlowConfig{DBURL: "unused://the plan submits nothing"})
			require.NoError(t, err)
			h, err := httpapi.NewResources(httpapi.ResourcesConfig{Store: b.st, Submitter: b.sub, Plan: fl.Plan,
				Now: func() time.Time { return resNow }})
			require.NoError(t, err)
			noPlan := b.handler
			b.handler = h

			b.must(http.StatusCreated, "POST", "/v1/policies", `{"name": "c", "policyType": "compaction", "enabled": true,
				"content": {"schedule": {"onCommit": true}, "minIntervalMs": 600000}}`, nil)
			b.must(http.StatusCreated, "POST", "/v1/policies/c/attachments", `{"level": "namespace", "object": "lake.db"}`, nil)
			t1, t2 := b.table("lake", "db", "one", "u1"), b.table("lake", "db", "two", "u2")
			b.job(t1.ID, 0)
			var p flow.Plan
			b.must(http.StatusOK, "GET", "/v1/plan", "", &p)
			require.True(t, resNow.Equal(p.Now))
			require.Equal(t, 2, p.Tables)
			require.Len(t, p.Items, 2)
			require.Equal(t, flow.PlanWait, p.Items[0].Verdict, "a job is in flight on lake.db.one")
			require.Equal(t, flow.PlanRun, p.Items[1].Verdict)
			require.Nil(t, p.Items[1].Due, "onCommit only, no commit pending")
			require.Equal(t, []string{"onCommit"}, p.Items[1].Triggers)

			var raw map[string]any
			b.must(http.StatusOK, "GET", "/v1/plan?limit=1", "", &raw)
			require.EqualValues(t, t1.ID, raw["next"], "camelCase JSON with the next cursor")
			items := raw["items"].([]any)
			require.Contains(t, items[0].(map[string]any), "tableId")
			b.must(http.StatusOK, "GET", "/v1/plan?limit=1&after="+jsonNum(t1.ID), "", &p)
			require.Equal(t, t2.ID, p.Items[0].TableID)
			b.must(http.StatusOK, "GET", "/v1/plan?table=lake.db.two", "", &p)
			require.Len(t, p.Items, 1)
			require.Equal(t, "lake.db.two", p.Items[0].Table)

			b.refuse(http.StatusBadRequest, "GET", "/v1/plan?limit=501", "", `limit "501"`)
			b.refuse(http.StatusBadRequest, "GET", "/v1/plan?after=-2", "", `after "-2"`)
			b.refuse(http.StatusBadRequest, "GET", "/v1/plan?table=x", "", "table")
			b.refuse(http.StatusBadRequest, "GET", "/v1/plan?table=lake.db.two&limit=5", "", "without limit and after")
			b.refuse(http.StatusBadRequest, "GET", "/v1/plan?verdict=run", "", `unknown query parameter "verdict"`)
			b.refuse(http.StatusNotFound, "GET", "/v1/plan?table=lake.db.three", "", "lake")
			b.refuse(http.StatusMethodNotAllowed, "POST", "/v1/plan", "{}", "allowed: GET")

			b.handler = noPlan
			b.refuse(http.StatusNotFound, "GET", "/v1/plan", "", "no plan")
		})
	}
}

func jsonNum(n int64) string { return strconv.FormatInt(n, 10) }
