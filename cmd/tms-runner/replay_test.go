package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/testdata"
)

// replayJSON is the part of `replay --json` the tests read.
type replayJSON struct {
	Table string `json:"table"`
	Types []struct {
		Type             string         `json:"type"`
		Outcome          string         `json:"outcome"`
		Reason           string         `json:"reason"`
		BeforeSnapshotID int64          `json:"before_snapshot_id"`
		AfterSnapshotID  int64          `json:"after_snapshot_id"`
		MetricsBefore    map[string]any `json:"metrics_before"`
		MetricsAfter     map[string]any `json:"metrics_after"`
	} `json:"types"`
}

// TestReplay replays the full chain on tms.small_files: a dry run first
// (which changes nothing), then for real with --json (200 small files become
// fewer, same rows), then the human table on the compacted table. Every
// replay leaves a closed manual row in the replay ledger.
func TestReplay(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	const name = "tms.small_files"
	// A 20-file variant of the recipe: the same shape at a tenth of the
	// build time under the race detector.
	dir := testdata.BuildAdjustedT(t, func(r *testdata.Recipe) { r.Appends = 20 }, name)
	ledgerURL := "sqlite://" + filepath.Join(t.TempDir(), "replay.db")
	base := []string{"replay", "--warehouse-dir", dir, "--table", name,
		"--types", "snapshot-expiry,compaction,manifest-rewrite", "--ledger", ledgerURL}
	before := tableState(t, dir, name)

	// Dry run: decides, prints, commits nothing.
	r := execRunner(t, nil, append(base, "--dry-run")...)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "dry run")
	require.Equal(t, before, tableState(t, dir, name), "a dry run changes nothing")

	// For real, as JSON.
	r = execRunner(t, nil, append(base, "--json")...)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var got replayJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Equal(t, name, got.Table)
	require.Len(t, got.Types, 3)
	require.Equal(t, []string{"compaction", "manifest-rewrite", "snapshot-expiry"},
		[]string{got.Types[0].Type, got.Types[1].Type, got.Types[2].Type}, "chain order, whatever --types said")
	c := got.Types[0]
	require.Equal(t, "done", c.Outcome, c.Reason)
	require.NotEmpty(t, c.Reason)
	require.Equal(t, before.head, c.BeforeSnapshotID)
	require.NotEqual(t, c.BeforeSnapshotID, c.AfterSnapshotID)
	require.EqualValues(t, 20, c.MetricsBefore["data-file-number"])
	require.Less(t, c.MetricsAfter["data-file-number"], float64(20))
	require.EqualValues(t, 20_000, c.MetricsAfter["record-count"])
	after := tableState(t, dir, name)
	require.Equal(t, before.sum, after.sum, "same rows after compaction")

	// Human output on the compacted table: compaction has nothing left to do.
	r = execRunner(t, nil, base...)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	for _, want := range []string{name, "TYPE", "OUTCOME", "FILES", "BYTES", "MANIFESTS", "SNAPSHOTS", "DATA-FILE-MSE", "DURATION",
		"compaction", "manifest-rewrite", "snapshot-expiry", "skipped"} {
		require.Contains(t, r.stdout, want)
	}

	// The replay ledger has three closed manual rows.
	st, err := store.Open(context.Background(), ledgerURL, nil)
	require.NoError(t, err)
	defer st.Close()
	tbl, err := st.FindTable(t.Context(), "local", "tms", "small_files")
	require.NoError(t, err)
	jobs, err := st.ListJobs(t.Context(), tbl.ID, 10)
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	for _, j := range jobs {
		require.Equal(t, store.TriggerManual, j.Trigger)
		require.Equal(t, store.NoPolicy, j.PolicyID)
		require.Equal(t, store.StatusSucceeded, j.Status)
		require.NotNil(t, j.Outcomes)
	}
	require.Equal(t, &after.head, jobs[1].AfterSnapshotID, "the real run's row records the head it left")
}

// TestReplayBadInput covers replay's usage errors: each exits 2, prints
// nothing on stdout and leaves the table alone.
func TestReplayBadInput(t *testing.T) {
	t.Parallel()
	const name = "tms.orphans"
	dir := testdata.BuildT(t, name)
	before := tableState(t, dir, name)
	pdir := t.TempDir()
	policy := func(file, content string) string {
		p := filepath.Join(pdir, file)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	good := policy("good.json", `{"policyType": "system_iceberg_compaction", "content": {"minDataFileMse": 1}}`)
	neg := policy("neg.json", `{"policyType": "system_iceberg_compaction", "content": {"rewriteOptions": {"target-file-size-bytes": -5}}}`)
	floor := policy("floor.json", `{"type": "orphan-cleanup", "content": {"older-than": "5m"}}`)
	unknown := policy("unknown.json", `{"policyType": "system_iceberg_nope", "content": {}}`)
	untyped := policy("untyped.json", `{"content": {}}`)
	ledger := "sqlite://" + filepath.Join(t.TempDir(), "replay.db")
	base := []string{"replay", "--warehouse-dir", dir, "--table", name, "--ledger", ledger}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no types", base, cli.ExitUsage, "--types is required"},
		{"unknown type", append(base, "--types", "compaction,vacuum"), cli.ExitUsage, `"vacuum"`},
		{"policy not in types", append(base, "--types", "manifest-rewrite", "--policy", good), cli.ExitUsage, "not in --types"},
		{"two policies for one type", append(base, "--types", "compaction", "--policy", good, "--policy", good), cli.ExitUsage, "give one per type"},
		{"negative size", append(base, "--types", "compaction", "--policy", neg), cli.ExitUsage, "rewriteOptions.target-file-size-bytes"},
		{"older-than below floor", append(base, "--types", "orphan-cleanup", "--policy", floor), cli.ExitUsage, "older-than"},
		{"unknown policyType", append(base, "--types", "compaction", "--policy", unknown), cli.ExitUsage, "system_iceberg_nope"},
		{"untyped policy", append(base, "--types", "compaction", "--policy", untyped), cli.ExitUsage, `needs "policyType" or "type"`},
		{"missing table", []string{"replay", "--warehouse-dir", dir, "--table", "tms.nope", "--types", "compaction", "--ledger", ledger}, cli.ExitFailure, "table tms.nope does not exist"},
		{"no catalog", []string{"replay", "--table", name, "--types", "compaction", "--ledger", ledger}, cli.ExitUsage, "no catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			require.Empty(t, out)
			require.Contains(t, stderr, tc.want)
		})
	}
	require.Equal(t, before, tableState(t, dir, name))
}
