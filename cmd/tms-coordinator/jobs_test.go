package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// TestJobsAndTablesCommands reads and cancels ledger rows from the command
// line: jobs list filters, jobs show prints the reason and per-type
// outcomes, jobs cancel closes an in-flight row at once (fence bumped) and
// refuses a finished one, tables show lists every incarnation of a
// recreated table with its history. On PostgreSQL and SQLite.
func TestJobsAndTablesCommands(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{store.BackendSQLite, store.BackendPostgres} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			db := testdb.URL(t, backend)
			code, _, stderr := run(t, "migrate", "--db", db)
			require.Equal(t, cli.ExitOK, code, stderr)
			st := ledger(t, db)
			ctx := t.Context()
			old, err := st.RegisterTable(ctx, store.TableRef{Catalog: "lake", Namespace: "db", Name: "orders", UUID: "u-old"})
			require.NoError(t, err)
			failed, err := st.CreateJob(ctx, store.NewJob{TableID: old.ID, PolicyID: 1, Types: []string{"compaction"}, Trigger: store.TriggerCron, Node: "tms-a"})
			require.NoError(t, err)
			require.NoError(t, st.FinishJob(ctx, failed.ID, failed.Fence, store.Finish{Status: store.StatusFailed,
				Error:    "table db.orders was dropped and recreated: its table-uuid is u-new",
				Outcomes: json.RawMessage(`[{"type":"compaction","outcome":"failed","error":"recreated","duration_ms":12}]`)}))
			cur, err := st.RegisterTable(ctx, store.TableRef{Catalog: "lake", Namespace: "db", Name: "orders", UUID: "u-new"})
			require.NoError(t, err)
			done, err := st.CreateJob(ctx, store.NewJob{TableID: cur.ID, PolicyID: 1, Types: []string{"compaction"}, Trigger: store.TriggerCron})
			require.NoError(t, err)
			require.NoError(t, st.FinishJob(ctx, done.ID, done.Fence, store.Finish{Status: store.StatusSucceeded,
				Outcomes: json.RawMessage(`[{"type":"compaction","outcome":"done","duration_ms":340}]`)}))
			queued, err := st.CreateJob(ctx, store.NewJob{TableID: cur.ID, PolicyID: 2, Types: []string{"snapshot-expiry"}, Trigger: store.TriggerCron, Node: "tms-b"})
			require.NoError(t, err)
			require.NoError(t, st.SetJobID(ctx, queued.ID, queued.Fence, "local-9-1-x", "local"))

			out := ok(t, "jobs", "list", "--db", db)
			for _, want := range []string{"lake.db.orders", "dropped and recreated", "snapshot-expiry", "tms-b", "pending"} {
				require.Contains(t, out, want)
			}
			out = ok(t, "jobs", "list", "--db", db, "--in-flight", "--json")
			var lines []jobOut
			require.NoError(t, json.Unmarshal([]byte(out), &lines))
			require.Len(t, lines, 1)
			require.Equal(t, queued.ID, lines[0].ID)
			require.Equal(t, [2]string{"lake.db.orders", "tms-b"}, [2]string{lines[0].TableName, lines[0].Node})
			// The /v1 job document's camelCase keys, plus tableName and node.
			var raw []map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(out), &raw))
			requireKeys(t, raw[0], []string{"id", "externalJobId", "submitter", "tableId", "policyId", "types", "trigger", "status",
				"inFlight", "fence", "beforeSnapshotId", "afterSnapshotId", "createdAt", "startedAt", "finishedAt", "tableName", "node"})
			out = ok(t, "jobs", "list", "--db", db, "--status", "failed", "--since", "1h")
			require.Contains(t, out, fmt.Sprintf("%d ", failed.ID))
			require.NotContains(t, out, "snapshot-expiry")

			out = ok(t, "jobs", "show", "--db", db, "--id", fmt.Sprint(failed.ID))
			require.Contains(t, out, "reason:    table db.orders was dropped and recreated")
			require.Contains(t, out, "compaction  failed   12ms")
			require.Contains(t, out, "node:      tms-a   submitter: -   external id: -")
			out = ok(t, "jobs", "show", "--db", db, "--id", fmt.Sprint(queued.ID))
			require.Contains(t, out, "node:      tms-b   submitter: local   external id: local-9-1-x")
			out = ok(t, "jobs", "show", "--db", db, "--id", fmt.Sprint(queued.ID), "--json")
			var shown jobDetailOut
			require.NoError(t, json.Unmarshal([]byte(out), &shown))
			require.Equal(t, [2]string{"local", "local-9-1-x"}, [2]string{shown.Submitter, shown.ExternalJobID})
			require.Equal(t, [2]string{"lake.db.orders", "tms-b"}, [2]string{shown.Table.Name, shown.Node})
			out = ok(t, "jobs", "show", "--db", db, "--id", fmt.Sprint(failed.ID), "--json")
			var detail map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(out), &detail))
			requireKeys(t, detail, []string{"id", "externalJobId", "submitter", "tableId", "policyId", "types", "trigger", "status",
				"inFlight", "fence", "beforeSnapshotId", "afterSnapshotId", "error", "createdAt", "startedAt", "finishedAt",
				"table", "outcomes", "spec", "metricsBefore", "metricsAfter", "node"})
			require.JSONEq(t, `[{"type":"compaction","outcome":"failed","error":"recreated","duration_ms":12}]`, string(detail["outcomes"]),
				"the outcomes as the ledger holds them")

			// status shows the in-flight row's submitter before its external id.
			out = ok(t, "status", "--db", db)
			header, row := "", ""
			for line := range strings.Lines(out) {
				switch {
				case strings.HasPrefix(line, "IN FLIGHT"):
					header = line
				case header != "" && row == "" && strings.HasPrefix(line, fmt.Sprintf("%d ", queued.ID)):
					row = line
				}
			}
			require.Regexp(t, `NODE +SUBMITTER +EXTERNAL ID`, header, out)
			require.Regexp(t, `tms-b (\(DEAD[^)]*\) +)?local +local-9-1-x`, row, out)
			out = ok(t, "status", "--db", db, "--json")
			var status statusOutput
			require.NoError(t, json.Unmarshal([]byte(out), &status))
			require.Len(t, status.InFlight, 1)
			require.Equal(t, [2]string{"local", "local-9-1-x"}, [2]string{status.InFlight[0].Submitter, status.InFlight[0].JobID})

			out = ok(t, "jobs", "cancel", "--db", db, "--id", fmt.Sprint(queued.ID))
			require.Contains(t, out, fmt.Sprintf("cancelled job %d on lake.db.orders (fence now 2)", queued.ID))
			got, err := st.GetJob(ctx, queued.ID)
			require.NoError(t, err)
			require.Equal(t, store.StatusCancelled, got.Status)
			require.ErrorIs(t, st.StartJob(ctx, queued.ID, queued.Fence, time.Time{}), store.ErrStaleFence, "a queued runner starting later is fenced out")

			for _, bad := range []struct {
				args []string
				want string
			}{
				{[]string{"jobs", "cancel", "--id", fmt.Sprint(done.ID)}, "already finished: status succeeded"},
				{[]string{"jobs", "show", "--id", "999999"}, "no job 999999 in the ledger"},
				{[]string{"jobs", "show"}, "--id is required"},
				{[]string{"jobs", "list", "--status", "weird"}, `unknown status "weird"`},
				{[]string{"jobs", "list", "--in-flight", "--finished"}, "not both"},
				{[]string{"jobs", "list", "--since", "yesterday"}, "neither RFC 3339 nor a duration"},
				{[]string{"tables", "show", "--table", "lake.db.nope"}, "no such table in the ledger"},
				{[]string{"tables", "show", "--table", "orders"}, "want CATALOG.NAMESPACE.TABLE"},
				{[]string{"jobs", "frob"}, `unknown jobs command "frob"`},
			} {
				code, _, stderr := run(t, append(bad.args, "--db", db)...)
				require.Equal(t, cli.ExitUsage, code, "%v: %s", bad.args, stderr)
				require.Contains(t, stderr, bad.want, "%v", bad.args)
			}

			out = ok(t, "tables", "show", "--db", db, "--table", "lake.db.orders")
			first, second, found := strings.Cut(out, "\n\n")
			require.True(t, found, out)
			require.Contains(t, first, fmt.Sprintf("row %d  table-uuid u-new", cur.ID))
			require.Contains(t, first, "(live)")
			require.Contains(t, first, "cancelled from the command line")
			require.Contains(t, second, fmt.Sprintf("row %d  table-uuid u-old", old.ID))
			require.Contains(t, second, "dropped and recreated since (history kept)")
			require.Contains(t, second, "dropped and recreated: its table-uuid is u-new")

			out = ok(t, "tables", "list", "--db", db, "--json")
			var tables []tableOut
			require.NoError(t, json.Unmarshal([]byte(out), &tables))
			require.Len(t, tables, 1, "only the live incarnation")
			require.Equal(t, cur.ID, tables[0].ID)
			require.Equal(t, queued.ID, tables[0].LastJob.ID)
			var rawTables []map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(out), &rawTables))
			requireKeys(t, rawTables[0], []string{"id", "name", "catalog", "namespace", "table", "uuid", "createdAt", "live", "lastJob", "metrics"})
			out = ok(t, "tables", "show", "--db", db, "--table", "lake.db.orders", "--json")
			var shownTables []tableOut
			require.NoError(t, json.Unmarshal([]byte(out), &shownTables))
			require.Len(t, shownTables, 2, "both incarnations, newest first")
			require.Equal(t, [2]int64{cur.ID, old.ID}, [2]int64{shownTables[0].ID, shownTables[1].ID})
			require.Len(t, shownTables[0].RecentJobs, 2)
			require.Equal(t, failed.ID, shownTables[1].RecentJobs[0].ID)
		})
	}
}

// requireKeys: the JSON object doc has exactly keys.
func requireKeys(t *testing.T, doc map[string]json.RawMessage, keys []string) {
	t.Helper()
	var got []string
	for k := range doc {
		got = append(got, k)
	}
	require.ElementsMatch(t, keys, got)
}
