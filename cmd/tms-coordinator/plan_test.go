package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// TestPlanAgreesWithTheRunner runs serve with a compaction policy whose
// data-file-mse threshold no table reaches: a real runner skips each table
// with its reason. The plan, read afterwards by the plan command, says
// each table waits for the policy's cooldown, and its threshold decision on
// the sample the runner recorded is the runner's reason, word for word:
// both come from policy.Decide. Changing the threshold with the policy
// command turns the plan's threshold verdict around without any job. Then
// tms.partitioned: compacted to one small file in each of its seven
// partitions, the plan says skip (no partition holds min-input-files small
// files), and the runner's next job finds no file group.
func TestPlanAgreesWithTheRunner(t *testing.T) {
	t.Parallel()
	db := testdb.SQLiteURL(t)
	tables := []string{"tms.small_files", "tms.many_snapshots", "tms.partitioned"}
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
	eventually(t, 3*time.Minute, "one finished job per table", func() bool {
		for _, name := range tables {
			if jobs := jobsOf(name); len(jobs) == 0 || jobs[0].InFlight() {
				return false
			}
		}
		return true
	})
	n.stop(t)

	// outcomeOf is the outcome and reason of a job of one type.
	outcomeOf := func(j store.Job) (string, string) {
		var outcomes []struct{ Type, Outcome, Reason string }
		require.NoError(t, json.Unmarshal(j.Outcomes, &outcomes))
		require.Len(t, outcomes, 1, "job %d", j.ID)
		return outcomes[0].Outcome, outcomes[0].Reason
	}
	reasons := map[string]string{}
	for _, name := range tables {
		jobs := jobsOf(name)
		require.Len(t, jobs, 1)
		require.Equal(t, store.StatusSucceeded, jobs[0].Status, "%s: %s (a job whose types were skipped succeeded)", name, jobs[0].Error)
		outcome, reason := outcomeOf(jobs[0])
		require.Equal(t, "skipped", outcome)
		require.Contains(t, reason, "below thresholds: data-file-mse")
		reasons["local."+name] = reason
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
	// tms.partitioned holds 12 small files in each of its 7 partitions:
	// enough for a group in one partition.
	partPlan := func() flow.PlanItem {
		require.NoError(t, json.Unmarshal([]byte(ok(t, "plan", "--db", db, "--json", "--table", "local.tms.partitioned")), &p))
		require.Len(t, p.Items, 1)
		return p.Items[0]
	}
	it := partPlan()
	require.Equal(t, flow.PlanRun, it.Verdict, it.Reason)

	// With the cooldown gone serve compacts it to one file per partition,
	// and then the plan says skip: seven small files, but at most one in a
	// partition. The runner agrees: the next job finds no file group.
	n = serve(t, db, dir)
	part := registered(t, st, "tms.partitioned")
	// The jobs of this serve, oldest first, up to the first finished one
	// after the compaction.
	var runTwo []store.Job
	eventually(t, 3*time.Minute, "a compaction of tms.partitioned and a finished job after it", func() bool {
		jobs, err := st.ListJobs(t.Context(), part.ID, 100)
		require.NoError(t, err)
		runTwo = runTwo[:0]
		for i := len(jobs) - 2; i >= 0; i-- { // jobs[len-1] is the first serve's
			if jobs[i].InFlight() {
				return false
			}
			runTwo = append(runTwo, jobs[i])
			if len(runTwo) == 2 {
				return true
			}
		}
		return false
	})
	n.stop(t)
	outcome, reason := outcomeOf(runTwo[0])
	require.Equal(t, "done", outcome, reason)
	outcome, reason = outcomeOf(runTwo[1])
	require.Equal(t, "skipped", outcome, reason)
	require.Contains(t, reason, "but no file group qualifies")
	it = partPlan()
	require.Equal(t, flow.PlanSkip, it.Verdict, it.Reason)
	require.Contains(t, it.Reason, "but no file group likely qualifies: 7 small data files in 7 partitions, at most 1 in one")

	for _, bad := range [][]string{
		{"--limit", "0"}, {"--limit", "501"}, {"--after", "-1"}, {"--table", "nope"}, {"--table", "local.tms.none"},
		{"--table", "local.tms.small_files", "--all"}, {"--min-interval", "vacuum=1h"},
	} {
		code, _, stderr := run(t, append([]string{"plan", "--db", db}, bad...)...)
		require.Equal(t, cli.ExitUsage, code, "%v: %s", bad, stderr)
		require.NotEmpty(t, stderr)
	}
}
