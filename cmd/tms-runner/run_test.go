package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/testdata"
)

// fullChain is the chain a commit or cron job runs.
var fullChain = []string{"compaction", "manifest-rewrite", "snapshot-expiry"}

// localSpec is the job spec of a chain on a table of a local warehouse.
func localSpec(dir, name string, steps ...map[string]any) map[string]any {
	return map[string]any{"catalog": map[string]any{"warehouse-dir": dir}, "table": name, "steps": steps}
}

func step(t string, policy map[string]any) map[string]any {
	s := map[string]any{"type": t}
	if policy != nil {
		s["policy"] = policy
	}
	return s
}

func fullSteps() []map[string]any {
	return []map[string]any{step("compaction", nil), step("manifest-rewrite", nil), step("snapshot-expiry", nil)}
}

// TestRunJob runs the full chain as a job on both ledgers and checks what an
// operator reads afterwards: the row is closed succeeded with before and after
// snapshots and per-type outcomes, metrics exist at S0 and S1, and the table
// holds exactly the same rows in fewer files.
func TestRunJob(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			const name = "tms.partitioned"
			dir := testdata.BuildT(t, name)
			l := newLedger(t, be.url(t))
			j := l.jobFor(t, name, tableUUID(t, dir, name), fullChain, localSpec(dir, name, fullSteps()...))
			before := tableState(t, dir, name)

			r := execRunner(t, nil, "run", "--db", l.url, "--job-id", fmt.Sprint(j.ID), "--fence", "1")
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			require.Contains(t, r.stdout, "compaction")

			after := tableState(t, dir, name)
			require.Equal(t, before.sum, after.sum, "maintenance must not change the table's rows")
			require.NotEqual(t, before.head, after.head, "compaction committed")

			got := l.get(t, j.ID)
			require.Equal(t, store.StatusSucceeded, got.Status)
			require.False(t, got.InFlight())
			require.False(t, got.StartedAt.IsZero())
			require.Empty(t, got.Error)
			require.Equal(t, &before.head, got.BeforeSnapshotID)
			require.Equal(t, &after.head, got.AfterSnapshotID)

			outcomes := outcomesOf(t, got)
			require.Len(t, outcomes, 3)
			for i, o := range outcomes {
				require.Equal(t, fullChain[i], o.Type)
				require.NotEmpty(t, o.Reason, o.Type)
				require.NotNil(t, o.DurationMs, o.Type)
				require.NotEqual(t, "failed", o.Outcome, o.Type)
			}
			require.Equal(t, "done", outcomes[0].Outcome, outcomes[0].Reason)
			require.Equal(t, before.head, outcomes[0].BeforeSnapshotID)

			ms, err := l.st.ListSnapshotMetrics(t.Context(), j.TableID)
			require.NoError(t, err)
			var snaps []int64
			for _, m := range ms {
				require.Equal(t, j.PolicyID, m.PolicyID)
				snaps = append(snaps, m.SnapshotID)
			}
			require.Contains(t, snaps, before.head, "metrics at S0")
			require.Contains(t, snaps, after.head, "metrics at S1")
			var s0 map[string]any
			require.NoError(t, json.Unmarshal(ms[slices.Index(snaps, before.head)].Value, &s0))
			require.EqualValues(t, 84, s0["data-file-number"])
		})
	}
}

// TestRunFencedOut starts a runner whose fence is stale — bumped, or the row
// already closed by the reconciler — and checks that it exits 4, leaves the
// table alone and writes nothing to the row.
func TestRunFencedOut(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			const name = "tms.partitioned"
			dir := testdata.BuildT(t, name)
			l := newLedger(t, be.url(t))
			uuid := tableUUID(t, dir, name)
			before := tableState(t, dir, name)

			// Bumped before the runner started.
			j := l.jobFor(t, name, uuid, fullChain, localSpec(dir, name, fullSteps()...))
			fence, err := l.st.BumpFence(t.Context(), j.ID)
			require.NoError(t, err)
			want := l.get(t, j.ID)
			r := execRunner(t, nil, "run", "--db", l.url, "--job-id", fmt.Sprint(j.ID), "--fence", "1")
			require.Equal(t, cli.ExitFenced, r.code, r.stderr)
			require.Contains(t, r.stderr, "fenced out of job")
			require.Contains(t, r.stderr, fmt.Sprintf("has fence %d, write carried 1", fence))
			require.Empty(t, r.stdout)
			require.Equal(t, want, l.get(t, j.ID), "a fenced-out runner writes nothing")
			require.Equal(t, before.head, tableState(t, dir, name).head, "and commits nothing")

			// Closed by the reconciler (bump, then finish lost).
			require.NoError(t, l.st.FinishJob(t.Context(), j.ID, fence, store.Finish{Status: store.StatusLost, Error: "heartbeat missed"}))
			want = l.get(t, j.ID)
			r = execRunner(t, nil, "run", "--db", l.url, "--job-id", fmt.Sprint(j.ID), "--fence", fmt.Sprint(fence))
			require.Equal(t, cli.ExitFenced, r.code, r.stderr)
			require.Contains(t, r.stderr, "already finished")
			require.Equal(t, want, l.get(t, j.ID))
			require.Equal(t, before, tableState(t, dir, name))

			// Started by another runner holding the same fence (a retried
			// submit): the second launch must not run beside it.
			dup := l.jobFor(t, name, uuid, fullChain[:1], localSpec(dir, name, step("compaction", nil)))
			require.NoError(t, l.st.StartJob(t.Context(), dup.ID, dup.Fence, time.Now()))
			want = l.get(t, dup.ID)
			r = execRunner(t, nil, "run", "--db", l.url, "--job-id", fmt.Sprint(dup.ID), "--fence", fmt.Sprint(dup.Fence))
			require.Equal(t, cli.ExitFenced, r.code, r.stderr)
			require.Contains(t, r.stderr, "already started by another runner")
			require.Equal(t, want, l.get(t, dup.ID))
			require.Equal(t, before.head, tableState(t, dir, name).head)
		})
	}
}

// TestRunBadInput checks that a job that cannot run closes its row failed
// with a message naming the problem, exits non-zero, and leaves the table
// alone; and that a secret in a bad spec never reaches stderr or the error
// column.
func TestRunBadInput(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	const name = "tms.orphans"
	dir := testdata.BuildT(t, name)
	uuid := tableUUID(t, dir, name)
	before := tableState(t, dir, name)
	l := newLedger(t, backends[1].url(t))

	cases := []struct {
		name    string
		table   string
		uuid    string
		types   []string
		spec    map[string]any
		want    string
		failed  string // the type whose outcome is failed; "" means all
		secrets []string
	}{
		{
			name: "missing table", table: "tms.nope", uuid: "uuid-of-nothing", types: []string{"compaction"},
			spec: localSpec(dir, "tms.nope", step("compaction", nil)),
			want: "table tms.nope does not exist",
		},
		{
			name: "negative target size", types: fullChain,
			spec: localSpec(dir, name, step("compaction", map[string]any{"rewriteOptions": map[string]any{"target-file-size-bytes": -1}}),
				step("manifest-rewrite", nil), step("snapshot-expiry", nil)),
			want: "rewriteOptions.target-file-size-bytes", failed: "compaction",
		},
		{
			name: "retain-last 0", types: fullChain,
			spec: localSpec(dir, name, step("compaction", nil), step("manifest-rewrite", nil),
				step("snapshot-expiry", map[string]any{"retain-last": 0})),
			want: "retain-last", failed: "snapshot-expiry",
		},
		{
			name: "orphan older-than below the floor", types: []string{"orphan-cleanup"},
			spec: localSpec(dir, name, step("orphan-cleanup", map[string]any{"older-than": "10m"})),
			want: "older-than", failed: "orphan-cleanup",
		},
		{
			name: "credential in spec", types: []string{"compaction"},
			spec: map[string]any{
				"catalog": map[string]any{"name": "prod", "properties": map[string]any{
					"type": "rest", "uri": "http://127.0.0.1:1", "credential": "client:s3cr3t-value"}},
				"table": name, "steps": []any{step("compaction", nil)},
			},
			want: "catalog.properties.credential", secrets: []string{"s3cr3t-value"},
		},
		{
			name: "recreated table", uuid: "uuid-of-an-older-incarnation", types: []string{"compaction"},
			spec: localSpec(dir, name, step("compaction", nil)),
			want: "dropped and recreated",
		},
		{
			name: "types differ from row", types: []string{"compaction"},
			spec: localSpec(dir, name, step("manifest-rewrite", nil)),
			want: "differ from the job row's types",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tbl, id := name, uuid
			if tc.table != "" {
				tbl = tc.table
			}
			if tc.uuid != "" {
				id = tc.uuid
			}
			j := l.jobFor(t, tbl, id, tc.types, tc.spec)
			r := execRunner(t, nil, "run", "--db", l.url, "--job-id", fmt.Sprint(j.ID), "--fence", "1")
			require.Equal(t, cli.ExitFailure, r.code, r.stderr)
			require.Contains(t, r.stderr, tc.want)

			got := l.get(t, j.ID)
			require.Equal(t, store.StatusFailed, got.Status)
			require.False(t, got.InFlight())
			require.Contains(t, got.Error, tc.want)
			require.Nil(t, got.AfterSnapshotID)
			for _, s := range tc.secrets {
				require.NotContains(t, r.stderr, s)
				require.NotContains(t, got.Error, s)
				require.NotContains(t, string(got.Outcomes), s)
			}
			outcomes := outcomesOf(t, got)
			require.Len(t, outcomes, len(tc.types))
			for _, o := range outcomes {
				if tc.failed == "" || o.Type == tc.failed {
					require.Equal(t, "failed", o.Outcome, o.Type)
					require.Contains(t, o.Error, tc.want, o.Type)
				} else {
					require.Equal(t, "skipped", o.Outcome, o.Type)
				}
			}
		})
	}
	require.Equal(t, before, tableState(t, dir, name), "no bad job touched the table")
}

// TestRunUsage covers flag errors and unknown jobs: exit 2, nothing written.
func TestRunUsage(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	l := newLedger(t, backends[1].url(t))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--job-id", "1", "--fence", "1"}, "--db is required"},
		{[]string{"run", "--db", l.url, "--fence", "1"}, "--job-id"},
		{[]string{"run", "--db", l.url, "--job-id", "1"}, "--fence"},
		{[]string{"run", "--db", l.url, "--job-id", "999", "--fence", "1"}, "job 999"},
		{[]string{"run", "--db", "mysql://x", "--job-id", "1", "--fence", "1"}, "unsupported database URL"},
		{[]string{"run", "--db", l.url, "--job-id", "1", "--fence", "1", "--catalog-props-file", "/nonexistent"}, "catalog props file"},
	} {
		r := execRunner(t, []string{"TMS_DB="}, tc.args...)
		require.Equal(t, cli.ExitUsage, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
}
