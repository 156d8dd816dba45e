package chain

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/faithful"
	"github.com/tms-dev/tms/testdata"
)

// The chain on tables other engines wrote (testdata's foreign recipes):
// every type forced, then orphan cleanup. The oracle is the rows each
// recipe's builder says it wrote (ForeignTable.Expected), never a read of
// the table: the faithful checksum must equal theirs before and after, the
// per-partition record counts of the live files after compaction must equal
// the counts of those rows by the current spec, and orphan cleanup must
// delete exactly the planted orphans.

// forcedChain runs every type whatever the table looks like: compaction of
// every file, a manifest rewrite, expiry of all but the current snapshot,
// orphan cleanup of files older than 72 h.
var forcedChain = []Step{
	{Type: Compaction, Policy: policyJSON(`{"minDataFileMse": 0, "rewriteOptions": {"min-input-files": 1}}`)},
	{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 1, "maxAvgManifestSizeBytes": 1073741824}`)},
	{Type: SnapshotExpiry, Policy: policyJSON(`{"older-than": "1ms", "retain-last": 1}`)},
	{Type: OrphanCleanup},
}

func TestChainOnForeignLayouts(t *testing.T) {
	for _, name := range testdata.ForeignNames() {
		t.Run(name, func(t *testing.T) {
			f := testdata.BuildForeignT(t, name)
			if f.Workdir == "" {
				t.Parallel()
			}
			ctx := t.Context()
			cat, tbl, err := f.LoadTable(ctx)
			require.NoError(t, err)
			want, err := checksum.Batches(tbl.Schema(), f.Expected)
			require.NoError(t, err)
			before, err := checksum.Table(ctx, tbl, 0)
			require.NoError(t, err)
			require.Equal(t, want, before, "the faithful checksum of the table as built equals the checksum of the rows its builder wrote")

			rep, err := Run(ctx, cat, f.Ident, forcedChain, Options{Log: zaptest.NewLogger(t)})
			require.NoError(t, err)
			for _, tr := range rep.Types {
				t.Logf("%s: %s: %s", tr.Type, tr.Outcome, tr.Reason)
			}
			require.Equal(t, []Outcome{Done, Done, Done, Done}, outcomes(rep))

			after, err := cat.LoadTable(ctx, f.Ident)
			require.NoError(t, err)
			got, err := checksum.Table(ctx, after, 0)
			require.NoError(t, err)
			require.Equal(t, want, got, "rows after the chain")

			// Compaction rewrote every file: the live files are all in the
			// current spec, and their record counts per tuple are the
			// expected rows' counts per tuple.
			require.Equal(t, expectedPartitionCounts(t, after, f.Expected), livePartitionCounts(t, after))
			cd := rep.Types[0].Detail.(*CompactionDetail)
			require.NotEmpty(t, cd.Verified)
			for _, v := range cd.Verified {
				require.Equal(t, v.ReplacedFiles, countTasks(cd))
				require.NotEmpty(t, v.Partitions)
			}

			plan := rep.Types[3].Detail.(*OrphanPlan)
			var deleted []string
			for _, o := range plan.Files {
				deleted = append(deleted, fileOSPath(o.Path))
			}
			require.ElementsMatch(t, f.Orphans, deleted, "orphan cleanup deletes exactly the planted orphans")
			for _, o := range f.Orphans {
				require.NoFileExists(t, o)
			}
			for _, k := range f.Kept {
				require.FileExists(t, k, "hidden or kept file")
			}
			t.Logf("%s: checksum before %s (%d rows), after %s (%d rows); orphan cleanup deleted %d: %s", name,
				before.Checksum, before.Rows, got.Checksum, got.Rows, len(deleted), strings.Join(relTo(fileOSPath(after.Location()), deleted), ", "))
			require.FileExists(t, fileOSPath(after.MetadataLocation()))
		})
	}
}

func countTasks(cd *CompactionDetail) int { return cd.InputFiles }

// relTo spells paths relative to root, for logs.
func relTo(root string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = strings.TrimPrefix(p, root+"/")
	}
	slices.Sort(out)
	return out
}

// fileOSPath turns a file: location (any spelling) into an OS path.
func fileOSPath(loc string) string {
	p := strings.TrimPrefix(loc, "file:")
	for strings.HasPrefix(p, "//") {
		p = p[1:]
	}
	if !filepath.IsAbs(p) {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
	}
	return filepath.Clean(p)
}

// livePartitionCounts sums the record counts of the current snapshot's data
// files per partition tuple; every file must be in the current spec and no
// delete file may be live.
func livePartitionCounts(t *testing.T, tbl *table.Table) map[string]int64 {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	require.NoError(t, err)
	spec := tbl.Spec()
	out := map[string]int64{}
	for _, task := range tasks {
		require.Equal(t, int32(spec.ID()), task.File.SpecID(), "file %s", task.File.FilePath())
		require.Empty(t, slices.Concat(task.DeleteFiles, task.EqualityDeleteFiles, task.DeletionVectorFiles))
		var key []string
		for _, pf := range spec.Fields() {
			src, ok := tbl.Schema().FindFieldByID(pf.SourceIDs[0])
			require.True(t, ok)
			key = append(key, valueText(t, pf.Transform.ResultType(src.Type), task.File.Partition()[pf.FieldID]))
		}
		out[strings.Join(key, "/")] += task.File.Count()
	}
	return out
}

// expectedPartitionCounts counts rows per partition tuple of tbl's current
// spec, applying the spec's transforms to the rows themselves.
func expectedPartitionCounts(t *testing.T, tbl *table.Table, batches []arrow.RecordBatch) map[string]int64 {
	t.Helper()
	spec := tbl.Spec()
	out := map[string]int64{}
	for _, b := range batches {
		for i := range int(b.NumRows()) {
			var key []string
			for _, pf := range spec.Fields() {
				src, ok := tbl.Schema().FindFieldByID(pf.SourceIDs[0])
				require.True(t, ok)
				idx := b.Schema().FieldIndices(src.Name)
				require.Len(t, idx, 1, "column %s", src.Name)
				v := pf.Transform.Apply(arrowLiteral(t, src.Type, b.Column(idx[0]), i))
				var val any
				if v.Valid {
					val = v.Val.Any()
				}
				key = append(key, valueText(t, pf.Transform.ResultType(src.Type), val))
			}
			out[strings.Join(key, "/")]++
		}
	}
	return out
}

func valueText(t *testing.T, typ iceberg.Type, v any) string {
	t.Helper()
	if v == nil {
		return "null"
	}
	lit, err := faithful.Literal(typ, v)
	require.NoError(t, err)
	return lit.String()
}

// arrowLiteral returns row i of arr as a literal of type typ.
func arrowLiteral(t *testing.T, typ iceberg.Type, arr arrow.Array, i int) iceberg.Optional[iceberg.Literal] {
	t.Helper()
	if arr.IsNull(i) {
		return iceberg.Optional[iceberg.Literal]{}
	}
	var lit iceberg.Literal
	switch a := arr.(type) {
	case *array.String:
		lit = iceberg.NewLiteral(a.Value(i))
	case *array.LargeString:
		lit = iceberg.NewLiteral(a.Value(i))
	case *array.Int32:
		lit = iceberg.NewLiteral(a.Value(i))
	case *array.Int64:
		lit = iceberg.NewLiteral(a.Value(i))
	case *array.Date32:
		lit = iceberg.NewLiteral(iceberg.Date(a.Value(i)))
	case *array.Timestamp:
		lit = iceberg.NewLiteral(iceberg.Timestamp(a.Value(i)))
	case *array.Boolean:
		lit = iceberg.NewLiteral(a.Value(i))
	case *array.Decimal128:
		lit = iceberg.NewLiteral(iceberg.Decimal{Val: a.Value(i), Scale: int(a.DataType().(*arrow.Decimal128Type).Scale)})
	case *extensions.UUIDArray:
		lit = iceberg.NewLiteral(a.Value(i))
	default:
		t.Fatalf("partition source column of Arrow type %s: add it to arrowLiteral", arr.DataType())
	}
	out, err := lit.To(typ)
	require.NoError(t, err)
	return iceberg.Optional[iceberg.Literal]{Val: out, Valid: true}
}

// A naive rewrite (iceberg-go's own ExecuteCompactionGroup, which reads a
// column a file does not store as NULL) of the migrated layout loses the
// identity-partition values. The faithful checksum sees it; the verifier
// refuses to commit it.
func TestNaiveRewriteOfMigratedTableIsSeen(t *testing.T) {
	t.Parallel()
	f := testdata.BuildForeignT(t, "foreign.migrated")
	ctx := t.Context()
	cat, tbl, err := f.LoadTable(ctx)
	require.NoError(t, err)
	before, err := checksum.Table(ctx, tbl, 0)
	require.NoError(t, err)

	tasks, err := tbl.Scan().PlanFiles(ctx)
	require.NoError(t, err)
	// The files of one partition, rewritten the naive way.
	var group []table.FileScanTask
	for _, task := range tasks {
		if len(group) == 0 || (task.File.SpecID() == group[0].File.SpecID() && fmt.Sprint(task.File.Partition()) == fmt.Sprint(group[0].File.Partition())) {
			group = append(group, task)
		}
	}
	require.NotEmpty(t, group)
	res, err := table.ExecuteCompactionGroup(ctx, tbl, table.CompactionTaskGroup{PartitionKey: "naive", Tasks: group})
	require.NoError(t, err)

	// The verifier refuses the naive result, naming the mismatch.
	_, verr := verifyRewrite(tbl.Metadata(), group, res.NewDataFiles)
	require.ErrorIs(t, verr, errVerify)
	t.Logf("verifier: %v", verr)

	// Committed anyway (as a tool without the verifier would), the
	// faithful checksum changes.
	txn := tbl.NewTransaction()
	rw := txn.NewRewrite(nil)
	rw.ApplyResult(res)
	require.NoError(t, rw.Commit(ctx))
	_, err = txn.Commit(ctx)
	require.NoError(t, err)
	naive, err := cat.LoadTable(ctx, f.Ident)
	require.NoError(t, err)
	after, err := checksum.Table(ctx, naive, 0)
	require.NoError(t, err)
	require.Equal(t, before.Rows, after.Rows)
	require.NotEqual(t, before.Checksum, after.Checksum, "a rewrite that turned partition values into NULL changes the checksum")
}

// A table TMS cannot read faithfully is refused per type: compaction
// fails naming the file and the column, nothing is written.
func TestCompactionRefusesUnfaithfulFile(t *testing.T) {
	t.Parallel()
	f := testdata.BuildForeignT(t, "foreign.name-mapped")
	ctx := t.Context()
	cat, tbl, err := f.LoadTable(ctx)
	require.NoError(t, err)
	// Without its name mapping, files without field ids cannot be matched.
	txn := tbl.NewTransaction()
	require.NoError(t, txn.RemoveProperties([]string{table.DefaultNameMappingKey}))
	tbl, err = txn.Commit(ctx)
	require.NoError(t, err)
	files := treeFiles(t, fileOSPath(tbl.Location()))
	rep, err := Run(ctx, cat, f.Ident, forcedChain[:1], Options{Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	require.Equal(t, Failed, rep.Types[0].Outcome)
	require.Contains(t, rep.Types[0].Reason, "has no field ids and the table has no name mapping")
	require.Contains(t, rep.Types[0].Reason, ".parquet")
	require.Equal(t, files, treeFiles(t, fileOSPath(tbl.Location())), "nothing written")
	require.True(t, rep.Failed())
}

// A writer that appends to the migrated layout while compaction works: the
// compaction commits on top of the append, nothing of the lost attempt is
// left behind, and the table holds exactly the builder's rows plus the
// writer's, by the faithful checksum.
func TestCompactionOfMigratedTableWithConcurrentWriter(t *testing.T) {
	t.Parallel()
	f := testdata.BuildForeignT(t, "foreign.migrated")
	ctx := t.Context()
	cat, tbl, err := f.LoadTable(ctx)
	require.NoError(t, err)
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	require.NoError(t, err)
	rows := `[{"id": 900001, "region": "eu", "kind": 1, "amount": 1.5, "note": "w"},
		{"id": 900002, "region": "us", "kind": 2, "amount": 2.5, "note": null},
		{"id": 900003, "region": "ap", "kind": 2, "amount": 3.5, "note": "w"}]`
	written, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{rows})
	require.NoError(t, err)
	defer written.Release()
	var once sync.Once
	var intended checksum.Result
	opts := Options{Log: zaptest.NewLogger(t), Hooks: Hooks{BeforeCommit: func(context.Context, Type) error {
		once.Do(func() {
			cur, err := cat.LoadTable(ctx, f.Ident)
			require.NoError(t, err)
			_, err = cur.AppendTable(ctx, written, written.NumRows(), nil)
			require.NoError(t, err)
			cur, err = cat.LoadTable(ctx, f.Ident)
			require.NoError(t, err)
			intended, err = checksum.Table(ctx, cur, 0)
			require.NoError(t, err)
		})
		return nil
	}}}
	files := treeFiles(t, fileOSPath(tbl.Location()))
	rep, err := Run(ctx, cat, f.Ident, forcedChain[:1], opts)
	require.NoError(t, err)
	require.Equal(t, Done, rep.Types[0].Outcome, rep.Types[0].Reason)
	require.Len(t, rep.Types[0].Detail.(*CompactionDetail).Rebases, 1)

	after, err := cat.LoadTable(ctx, f.Ident)
	require.NoError(t, err)
	got, err := checksum.Table(ctx, after, 0)
	require.NoError(t, err)
	require.Equal(t, intended, got)
	base, err := checksum.Batches(tbl.Schema(), f.Expected)
	require.NoError(t, err)
	require.Equal(t, base.Rows+3, got.Rows)
	// What is on disk now is what was there, plus the writer's commit only.
	var added []string
	for _, p := range treeFiles(t, fileOSPath(tbl.Location())) {
		if !slices.Contains(files, p) {
			added = append(added, p)
		}
	}
	refs, err := referencedFiles(t.Context(), after, mustFS(t, after), nil)
	require.NoError(t, err)
	for _, p := range added {
		require.True(t, refs["file://"+p], "file %s left behind", p)
	}
}

func mustFS(t *testing.T, tbl *table.Table) icebergio.IO {
	t.Helper()
	fs, err := tbl.FS(t.Context())
	require.NoError(t, err)
	return fs
}
