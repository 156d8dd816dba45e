package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/policy"
)

const compactionPolicy = `{"name": "compact-hot", "comment": "hot tables", "policyType": "system_iceberg_compaction",
	"content": {"schedule": {"onCommit": true, "crontab": "0 3 * * *", "timezone": "Europe/Berlin"}, "minDataFileMse": 1000}}`

func TestPolicyRoutes(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		b := resSetup(t, backend)

		// Create: 201, the policy, and its policy-expand row.
		var p policyDoc
		b.must(http.StatusCreated, "POST", "/v1/policies", compactionPolicy, &p)
		require.Equal(t, "compact-hot", p.Name)
		require.Equal(t, "system_iceberg_compaction", p.PolicyType)
		require.Equal(t, "compaction", p.MaintenanceType)
		require.True(t, p.Enabled, "enabled defaults to true")
		require.Equal(t, 1, p.Version)
		require.Equal(t, "hot tables", p.Comment)
		require.JSONEq(t, `{"schedule": {"onCommit": true, "crontab": "0 3 * * *", "timezone": "Europe/Berlin"}, "minDataFileMse": 1000}`, string(p.Content))
		rows := b.expandRows()
		require.Len(t, rows, 1)
		require.Equal(t, flow.ExpandKey(p.ID), rows[0].TaskKey)
		berlin, err := time.LoadLocation("Europe/Berlin")
		require.NoError(t, err)
		require.Equal(t, time.Date(2030, 6, 2, 3, 0, 0, 0, berlin).UTC(), rows[0].ExecutionTime, "the crontab's next instant after the clock")

		// The same policy made the CLI's way (PolicyOps, which `policy
		// create` runs) gets the same row.
		ops, err := admin.NewPolicyOps(b.st, func() time.Time { return resNow })
		require.NoError(t, err)
		on := true
		spec := policy.Document{Name: "compact-cli", PolicyType: "compaction", Enabled: &on, Content: p.Content}
		viaCLI, err := ops.Create(t.Context(), spec)
		require.NoError(t, err)
		cliRow, err := b.sch.GetTask(context.Background(), flow.ExpandKey(viaCLI.ID))
		require.NoError(t, err)
		require.Equal(t, rows[0].ExecutionTime, cliRow.ExecutionTime)
		require.JSONEq(t, string(rows[0].Data), string(cliRow.Data))
		b.must(http.StatusOK, "DELETE", "/v1/policies/compact-cli", "", nil)

		// A disabled snapshot-expiry policy has no expand row.
		b.must(http.StatusCreated, "POST", "/v1/policies", `{"name": "expire", "policyType": "snapshot-expiry", "enabled": false,
			"content": {"schedule": {"crontab": "@daily"}, "retainLast": 5}}`, &p)
		require.False(t, p.Enabled)
		require.Len(t, b.expandRows(), 1)

		var list struct{ Policies []policyDoc }
		b.must(http.StatusOK, "GET", "/v1/policies", "", &list)
		require.Len(t, list.Policies, 2)
		require.Equal(t, "compact-hot", list.Policies[0].Name)
		require.Equal(t, "expire", list.Policies[1].Name)

		// Alter: new content is a new version and moves the expand row.
		b.must(http.StatusOK, "PUT", "/v1/policies/compact-hot", `{"content": {"schedule": {"crontab": "30 4 * * *"}}, "comment": "cooler"}`, &p)
		require.Equal(t, 2, p.Version)
		require.Equal(t, "cooler", p.Comment)
		rows = b.expandRows()
		require.Len(t, rows, 1)
		require.Equal(t, time.Date(2030, 6, 2, 4, 30, 0, 0, time.UTC), rows[0].ExecutionTime)
		// The document read back may be sent back: same name and type, enabled applied.
		var got policyDoc
		b.must(http.StatusOK, "GET", "/v1/policies/compact-hot", "", &got)
		body := `{"name": "compact-hot", "policyType": "system_iceberg_compaction", "enabled": false, "comment": "off", "content": ` + string(got.Content) + `}`
		b.must(http.StatusOK, "PUT", "/v1/policies/compact-hot", body, &p)
		require.False(t, p.Enabled)
		require.Equal(t, 3, p.Version)
		require.Empty(t, b.expandRows(), "a disabled policy has no expand row")

		// Enable and disable report whether they changed anything.
		var en struct {
			Policy  policyDoc
			Changed bool
		}
		b.must(http.StatusOK, "POST", "/v1/policies/compact-hot/enable", "", &en)
		require.True(t, en.Changed)
		require.True(t, en.Policy.Enabled)
		require.Len(t, b.expandRows(), 1)
		b.must(http.StatusOK, "POST", "/v1/policies/compact-hot/enable", "", &en)
		require.False(t, en.Changed)
		b.must(http.StatusOK, "POST", "/v1/policies/expire/disable", "", &en)
		require.False(t, en.Changed)

		// Attachments and the policies in force for a table.
		var a attachmentDoc
		b.must(http.StatusCreated, "POST", "/v1/policies/compact-hot/attachments", `{"object": "lake.sales"}`, &a)
		require.Equal(t, attachmentDoc{Policy: "compact-hot", Level: "namespace", Object: "lake.sales"}, a)
		b.must(http.StatusOK, "POST", "/v1/policies/compact-hot/attachments", `{"object": "lake.sales"}`, &a)
		b.must(http.StatusCreated, "POST", "/v1/policies/expire/attachments", `{"object": "lake.sales.eu", "level": "namespace"}`, &a)
		require.Equal(t, "namespace", a.Level)
		var eff struct {
			Table    string
			Policies []struct {
				MaintenanceType string
				Policy          policyDoc
				Via             attachmentDoc
			}
		}
		b.must(http.StatusOK, "GET", "/v1/tables/lake.sales.eu.orders/effective-policies", "", &eff)
		require.Equal(t, "lake.sales.eu.orders", eff.Table)
		require.Len(t, eff.Policies, 2)
		require.Equal(t, "compaction", eff.Policies[0].MaintenanceType, "chain order")
		require.Equal(t, "compact-hot", eff.Policies[0].Policy.Name)
		require.Equal(t, "lake.sales", eff.Policies[0].Via.Object)
		require.Equal(t, "snapshot-expiry", eff.Policies[1].MaintenanceType)
		require.Equal(t, "lake.sales.eu", eff.Policies[1].Via.Object)

		b.must(http.StatusOK, "GET", "/v1/policies/compact-hot", "", &got)
		require.Equal(t, []attachmentDoc{{Policy: "compact-hot", Level: "namespace", Object: "lake.sales"}}, got.Attachments)
		b.must(http.StatusOK, "DELETE", "/v1/policies/expire/attachments/lake.sales.eu?level=namespace", "", &a)
		require.Equal(t, "lake.sales.eu", a.Object)
		b.must(http.StatusOK, "GET", "/v1/tables/lake.sales.eu.orders/effective-policies", "", &eff)
		require.Len(t, eff.Policies, 1)

		// Delete: the policy, its attachments and its expand row go.
		b.must(http.StatusOK, "DELETE", "/v1/policies/compact-hot", "", &p)
		require.NotNil(t, p.DeletedAt)
		require.Empty(t, b.expandRows())
		b.refuse(http.StatusNotFound, "GET", "/v1/policies/compact-hot", "", `policy "compact-hot"`)
		b.must(http.StatusOK, "GET", "/v1/tables/lake.sales.eu.orders/effective-policies", "", &eff)
		require.Empty(t, eff.Policies)
	})
}

func TestPolicyRoutesRefuseBadInput(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		b := resSetup(t, backend)
		b.must(http.StatusCreated, "POST", "/v1/policies", compactionPolicy, nil)
		b.must(http.StatusCreated, "POST", "/v1/policies/compact-hot/attachments", `{"object": "lake"}`, nil)
		create := func(typ, content string) string {
			return `{"name": "x", "policyType": "` + typ + `", "content": ` + content + `}`
		}
		tests := []struct {
			name, method, path, body string
			code                     int
			want                     string
		}{
			{"list: query parameter", "GET", "/v1/policies?all=1", "", 400, `unknown query parameter "all"`},
			{"create: empty body", "POST", "/v1/policies", "", 400, "empty body"},
			{"create: malformed", "POST", "/v1/policies", `{"name": `, 400, "malformed JSON"},
			{"create: unknown field", "POST", "/v1/policies", `{"name": "x", "type": "compaction"}`, 400, `unknown field "type"`},
			{"create: trailing data", "POST", "/v1/policies", compactionPolicy + `{}`, 400, "unexpected data after the JSON object"},
			{"create: too large", "POST", "/v1/policies", `{"comment": "` + strings.Repeat("x", httpapi.MaxResourceBodyBytes) + `"}`, 413, "1 MiB"},
			{"create: no name", "POST", "/v1/policies", `{"policyType": "compaction", "content": {"schedule": {"onCommit": true}}}`, 400, "name: required"},
			{"create: bad name", "POST", "/v1/policies", `{"name": "a b", "policyType": "compaction", "content": {"schedule": {"onCommit": true}}}`, 400, "name: \"a b\""},
			{"create: unknown type", "POST", "/v1/policies", create("vacuum", `{"schedule": {"onCommit": true}}`), 400, "policyType: unknown policy type"},
			{"create: no content", "POST", "/v1/policies", `{"name": "x", "policyType": "compaction"}`, 400, "content: required"},
			{"create: bad crontab", "POST", "/v1/policies", create("compaction", `{"schedule": {"crontab": "61 * * * *"}}`), 400, "content.schedule.crontab:"},
			{"create: orphan onCommit", "POST", "/v1/policies", create("orphan-cleanup", `{"schedule": {"onCommit": true, "crontab": "@daily"}}`), 400, "content.schedule.onCommit:"},
			{"create: credential", "POST", "/v1/policies", create("compaction", `{"schedule": {"onCommit": true}, "jobOptions": {"s3.secret-access-key": "abc"}}`), 400, "content.jobOptions.s3.secret-access-key:"},
			{"create: enabled not a bool", "POST", "/v1/policies", `{"name": "x", "policyType": "compaction", "enabled": "yes"}`, 400, `"enabled"`},
			{"create: duplicate", "POST", "/v1/policies", compactionPolicy, 409, `"compact-hot" already exists`},
			{"get: unknown", "GET", "/v1/policies/nope", "", 404, `policy "nope"`},
			{"get: bad name", "GET", "/v1/policies/-x", "", 400, "name:"},
			{"alter: unknown", "PUT", "/v1/policies/nope", `{"comment": "c"}`, 404, `policy "nope"`},
			{"alter: nothing", "PUT", "/v1/policies/compact-hot", `{}`, 400, "nothing to alter"},
			{"alter: bad content", "PUT", "/v1/policies/compact-hot", `{"content": {"schedule": {"onCommit": true}, "rewriteOptions": {"token": "x"}}}`, 400, "content.rewriteOptions.token:"},
			{"alter: rename", "PUT", "/v1/policies/compact-hot", `{"name": "other", "comment": "c"}`, 400, "name:"},
			{"alter: change type", "PUT", "/v1/policies/compact-hot", `{"policyType": "snapshot-expiry", "comment": "c"}`, 400, "policyType:"},
			{"alter: unknown field", "PUT", "/v1/policies/compact-hot", `{"comments": "c"}`, 400, `unknown field "comments"`},
			{"delete: unknown", "DELETE", "/v1/policies/nope", "", 404, `policy "nope"`},
			{"enable: unknown", "POST", "/v1/policies/nope/enable", "", 404, `policy "nope"`},
			{"disable: unknown", "POST", "/v1/policies/nope/disable", "", 404, `policy "nope"`},
			{"attach: no object", "POST", "/v1/policies/compact-hot/attachments", `{}`, 400, "object must not be empty"},
			{"attach: empty segment", "POST", "/v1/policies/compact-hot/attachments", `{"object": "lake..t"}`, 400, `object "lake..t": empty segment`},
			{"attach: bad level", "POST", "/v1/policies/compact-hot/attachments", `{"object": "lake.db", "level": "schema"}`, 400, `level "schema"`},
			{"attach: level mismatch", "POST", "/v1/policies/compact-hot/attachments", `{"object": "lake.db", "level": "table"}`, 400, "CATALOG.NAMESPACE.TABLE"},
			{"attach: unknown policy", "POST", "/v1/policies/nope/attachments", `{"object": "lake"}`, 404, `policy "nope"`},
			{"detach: not attached", "DELETE", "/v1/policies/compact-hot/attachments/other", "", 404, "not attached"},
			{"detach: bad level", "DELETE", "/v1/policies/compact-hot/attachments/lake?level=db", "", 400, `level "db"`},
			{"effective: too short", "GET", "/v1/tables/lake.db/effective-policies", "", 400, `table "lake.db": want CATALOG.NAMESPACE.TABLE`},
			{"unknown route", "GET", "/v1/policies/compact-hot/versions", "", 404, "no such resource"},
		}
		for _, tc := range tests {
			b.refuse(tc.code, tc.method, tc.path, tc.body, tc.want)
		}
		code, _ := b.call("PATCH", "/v1/policies/compact-hot", `{}`)
		require.Equal(t, http.StatusMethodNotAllowed, code)

		// Nothing was written by any of them.
		var list struct{ Policies []policyDoc }
		b.must(http.StatusOK, "GET", "/v1/policies", "", &list)
		require.Len(t, list.Policies, 1)
		require.Equal(t, 1, list.Policies[0].Version)
		require.Equal(t, "hot tables", list.Policies[0].Comment)
		require.Len(t, list.Policies[0].Attachments, 1)
		require.Len(t, b.expandRows(), 1)
	})
}
