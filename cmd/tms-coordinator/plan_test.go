package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/sampler"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// TestPlanAgreesWithTheRunner runs serve with a compaction policy whose
// data-file-mse threshold no table reaches: a real runner skips each table
// with its reason. The plan, read afterwards by the plan command, says
// each table waits for the policy's cooldown, and its threshold decision on
// the sample the runner recorded is the runner's reason, word for word:
// both come from policy.Decide. Changing the threshold with the policy
// command turns the plan's threshold verdict around without any job.
func TestPlanAgreesWithTheRunner(t *testing.T) {
	t.Parallel()
	db := testdb.SQLiteURL(t)
	tables := []string{"tms.small_files", "tms.many_snapshots"}
	dir := setupFlow(t, db, tables, "compaction",
		`{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 3600000, "minDataFileMse": 1e30}`, "local.tms")

	// Before serve registered anything, the plan has no item.
	var p flow.Plan
	require.NoError(t, json.Unmarshal([]byte(ok(t, "plan", "--db", db, "--json")), &p))
	require.Empty(t, p.Items)

	n := serve(t, db, dir)
	st := ledger(t, db)
	jobsOf := func(name string) []store.Job {
		jobs, err := st.ListJobs(t.Context(), registered(t, st, name).ID, 10)
		require.NoError(t, err)
		return jobs
	}
	testkit.Eventually(t, 3*time.Minute, "one finished job per table", func() bool {
		for _, name := range tables {
			if jobs := jobsOf(name); len(jobs) == 0 || jobs[0].InFlight() {
				return false
			}
		}
		return true
	})
	n.stop(t)

	reasons := map[string]string{}
	for _, name := range tables {
		jobs := jobsOf(name)
		require.Len(t, jobs, 1)
		require.Equal(t, store.StatusSucceeded, jobs[0].Status, "%s: %s (a job whose types were skipped succeeded)", name, jobs[0].Error)
		var outcomes []struct{ Type, Outcome, Reason string }
		require.NoError(t, json.Unmarshal(jobs[0].Outcomes, &outcomes))
		require.Len(t, outcomes, 1)
		require.Equal(t, "skipped", outcomes[0].Outcome)
		require.Contains(t, outcomes[0].Reason, "below thresholds: data-file-mse")
		reasons["local."+name] = outcomes[0].Reason
	}

	require.NoError(t, json.Unmarshal([]byte(ok(t, "plan", "--db", db, "--json")), &p))
	require.Len(t, p.Items, len(tables))
	for _, it := range p.Items {
		require.Equal(t, policy.Compaction, it.Type)
		require.Equal(t, "p", it.Policy)
		require.Equal(t, "namespace local.tms", it.Attached)
		require.Equal(t, flow.PlanWait, it.Verdict, "inside the one-hour cooldown")
		require.Contains(t, it.Reason, "cooldown until")
		require.Equal(t, reasons[it.Table], it.Thresholds, "%s: the runner's reason", it.Table)
		require.NotNil(t, it.Sample)
		require.NotNil(t, it.Due, "the policy-expand row's next instant")
	}
	text := ok(t, "plan", "--db", db)
	for _, want := range []string{"local.tms.small_files", "WAIT", "cooldown until"} {
		require.Contains(t, text, want)
	}

	// A threshold every table passes; and with no cooldown from the CLI's
	// point of view the verdict is the thresholds'.
	file := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 0, "minDataFileMse": 0}`), 0o600))
	ok(t, "policy", "alter", "--db", db, "--name", "p", "--content-file", file)
	require.NoError(t, json.Unmarshal([]byte(ok(t, "plan", "--db", db, "--json", "--table", "local.tms.small_files")), &p))
	require.Len(t, p.Items, 1)
	require.Equal(t, flow.PlanRun, p.Items[0].Verdict, p.Items[0].Reason)
	require.True(t, strings.HasPrefix(p.Items[0].Reason, "data-file-mse "), p.Items[0].Reason)

	for _, bad := range [][]string{
		{"--limit", "0"}, {"--limit", "501"}, {"--after", "-1"}, {"--table", "nope"}, {"--table", "local.tms.none"},
		{"--table", "local.tms.small_files", "--all"}, {"--min-interval", "vacuum=1h"},
	} {
		code, _, stderr := run(t, append([]string{"plan", "--db", db}, bad...)...)
		require.Equal(t, cli.ExitUsage, code, "%v: %s", bad, stderr)
		require.NotEmpty(t, stderr)
	}
}

// TestPlanCountsSmallFilesPerPartition: tms.partitioned starts with several
// small files in each partition, and serve, with no cooldown and no MSE
// floor, compacts it to one file per partition. Then the plan says skip,
// because no partition holds min-input-files small files, although the
// table has more small files than that; the runner agrees: the next job
// finds no file group.
func TestPlanCountsSmallFilesPerPartition(t *testing.T) {
	t.Parallel()
	db := testdb.SQLiteURL(t)
	const name = "tms.partitioned"
	dir := setupFlow(t, db, []string{name}, "compaction",
		`{"schedule": {"crontab": "@every 1s"}, "minIntervalMs": 0, "minDataFileMse": 0}`, "local.tms")
	n := serve(t, db, dir)
	st := ledger(t, db)
	tbl := registered(t, st, name)
	// The first two jobs, once both finished.
	var first []store.Job
	testkit.Eventually(t, 3*time.Minute, "a compaction of "+name+" and a finished job after it", func() bool {
		jobs, err := st.ListJobs(t.Context(), tbl.ID, 100)
		require.NoError(t, err)
		if len(jobs) < 2 {
			return false
		}
		first = []store.Job{jobs[len(jobs)-1], jobs[len(jobs)-2]}
		return !first[0].InFlight() && !first[1].InFlight()
	})
	n.stop(t)
	outcomeOf := func(j store.Job) (string, string) {
		var outcomes []struct{ Type, Outcome, Reason string }
		require.NoError(t, json.Unmarshal(j.Outcomes, &outcomes))
		require.Len(t, outcomes, 1, "job %d", j.ID)
		return outcomes[0].Outcome, outcomes[0].Reason
	}
	outcome, reason := outcomeOf(first[0])
	require.Equal(t, "done", outcome, reason)
	outcome, reason = outcomeOf(first[1])
	require.Equal(t, "skipped", outcome, reason)
	require.Contains(t, reason, "but no file group qualifies")

	// What the sampler recorded before and after the compaction.
	samples, err := st.ListSnapshotMetrics(t.Context(), tbl.ID)
	require.NoError(t, err)
	metricsAt := func(snapshot *int64) sampler.Metrics {
		row := store.MetricsAt(samples, snapshot, first[0].PolicyID)
		require.NotNil(t, row)
		var m sampler.Metrics
		require.NoError(t, json.Unmarshal(row.Value, &m))
		return m
	}
	before, after := metricsAt(first[0].BeforeSnapshotID), metricsAt(first[0].AfterSnapshotID)
	require.GreaterOrEqual(t, before.MaxPartitionSmallFileNumber, int64(5), "a group's worth in some partition: %+v", before)
	require.Less(t, before.MaxPartitionSmallFileNumber, before.SmallFileNumber, "spread over partitions: %+v", before)
	require.Greater(t, after.SmallFileNumber, int64(5), "more small files than min-input-files: %+v", after)
	require.EqualValues(t, after.PartitionNumber, after.SmallFileNumber, "one per partition: %+v", after)
	require.EqualValues(t, 1, after.MaxPartitionSmallFileNumber)

	var p flow.Plan
	require.NoError(t, json.Unmarshal([]byte(ok(t, "plan", "--db", db, "--json", "--table", "local."+name)), &p))
	require.Len(t, p.Items, 1)
	require.Equal(t, flow.PlanSkip, p.Items[0].Verdict, p.Items[0].Reason)
	require.Contains(t, p.Items[0].Reason, fmt.Sprintf("but no file group likely qualifies: %d small data files in %d partitions, at most 1 in one",
		after.SmallFileNumber, after.PartitionNumber))
}
