package chain

import (
	"context"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/checksum"
)

// onceBeforeCommit makes b's BeforeCommit hook run write once, the first
// time a type is about to commit, and returns the checksum the table had
// right after it (what the writers intended).
func (b *bundle) onceBeforeCommit(t *testing.T, write func()) *checksum.Result {
	t.Helper()
	var once sync.Once
	intended := &checksum.Result{}
	b.opts.Hooks.BeforeCommit = func(context.Context, Type) error {
		once.Do(func() {
			write()
			*intended = b.sum(t)
		})
		return nil
	}
	return intended
}

// A manifest rewrite whose commit loses to an append is planned again on
// the new head: the new manifests carry the appended file too.
func TestManifestRewriteCommitsThroughAppend(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.small_files")
	intended := b.onceBeforeCommit(t, func() { b.appendRows(t, 1_000_000, 100) })
	rep := b.run(t, Step{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 2}`)})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Reason, "rebased 1 times over 1 snapshots")
	d := tr.Detail.(*ManifestRewriteDetail)
	require.Len(t, d.Rebases, 1)
	require.Equal(t, "append", d.Rebases[0].Snapshots[0].Operation)
	require.Equal(t, smallFiles+1, d.Verified.LiveFiles, "the appended file is in the rewritten manifests")
	require.Equal(t, *intended, b.sum(t))
	require.Empty(t, b.strayFiles(t))
}

// An expiry whose commit loses to an append is planned again: the new
// head is kept, and the rows are the writer's.
func TestSnapshotExpiryCommitsThroughAppend(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.many_snapshots")
	intended := b.onceBeforeCommit(t, func() { b.appendRows(t, 1_000_000, 100) })
	rep := b.run(t, Step{Type: SnapshotExpiry, Policy: policyJSON(`{"older-than": "0s", "retain-last": 1}`)})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	d := tr.Detail.(*ExpiryDetail)
	require.Len(t, d.Rebases, 1)
	after := b.load(t)
	require.Len(t, after.Metadata().Snapshots(), 1)
	require.Equal(t, d.Rebases[0].To, after.CurrentSnapshot().SnapshotID, "the writer's snapshot is the one kept")
	require.Equal(t, *intended, b.sum(t))
	require.Empty(t, b.strayFiles(t))
}

// A tag created while an expiry plans keeps its snapshot: the plan is made
// again on the metadata that has the tag.
func TestSnapshotExpiryKeepsTagCreatedMeanwhile(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.many_snapshots")
	tbl := b.load(t)
	oldest := tbl.Metadata().Snapshots()[0].SnapshotID
	intended := b.onceBeforeCommit(t, func() {
		_, _, err := b.cat.CommitTable(b.ctx, b.ident, nil, []table.Update{
			table.NewSetSnapshotRefUpdate("audit-2024", oldest, table.TagRef, 0, 0, 0),
		})
		require.NoError(t, err)
	})
	rep := b.run(t, Step{Type: SnapshotExpiry, Policy: policyJSON(`{"older-than": "0s", "retain-last": 1}`)})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.NotContains(t, tr.Detail.(*ExpiryDetail).ExpiredSnapshots, oldest)
	after := b.load(t)
	require.NotNil(t, after.Metadata().SnapshotByID(oldest), "the tagged snapshot is kept")
	tagged := after.Metadata().SnapshotByName("audit-2024")
	require.NotNil(t, tagged, "the tag is kept")
	require.Equal(t, oldest, tagged.SnapshotID)
	require.Len(t, after.Metadata().Snapshots(), 2, "the current snapshot and the tagged one")
	require.Equal(t, *intended, b.sum(t))
	ts, err := checksum.Table(b.ctx, after, oldest)
	require.NoError(t, err)
	require.Positive(t, ts.Rows, "the tagged snapshot still reads")
}

// fakeLedger keeps a deletion plan the way the runner's ledger does.
type fakeLedger struct {
	mu      sync.Mutex
	pending map[string]bool
}

func (l *fakeLedger) hooks(h Hooks) Hooks {
	h.PlanDeletes = func(_ context.Context, paths []string) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, p := range paths {
			l.pending[p] = true
		}
		return nil
	}
	h.DeletesDone = func(_ context.Context, paths []string) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, p := range paths {
			delete(l.pending, p)
		}
		return nil
	}
	h.PendingDeletes = func(context.Context) ([]string, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		var out []string
		for p := range l.pending {
			out = append(out, p)
		}
		return out, nil
	}
	return h
}

type crash struct{}

// A runner that dies while snapshot expiry deletes files leaves its plan
// recorded; the next run of the table deletes exactly the rest of it.
func TestInterruptedExpiryDeletionsAreFinished(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.many_snapshots")
	before := b.sum(t)
	disk := diskFiles(t, b.load(t))
	l := &fakeLedger{pending: map[string]bool{}}
	b.opts.Hooks = l.hooks(b.opts.Hooks)
	var planned []string
	plan := b.opts.Hooks.PlanDeletes
	b.opts.Hooks.PlanDeletes = func(ctx context.Context, paths []string) error {
		planned = append(planned, paths...)
		return plan(ctx, paths)
	}
	deletions := 0
	b.opts.Hooks.FileDeleted = func(string) {
		if deletions++; deletions == 3 {
			panic(crash{})
		}
	}
	expiry := Step{Type: SnapshotExpiry, Policy: policyJSON(`{"older-than": "0s", "retain-last": 1}`)}
	func() {
		defer func() { require.Equal(t, crash{}, recover()) }()
		_, _ = Run(b.ctx, b.cat, b.ident, []Step{expiry}, b.opts)
	}()
	require.GreaterOrEqual(t, len(planned), manySnapshots-1, "every file only the expired snapshots referenced")
	require.Len(t, l.pending, len(planned), "the crash cleared nothing")
	gone := 0
	for _, p := range planned {
		if !fileExists(p) {
			gone++
		}
	}
	require.Equal(t, 3, gone)

	// The next run, of any type, finishes the plan first.
	b.opts.Hooks.FileDeleted = nil
	rep := b.run(t, Step{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 1000}`)})
	require.Equal(t, len(planned), rep.FinishedDeletes, "the whole plan is handled (3 files were gone already)")
	require.Empty(t, l.pending)
	after := diskFiles(t, b.load(t))
	var removed []string
	for f := range disk {
		if !after[f] {
			removed = append(removed, f)
		}
	}
	require.ElementsMatch(t, planned, removed, "exactly the planned files are gone")
	require.Equal(t, before, b.sum(t))
	require.Empty(t, b.strayFiles(t))
}
