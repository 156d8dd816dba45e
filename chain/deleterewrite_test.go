package chain

import (
	"context"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

// Merge-on-read deletes leave one small position-delete file per DELETE;
// delete-rewrite merges a partition's into one, and iceberg-go's scan (the
// independent reader) returns the same rows before and after. Entries of a
// data file that is gone (a copy-on-write delete dropped it) are dropped.
func TestDeleteRewriteMergesPositionDeletes(t *testing.T) {
	t.Parallel()
	b := morBundle(t, nil)
	for i := range 3 {
		b.appendIDs(t, i*100, 100)
	}
	for _, id := range []int64{3, 7, 105, 150, 199, 250, 251} {
		b.delete(t, iceberg.EqualTo(iceberg.Reference("id"), id))
	}
	// The third file goes whole, leaving the deletes of 250 and 251.
	b.setProps(t, iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeCopyOnWrite})
	b.delete(t, iceberg.GreaterThanEqual(iceberg.Reference("id"), int64(200)))
	b.setProps(t, iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeMergeOnRead})
	_, deletes := b.liveFiles(t)
	require.Len(t, deletes, 7, "one position-delete file per DELETE")
	before := b.rows(t)
	require.Len(t, before, 200-5)

	rep := b.run(t, Step{Type: DeleteRewrite, Policy: policyJSON(`{"minPositionDeleteFileNumber": 5}`)})
	require.Equal(t, Done, rep.Types[0].Outcome, rep.Types[0].Reason)
	b.requireRows(t, before)
	d := rep.Types[0].Detail.(*DeleteRewriteDetail)
	require.Equal(t, 7, d.InputFiles)
	require.Equal(t, 1, d.OutputFiles)
	require.EqualValues(t, 7, d.InputEntries)
	require.EqualValues(t, 5, d.OutputEntries)
	require.EqualValues(t, 2, d.DroppedEntries, "the entries of the dropped file")
	require.Len(t, d.Verified, 1)
	require.Equal(t, 2, d.Verified[0].DataFiles)
	_, deletes = b.liveFiles(t)
	require.Len(t, deletes, 1)
	require.EqualValues(t, 5, deletes[0].Count())

	// Below the threshold nothing runs.
	rep = b.run(t, Step{Type: DeleteRewrite, Policy: policyJSON(`{"minPositionDeleteFileNumber": 5}`)})
	require.Equal(t, Skipped, rep.Types[0].Outcome)
	require.Contains(t, rep.Types[0].Reason, "< minPositionDeleteFileNumber 5")
	b.requireRows(t, before)
}

// A concurrent append does not end a delete-rewrite: it rebases, and the
// appended rows (which no delete applies to) are read as they were.
func TestDeleteRewriteCommitsThroughConcurrentAppend(t *testing.T) {
	t.Parallel()
	b := morBundle(t, nil)
	b.appendAndDelete5(t)
	var once sync.Once
	var intended []string
	b.opts.Hooks.BeforeCommit = func(context.Context, Type) error {
		once.Do(func() {
			b.appendIDs(t, 1000, 10)
			intended = b.rows(t)
		})
		return nil
	}
	rep := b.run(t, Step{Type: DeleteRewrite, Policy: policyJSON(`{"minPositionDeleteFileNumber": 2}`)})
	tr := rep.Types[0]
	require.Equal(t, Done, tr.Outcome, tr.Reason)
	require.Contains(t, tr.Reason, "rebased 1 times")
	require.Len(t, intended, 95+10)
	b.requireRows(t, intended)
	_, deletes := b.liveFiles(t)
	require.Len(t, deletes, 1)
	require.Empty(t, b.strayFiles(t))
}

// On a v3 table merge-on-read deletes are deletion vectors, one per data
// file: there is nothing to merge.
func TestDeleteRewriteLeavesDeletionVectors(t *testing.T) {
	t.Parallel()
	b := morBundle(t, iceberg.Properties{"format-version": "3"})
	b.appendAndDelete5(t)
	rep := b.run(t, Step{Type: DeleteRewrite, Policy: policyJSON(`{"minPositionDeleteFileNumber": 1}`)})
	require.Equal(t, Skipped, rep.Types[0].Outcome, rep.Types[0].Reason)
	require.Contains(t, rep.Types[0].Reason, "deletion vectors aside")
}

// A table upgraded to v3 keeps its v2 position-delete files; a v3 writer
// must not add new ones, so delete-rewrite leaves them (it would have to
// write deletion vectors) and says so.
func TestDeleteRewriteSkipsUpgradedV3(t *testing.T) {
	t.Parallel()
	b := morBundle(t, nil)
	b.appendAndDelete5(t)
	txn := b.load(t).NewTransaction()
	require.NoError(t, txn.UpgradeFormatVersion(3))
	_, err := txn.Commit(b.ctx)
	require.NoError(t, err)
	before := b.rows(t)
	rep := b.run(t, Step{Type: DeleteRewrite, Policy: policyJSON(`{"minPositionDeleteFileNumber": 2}`)})
	require.Equal(t, Skipped, rep.Types[0].Outcome, rep.Types[0].Reason)
	require.Contains(t, rep.Types[0].Reason, "format v3")
	b.requireRows(t, before)
}

// appendAndDelete5 appends ids 0..99 as one data file and deletes ids 0,
// 10, …, 40 in five merge-on-read commits.
func (b bundle) appendAndDelete5(t *testing.T) {
	t.Helper()
	b.appendIDs(t, 0, 100)
	for id := range int64(5) {
		b.delete(t, iceberg.EqualTo(iceberg.Reference("id"), id*10))
	}
}
