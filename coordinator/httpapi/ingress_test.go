package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/coordinator/ingress"
)

func TestCommitEventsNeedAToken(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		b := setup(t, backend, nil)
		for name, token := range map[string]string{"missing": "", "wrong": "nope", "read-only": readToken} {
			code, body := b.post(token, event("ev-"+name))
			require.Equal(t, http.StatusUnauthorized, code, name)
			require.Contains(t, body, "bearer token", name)
		}
		// A bearer scheme is required, not just the secret.
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.http.URL+"/v1/commit-events", strings.NewReader(event("ev-basic")))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Basic "+commitToken)
		resp, err := b.http.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")

		b.requireNothingRecorded("ev-missing", "ev-wrong", "ev-read-only", "ev-basic")

		// The admin token is accepted too.
		code, body := b.post(adminToken, event("ev-admin"))
		require.Equal(t, http.StatusAccepted, code, body)
		require.Contains(t, body, `"status":"coalesced"`)
	})
}

func TestCommitEventsDisabledWithoutTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", func(c *httpapi.Config) { c.CommitToken, c.AdminToken, c.ReadToken = "", "", "" })
	code, body := b.post("anything", event("ev"))
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, "no commit token and no admin token are configured")
	code, body = b.do(http.MethodGet, "/v1/policies", "anything", "")
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, body, "no admin token is configured")
	require.Empty(t, b.commitJobs())
}

func TestCommitEventsRejectBadBodies(t *testing.T) {
	t.Parallel()
	big := `[` + strings.Repeat(event("x")+",", httpapi.MaxBodyBytes/len(event("x"))) + event("last") + `]`
	tests := []struct {
		name, body string
		code       int
		want       string
	}{
		{"malformed", `{"catalog":"cat",`, 400, "malformed JSON"},
		{"not JSON", `hello`, 400, "malformed JSON"},
		{"empty", ``, 400, "empty body"},
		{"empty array", `[]`, 400, "empty array"},
		{"trailing data", event("a") + `{}`, 400, "unexpected data after the JSON value"},
		{"unknown field", `{"catalog":"cat","namespace":"db","table":"orders","eventId":"a","snapshot":1}`, 400, `unknown field "snapshot"`},
		{"missing eventId", `{"catalog":"cat","namespace":"db","table":"orders"}`, 400, `field "eventId" is required`},
		{"missing catalog", `{"namespace":"db","table":"orders","eventId":"a"}`, 400, `field "catalog" is required`},
		{"missing namespace", `{"catalog":"cat","namespace":"","table":"orders","eventId":"a"}`, 400, `field "namespace" is required`},
		{"missing table", `{"catalog":"cat","namespace":"db","eventId":"a"}`, 400, `field "table" is required`},
		{"bad snapshot", `{"catalog":"cat","namespace":"db","table":"orders","eventId":"a","snapshotId":"7"}`, 400, `field "snapshotId": want a JSON number, got a JSON string`},
		{"bad namespace", `{"catalog":"cat","namespace":{"a":1},"table":"orders","eventId":"a"}`, 400, `field "namespace": want a string`},
		{"long eventId", event(strings.Repeat("e", 300)), 400, `field "eventId" is 300 bytes, at most 256`},
		{"one bad element", `[` + event("good-1") + `,{"catalog":"cat","namespace":"db","eventId":"bad"},` + event("good-2") + `]`, 400, `event [1]: field "table" is required`},
		{"unknown field in array", `[` + event("good-1") + `,{"catalog":"cat","namespace":"db","table":"t","eventId":"b","x":1}]`, 400, `event [1]: unknown field "x"`},
		{"too large", big, 413, "exceeds the 65536-byte (64 KiB) limit"},
	}
	onBackends(t, func(t *testing.T, backend string) {
		b := setup(t, backend, nil)
		for _, tt := range tests {
			code, body := b.post(commitToken, tt.body)
			require.Equal(t, tt.code, code, "%s: %s", tt.name, body)
			require.Contains(t, errorOf(t, body), tt.want, tt.name)
		}
		b.requireNothingRecorded("good-1", "good-2", "a", "last")
	})
}

func TestCommitEventsDuplicateAndCoalesce(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		b := setup(t, backend, nil)
		orders, items := b.tables["db.orders"], b.tables["db.sales.items"]

		res := b.ingest(event("ev-1"))
		require.Equal(t, []ingress.EventResult{{EventID: "ev-1", Status: ingress.StatusEnqueued, TableID: orders.ID}}, res)
		jobs := b.commitJobs()
		require.Len(t, jobs, 1)
		require.Equal(t, flow.CommitJobKey(orders.ID), jobs[0].TaskKey)
		require.Equal(t, now.Add(commitDelay), jobs[0].ExecutionTime, "due after the coalescing delay")

		res = b.ingest(event("ev-1"))
		require.Equal(t, []ingress.EventResult{{EventID: "ev-1", Status: ingress.StatusDuplicate, TableID: orders.ID}}, res)
		res = b.ingest(event("ev-2"))
		require.Equal(t, ingress.StatusCoalesced, res[0].Status)
		require.Len(t, b.commitJobs(), 1, "a repeat and a second commit make no second job")

		// An array: a multi-level namespace in both spellings, an unknown
		// table, a repeat inside the body and one already seen.
		res = b.ingest(`[
			{"catalog":"cat","namespace":"db.sales","table":"items","eventId":"i-1"},
			{"catalog":"cat","namespace":["db","sales"],"table":"items","eventId":"i-2","snapshotId":-9007199254740993},
			{"catalog":"cat","namespace":"db","table":"missing","eventId":"m-1"},
			{"catalog":"other","namespace":"db","table":"orders","eventId":"m-2"},
			{"catalog":"cat","namespace":"db.sales","table":"items","eventId":"i-1"},
			` + event("ev-2") + `]`)
		require.Equal(t, []ingress.EventResult{
			{EventID: "i-1", Status: ingress.StatusEnqueued, TableID: items.ID},
			{EventID: "i-2", Status: ingress.StatusCoalesced, TableID: items.ID},
			{EventID: "m-1", Status: ingress.StatusUnknownTable},
			{EventID: "m-2", Status: ingress.StatusUnknownTable},
			{EventID: "i-1", Status: ingress.StatusDuplicate, TableID: items.ID},
			{EventID: "ev-2", Status: ingress.StatusDuplicate, TableID: orders.ID},
		}, res)
		jobs = b.commitJobs()
		require.Len(t, jobs, 2)
		require.ElementsMatch(t, []string{flow.CommitJobKey(orders.ID).Instance, flow.CommitJobKey(items.ID).Instance},
			[]string{jobs[0].Instance, jobs[1].Instance})

		// An unknown table's event id is not recorded: once the table is
		// known, the same id enqueues.
		_, err := b.st.RegisterTable(t.Context(), b.tables["db.orders"].TableRef)
		require.NoError(t, err)
		res = b.ingest(`{"catalog":"cat","namespace":"db","table":"orders","eventId":"m-2"}`)
		require.Equal(t, ingress.StatusCoalesced, res[0].Status)
	})
}

func TestCommitEventsBurstIsOneJob(t *testing.T) {
	t.Parallel()
	onBackends(t, func(t *testing.T, backend string) {
		b := setup(t, backend, nil)
		const clients, perClient = 8, 5
		var (
			mu       sync.Mutex
			statuses = map[string]int{}
			wg       sync.WaitGroup
		)
		for c := range clients {
			wg.Go(func() {
				for i := range perClient {
					res := b.ingest(event(fmt.Sprintf("burst-%d-%d", c, i)))
					mu.Lock()
					statuses[res[0].Status]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Equal(t, map[string]int{ingress.StatusEnqueued: 1, ingress.StatusCoalesced: clients*perClient - 1}, statuses)
		require.Len(t, b.commitJobs(), 1)
	})
}

func TestCommitEventsDueAtOnceWithoutDelay(t *testing.T) {
	t.Parallel()
	var dues []time.Time
	b := setup(t, "postgres", func(c *httpapi.Config) {
		c.CommitJobs = flow.NewCommitJobs(-1)
		c.OnCommitJobDue = func(at time.Time) { dues = append(dues, at) }
	})
	b.ingest(event("now"))
	jobs := b.commitJobs()
	require.Len(t, jobs, 1)
	require.Equal(t, now, jobs[0].ExecutionTime)
	b.ingest(event("now"))
	b.ingest(`{"catalog":"cat","namespace":"db","table":"nope","eventId":"x"}`)
	require.Equal(t, []time.Time{now}, dues, "only a transaction that upserted a job reports its due time")
}
