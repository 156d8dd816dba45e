package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/testdata"
)

func TestManifestRewriteManySnapshots(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.many_snapshots")
	before := b.sum(t)
	n, err := manifestCount(b.load(t))
	require.NoError(t, err)
	require.Equal(t, manySnapshots, n)
	rep := b.run(t, Step{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 30}`)})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Reason, fmt.Sprintf("manifest-number %d ≥ minManifestNumber 30", manySnapshots))
	require.EqualValues(t, manySnapshots, tr.MetricsBefore.ManifestNumber)
	require.LessOrEqual(t, tr.MetricsAfter.ManifestNumber, int64(2))
	require.Equal(t, before, b.sum(t))
	require.Empty(t, b.strayFiles(t))
}

func TestManifestRewriteBelowThresholdSkips(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	rep := b.run(t, Step{Type: ManifestRewrite})
	require.Equal(t, Skipped, rep.Types[0].Outcome)
	require.Contains(t, rep.Types[0].Reason, "below thresholds: manifest-number 5")
}

func TestSnapshotExpiryRemovesSnapshotsAndFiles(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.many_snapshots")
	before := b.sum(t)
	tbl := b.load(t)
	// Snapshot 10 back from HEAD is protected: retain-last 5 must grow to 11.
	anc := ancestors(tbl.Metadata(), tbl.CurrentSnapshot().SnapshotID)
	protected := anc[10]
	expiredManifestList := tbl.Metadata().SnapshotByID(anc[30]).ManifestList
	require.True(t, fileExists(expiredManifestList))
	b.opts.Hooks.ProtectedSnapshots = func(context.Context) ([]int64, error) { return []int64{protected}, nil }
	rep := b.run(t, Step{Type: SnapshotExpiry, Policy: policyJSON(`{"rewriteOptions": {"older-than": "0s", "retain-last": "5"}}`)})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Reason, "retain-last 11")
	require.EqualValues(t, manySnapshots, tr.MetricsBefore.SnapshotNumber)
	require.EqualValues(t, 11, tr.MetricsAfter.SnapshotNumber)
	after := b.load(t)
	require.NotNil(t, after.Metadata().SnapshotByID(protected))
	require.False(t, fileExists(expiredManifestList), "manifest list of an expired snapshot is deleted")
	require.Equal(t, before, b.sum(t))
	require.Empty(t, b.strayFiles(t))
}

func TestSnapshotExpiryTablePropertyDefaultsKeepFreshSnapshots(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.many_snapshots")
	rep := b.run(t, Step{Type: SnapshotExpiry})
	require.Equal(t, Skipped, rep.Types[0].Outcome)
	require.Contains(t, rep.Types[0].Reason, "nothing to expire")
}

func TestOrphanCleanupDeletesExactlyOldOrphans(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	before := b.sum(t)
	orphans, err := testdata.ReadOrphans(b.dir)
	require.NoError(t, err)
	require.NotEmpty(t, orphans)
	tbl := b.load(t)
	fsys, err := tbl.FS(b.ctx)
	require.NoError(t, err)
	refs, err := referencedFiles(t.Context(), tbl, fsys, nil)
	require.NoError(t, err)

	// Dry run: lists the old orphans, deletes nothing.
	dry := b
	dry.opts.DryRun = true
	files := diskFiles(t, tbl)
	rep := dry.run(t, Step{Type: OrphanCleanup})
	require.Equal(t, Skipped, rep.Types[0].Outcome)
	require.Contains(t, rep.Types[0].Reason, "dry run: would delete")
	plan := rep.Types[0].Detail.(*OrphanPlan)
	var planned []string
	for _, f := range plan.Files {
		planned = append(planned, f.Path)
		require.Positive(t, f.SizeBytes)
	}
	var old []string
	for _, o := range orphans {
		if o.Old {
			old = append(old, o.Location)
		}
	}
	require.ElementsMatch(t, old, planned)
	require.Equal(t, files, diskFiles(t, tbl))

	rep = b.run(t, Step{Type: OrphanCleanup})
	require.Equal(t, Done, rep.Types[0].Outcome, rep.Types[0].Reason)
	for _, o := range orphans {
		require.Equal(t, !o.Old, fileExists(o.Location), o.Location)
	}
	for f := range refs {
		if f != "" && !fileExists(f) {
			// version-hint etc. may be referenced without existing
			_, statErr := os.Stat(localPath(f))
			require.True(t, os.IsNotExist(statErr))
			require.NotContains(t, files, f, "referenced file %s was deleted", f)
		}
	}
	require.Equal(t, before, b.sum(t))
}

func TestOrphanCleanupRefusesShortAge(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	rep := b.run(t, Step{Type: OrphanCleanup, Policy: policyJSON(`{"rewriteOptions": {"older-than": "30m"}}`)})
	require.Equal(t, Failed, rep.Types[0].Outcome)
	require.Contains(t, rep.Types[0].Err, "rewriteOptions.older-than: must be at least 1h0m0s")
	orphans, err := testdata.ReadOrphans(b.dir)
	require.NoError(t, err)
	for _, o := range orphans {
		require.True(t, fileExists(o.Location))
	}
}

func TestFullChainOnEveryRecipe(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	before := b.sum(t)
	steps := []Step{{Type: Compaction}, {Type: ManifestRewrite}, {Type: SnapshotExpiry}, {Type: OrphanCleanup}}
	rep := b.run(t, steps...)
	require.False(t, rep.Failed())
	require.Equal(t, []Outcome{Done, Skipped, Skipped, Done}, outcomes(rep))
	require.Equal(t, before, b.sum(t))
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(js, &back))
	require.Equal(t, "tms.orphans", back["table"])
	ty := back["types"].([]any)[0].(map[string]any)
	for _, k := range []string{"type", "outcome", "reason", "before_snapshot_id", "after_snapshot_id", "metrics_before", "metrics_after", "duration_ms"} {
		require.Contains(t, ty, k)
	}
	require.Contains(t, ty["metrics_before"], "data-file-mse")
	require.Positive(t, rep.Duration)
	require.Positive(t, rep.Types[0].Duration)
}

func outcomes(r Report) []Outcome {
	var out []Outcome
	for _, t := range r.Types {
		out = append(out, t.Outcome)
	}
	return out
}

func TestMissingTableFails(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	b.ident = []string{"tms", "nope"}
	rep := b.run(t, Step{Type: Compaction}, Step{Type: SnapshotExpiry})
	require.Equal(t, []Outcome{Failed, Failed}, outcomes(rep))
	require.Contains(t, rep.Types[0].Err, "tms.nope does not exist")
}

func TestCorruptManifestFails(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.small_files")
	tbl := b.load(t)
	fsys, err := tbl.FS(b.ctx)
	require.NoError(t, err)
	mans, err := tbl.CurrentSnapshot().Manifests(fsys)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(localPath(mans[0].FilePath()), []byte("garbage"), 0o644))
	head := tbl.CurrentSnapshot().SnapshotID
	rep := b.run(t, Step{Type: Compaction})
	require.Equal(t, Failed, rep.Types[0].Outcome)
	require.Contains(t, rep.Types[0].Err, mans[0].FilePath())
	require.Equal(t, head, b.load(t).CurrentSnapshot().SnapshotID)
}

func TestUnreadableDataFileFailsAndCleansUp(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.partitioned")
	tbl := b.load(t)
	tasks, err := tbl.Scan().PlanFiles(b.ctx)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(localPath(tasks[len(tasks)-1].File.FilePath()), []byte("PAR1garbagePAR1"), 0o644))
	head := tbl.CurrentSnapshot().SnapshotID
	rep := b.run(t, Step{Type: Compaction, Policy: policyJSON(`{"rewriteOptions": {"max-concurrent-file-group-rewrites": "2"}}`)})
	require.Equal(t, Failed, rep.Types[0].Outcome, rep.Types[0].Reason)
	require.Equal(t, head, b.load(t).CurrentSnapshot().SnapshotID)
	require.Empty(t, b.strayFiles(t))
}

func TestDryRunChainChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.many_snapshots")
	tbl := b.load(t)
	files := diskFiles(t, tbl)
	b.opts.DryRun = true
	rep := b.run(t, Step{Type: Compaction}, Step{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 30}`)},
		Step{Type: SnapshotExpiry, Policy: policyJSON(`{"retain-last": 2, "older-than": "0s"}`)}, Step{Type: OrphanCleanup})
	require.Equal(t, []Outcome{Skipped, Skipped, Skipped, Skipped}, outcomes(rep))
	for _, tr := range rep.Types[:3] {
		require.Contains(t, tr.Reason, "dry run: would", tr.Type)
	}
	require.Contains(t, rep.Types[3].Reason, "no orphan files")
	require.Equal(t, tbl.CurrentSnapshot().SnapshotID, rep.AfterSnapshotID)
	require.Equal(t, files, diskFiles(t, b.load(t)))
}
