package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/testdata"
)

// catalogArgs spells a foreign table's catalog as --catalog-prop flags.
func catalogArgs(f testdata.ForeignTable) []string {
	out := []string{"--catalog-name", f.CatalogName}
	for k, v := range f.CatalogProps {
		out = append(out, "--catalog-prop", k+"="+v)
	}
	return out
}

// The real binaries on the migrated layout: `checksum` reads the
// identity-partition values the files do not store, and `replay` compacts
// the table without changing a row.
func TestReplayMigratedLayout(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	f := testdata.BuildForeignT(t, "foreign.migrated")
	_, tbl, err := f.LoadTable(t.Context())
	require.NoError(t, err)
	want, err := checksum.Batches(tbl.Schema(), f.Expected)
	require.NoError(t, err)
	name := catalogs.IdentString(f.Ident)
	sum := func() checksum.Result {
		r := execRunner(t, nil, append([]string{"checksum", "--table", name, "--json"}, catalogArgs(f)...)...)
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		var res checksum.Result
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
		return res
	}
	require.Equal(t, want, sum(), "the binary's checksum of the table as built is that of the rows its builder wrote")

	policy := filepath.Join(t.TempDir(), "compaction.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{"type": "compaction", "content": {"minDataFileMse": 0, "rewriteOptions": {"min-input-files": 1}}}`), 0o600))
	ledger := "sqlite://" + filepath.Join(t.TempDir(), "replay.db")
	r := execRunner(t, nil, append([]string{"replay", "--table", name, "--types", "compaction", "--policy", policy, "--ledger", ledger, "--json"}, catalogArgs(f)...)...)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var got replayJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Equal(t, "done", got.Types[0].Outcome, got.Types[0].Reason)
	require.Equal(t, want, sum(), "same rows after compaction")
}

// A table the runner cannot read faithfully: replay exits non-zero, the
// type and the ledger row say why (naming the file), and nothing is
// committed.
func TestReplayRefusesUnfaithfulTable(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	f := testdata.BuildForeignT(t, "foreign.name-mapped")
	_, tbl, err := f.LoadTable(t.Context())
	require.NoError(t, err)
	txn := tbl.NewTransaction()
	require.NoError(t, txn.RemoveProperties([]string{table.DefaultNameMappingKey}))
	tbl, err = txn.Commit(t.Context())
	require.NoError(t, err)
	head := tbl.CurrentSnapshot().SnapshotID

	policy := filepath.Join(t.TempDir(), "compaction.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{"type": "compaction", "content": {"minDataFileMse": 0, "rewriteOptions": {"min-input-files": 1}}}`), 0o600))
	ledger := "sqlite://" + filepath.Join(t.TempDir(), "replay.db")
	r := execRunner(t, nil, append([]string{"replay", "--table", catalogs.IdentString(f.Ident), "--types", "compaction,manifest-rewrite",
		"--policy", policy, "--ledger", ledger, "--json"}, catalogArgs(f)...)...)
	require.Equal(t, cli.ExitFailure, r.code, r.stderr)
	var got replayJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Equal(t, "failed", got.Types[0].Outcome)
	require.Contains(t, got.Types[0].Reason, "has no field ids and the table has no name mapping")
	require.Contains(t, got.Types[0].Reason, ".parquet")

	_, after, err := f.LoadTable(t.Context())
	require.NoError(t, err)
	require.Equal(t, head, after.CurrentSnapshot().SnapshotID, "nothing committed by the failed type")

	st, err := store.Open(t.Context(), ledger, nil)
	require.NoError(t, err)
	defer st.Close()
	mt, err := st.FindTable(t.Context(), f.CatalogName, f.Ident[0], f.Ident[1])
	require.NoError(t, err)
	jobs, err := st.ListJobs(t.Context(), mt.ID, 10)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, store.StatusFailed, jobs[0].Status)
	require.Contains(t, jobs[0].Error, "has no field ids and the table has no name mapping")
}

// A runner killed (SIGKILL) while snapshot expiry deletes the files only
// the expired snapshots referenced leaves its deletion plan in the ledger;
// the next run of the table deletes exactly the rest of the plan, and
// nothing else.
func TestExpiryKilledWhileDeletingIsFinished(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	const name = "tms.many_snapshots"
	dir := testdata.BuildT(t, name)
	before := treeFiles(t, dir)
	sum := tableState(t, dir, name).sum
	pfile := filepath.Join(t.TempDir(), "expiry.json")
	require.NoError(t, os.WriteFile(pfile, []byte(`{"type": "snapshot-expiry", "content": {"older-than": "0s", "retain-last": 1}}`), 0o600))
	ledger := "sqlite://" + filepath.Join(t.TempDir(), "replay.db")
	args := []string{"replay", "--warehouse-dir", dir, "--table", name, "--types", "snapshot-expiry", "--policy", pfile, "--ledger", ledger}

	cmd := exec.CommandContext(t.Context(), runnerBinary(t), args...)
	cmd.Env = append(os.Environ(), "TMS_FAILPOINT=pause-after-deletes:5")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stderr)
	paused := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "failpoint: paused after 5 deletions") {
			paused = true
			break
		}
	}
	require.True(t, paused, "the runner reached the failpoint")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	st, err := store.Open(t.Context(), ledger, nil)
	require.NoError(t, err)
	defer st.Close()
	tbl, err := st.FindTable(t.Context(), "local", "tms", "many_snapshots")
	require.NoError(t, err)
	planned, err := st.PendingDeletes(t.Context(), tbl.ID)
	require.NoError(t, err)
	require.Greater(t, len(planned), 100, "the plan was recorded before deleting")
	gone := 0
	for _, p := range planned {
		if _, err := os.Stat(strings.TrimPrefix(p, "file://")); os.IsNotExist(err) {
			gone++
		}
	}
	require.Equal(t, 5, gone, "killed after 5 deletions")

	// The reconciler closes the dead runner's row (fence bumped first).
	jobs, err := st.ListJobs(t.Context(), tbl.ID, 1)
	require.NoError(t, err)
	fence, err := st.BumpFence(t.Context(), jobs[0].ID)
	require.NoError(t, err)
	require.NoError(t, st.FinishJob(t.Context(), jobs[0].ID, fence, store.Finish{Status: store.StatusLost, Error: "runner died"}))

	r := execRunner(t, nil, args...)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	left, err := st.PendingDeletes(t.Context(), tbl.ID)
	require.NoError(t, err)
	require.Empty(t, left)
	after := treeFiles(t, dir)
	var removed []string
	for f := range before {
		if !after[f] {
			removed = append(removed, "file://"+f)
		}
	}
	require.ElementsMatch(t, planned, removed, "exactly the planned files are gone, nothing else")
	require.Equal(t, sum, tableState(t, dir, name).sum)
}

// treeFiles lists every file under dir.
func treeFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out[p] = true
		}
		return err
	}))
	return out
}
