package chain

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// respelledTable builds tms.small_files, drops one of its data files with
// an overwrite (ReplaceDataFiles) and adds the very same file back with
// Transaction.AddFiles under the other local spelling: written as
// file:///abs, re-added as file:/abs, as a Spark add_files after a Trino
// delete does with s3a:// and s3://. It returns both spellings and the
// table's checksum, which reads the same rows as before the drop.
func respelledTable(t *testing.T) (b bundle, written, readded string) {
	t.Helper()
	b = setup(t, "tms.small_files")
	before := b.sum(t)
	tasks, err := b.load(t).Scan().PlanFiles(b.ctx)
	require.NoError(t, err)
	written = tasks[0].File.FilePath()
	require.True(t, strings.HasPrefix(written, "file:///"), written)
	readded = "file:" + strings.TrimPrefix(written, "file://")

	txn := b.load(t).NewTransaction()
	require.NoError(t, txn.ReplaceDataFiles(b.ctx, []string{written}, nil, nil))
	_, err = txn.Commit(b.ctx)
	require.NoError(t, err)
	require.NotEqual(t, before, b.sum(t), "the overwrite dropped the file's rows")

	txn = b.load(t).NewTransaction()
	require.NoError(t, txn.AddFiles(b.ctx, []string{readded}, nil, false))
	_, err = txn.Commit(b.ctx)
	require.NoError(t, err)
	require.Equal(t, before, b.sum(t), "the re-added file reads the dropped rows again")
	return b, written, readded
}

// currentFiles returns every data file the current snapshot reads.
func currentFiles(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	require.NoError(t, err)
	var out []string
	for _, task := range tasks {
		out = append(out, task.File.FilePath())
	}
	return out
}

// A data file an old snapshot references as file:///abs and the current
// one as file:/abs is one object: the manifest rewrite drops the old
// spelling from the current snapshot's manifests, and an expiry that kept
// only the current snapshot used to delete the file as "only referenced
// by expired snapshots", leaving the table unreadable. With the default
// prefix-mismatch-mode (error) the expiry fails before committing; with
// ignore it commits and keeps the file.
func TestSnapshotExpiryKeepsRespelledFile(t *testing.T) {
	t.Parallel()
	rewrite := Step{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 2}`)}
	for _, tc := range []struct {
		mode   string
		policy string
	}{
		{"error", `{"rewriteOptions": {"older-than": "0s", "retain-last": 1}}`},
		{"ignore", `{"rewriteOptions": {"older-than": "0s", "retain-last": 1, "prefix-mismatch-mode": "ignore"}}`},
		{"delete", `{"older-than": "0s", "retain-last": 1, "prefixMismatchMode": "delete"}`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			b, written, readded := respelledTable(t)
			want := b.sum(t)
			snapshots := len(b.load(t).Metadata().Snapshots())

			rep := b.run(t, rewrite, Step{Type: SnapshotExpiry, Policy: policyJSON(tc.policy)})
			require.Equal(t, Done, rep.Types[0].Outcome, rep.Types[0].Reason)
			tr := rep.Types[1]
			after := b.load(t)
			for _, f := range currentFiles(t, after) {
				_, err := os.Stat(osPath(t, f))
				require.NoError(t, err, "%s, which the current snapshot reads, was deleted (%s)", f, tr.Reason)
			}
			require.Contains(t, currentFiles(t, after), readded)
			require.Equal(t, want, b.sum(t))

			if tc.mode == "error" {
				require.Equal(t, Failed, tr.Outcome, tr.Reason)
				require.Contains(t, tr.Err, written)
				require.Contains(t, tr.Err, readded)
				require.Contains(t, tr.Err, "prefix-mismatch-mode")
				require.Nil(t, tr.Detail)
				require.Len(t, after.Metadata().Snapshots(), snapshots+1, "no snapshot expired (the rewrite added one)")
				return
			}
			require.Equal(t, Done, tr.Outcome, tr.Reason)
			d := tr.Detail.(*ExpiryDetail)
			require.Equal(t, 1, d.KeptRespelled, tr.Reason)
			require.Positive(t, d.DeletedFiles, "the other files only the expired snapshots referenced are deleted")
			require.Equal(t, d.PlannedDeletes, d.DeletedFiles)
			require.Contains(t, tr.Reason, "kept 1 files")
			require.Len(t, after.Metadata().Snapshots(), 1)
			require.Empty(t, b.strayFiles(t))
		})
	}
}

// A deletion plan an earlier run left is finished by canonical location
// too: a planned file the table now references under another spelling is
// kept, so is a planned location that does not parse (a file: URI with a
// query, which iceberg-go's local FileIO would open, and delete, as the
// live file before the "?"), and a file nothing references is deleted.
func TestFinishPendingDeletesKeepsRespelledFiles(t *testing.T) {
	t.Parallel()
	b, written, readded := respelledTable(t)
	want := b.sum(t)
	// Leave only the snapshot that reads the file as file:/abs, without
	// deleting anything.
	rep := b.run(t, Step{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 2}`)},
		Step{Type: SnapshotExpiry, Policy: policyJSON(`{"older-than": "0s", "retain-last": 1, "cleanExpiredFiles": false}`)})
	require.Equal(t, []Outcome{Done, Done}, outcomes(rep), rep.Types[1].Reason)
	tbl := b.load(t)
	raw, err := referencedFiles(b.ctx, tbl, mustFS(t, tbl), nil)
	require.NoError(t, err)
	require.False(t, raw[written], "the table no longer names the file as it was written")
	require.True(t, raw[readded])

	live := currentFiles(t, tbl)
	var other string
	for _, f := range live {
		if f != readded {
			other = f
		}
	}
	require.NotEmpty(t, other)
	withQuery := other + "?v=1"
	unreferenced := strings.TrimSuffix(written, ".parquet") + "-unreferenced.parquet"
	require.NoError(t, os.WriteFile(osPath(t, unreferenced), []byte("x"), 0o644))

	l := &fakeLedger{pending: map[string]bool{written: true, withQuery: true, unreferenced: true}}
	b.opts.Hooks = l.hooks(b.opts.Hooks)
	rep = b.run(t, Step{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 1000}`)})
	require.Equal(t, 1, rep.FinishedDeletes, "only the unreferenced file is deleted")
	require.Empty(t, l.pending, "the kept files are handled too")
	_, err = os.Stat(osPath(t, unreferenced))
	require.ErrorIs(t, err, os.ErrNotExist)
	for _, f := range live {
		_, err := os.Stat(osPath(t, f))
		require.NoError(t, err, "%s, which the current snapshot reads, was deleted", f)
	}
	require.Equal(t, want, b.sum(t))
}

// The prefix-mismatch mode decides what an expiry does with files a
// retained snapshot references under another spelling: error names both
// spellings (and says which pairs are only the same path), ignore and
// delete keep them.
func TestExpiryRespellingModes(t *testing.T) {
	t.Parallel()
	ef := expiryFiles{respelled: []respelling{
		{file: "file:///t/data/a.parquet", retained: "file:/t/data/a.parquet"},
		{file: "hdfs://nn1:8020/t/data/b.parquet", retained: "hdfs://nn2:8020/t/data/b.parquet", samePath: true},
	}}
	log := zaptest.NewLogger(t)
	err := ef.check(table.PrefixMismatchError, log)
	require.ErrorContains(t, err, "file:///t/data/a.parquet is the same object as retained file:/t/data/a.parquet")
	require.ErrorContains(t, err, "hdfs://nn1:8020/t/data/b.parquet has the path of retained hdfs://nn2:8020/t/data/b.parquet under another scheme or authority")
	require.ErrorContains(t, err, "nothing expired or deleted")
	require.NoError(t, ef.check(table.PrefixMismatchIgnore, log))
	require.NoError(t, ef.check(table.PrefixMismatchDelete, log))
	require.NoError(t, expiryFiles{unparsable: []string{"file:///t/x?y"}}.check(table.PrefixMismatchError, log),
		"an unparsable location is kept, not an error")

	for i := range 7 {
		ef.respelled = append(ef.respelled, respelling{file: fmt.Sprintf("s3a://b/%d", i), retained: fmt.Sprintf("s3://b/%d", i)})
	}
	require.ErrorContains(t, ef.check(table.PrefixMismatchError, log), "and 4 more")
}
