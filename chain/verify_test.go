package chain

import (
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
)

// verifyFixture is a table partitioned by identity(region) in spec 0 and
// identity(region), identity(kind) in spec 1 (the current one), with data
// file entries built by hand: the verifier reads nothing but metadata.
type verifyFixture struct {
	meta         table.Metadata
	spec0, spec1 iceberg.PartitionSpec
}

func newVerifyFixture(t *testing.T) verifyFixture {
	t.Helper()
	ctx := t.Context()
	cat, err := catalogs.OpenLocal(ctx, t.TempDir(), true)
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"v"}, nil))
	sc := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "region", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "kind", Type: iceberg.PrimitiveTypes.Int32},
	)
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "region", Transform: iceberg.IdentityTransform{}})
	tbl, err := cat.CreateTable(ctx, table.Identifier{"v", "t"}, sc, catalog.WithPartitionSpec(&spec))
	require.NoError(t, err)
	spec0 := tbl.Spec()
	txn := tbl.NewTransaction()
	require.NoError(t, txn.UpdateSpec(true).AddIdentity("kind").Commit())
	tbl, err = txn.Commit(ctx)
	require.NoError(t, err)
	return verifyFixture{meta: tbl.Metadata(), spec0: spec0, spec1: tbl.Spec()}
}

// file is a data or delete file entry: spec 1 when part has a kind.
type file struct {
	content iceberg.ManifestEntryContent
	path    string
	region  any
	kind    any // nil: a spec-0 file
	count   int64
	// stats of the new files' identity columns (field id → value); nil
	// leaves them out.
	nulls        map[int]int64
	lower, upper map[int][]byte
}

func (f verifyFixture) build(t *testing.T, fl file) iceberg.DataFile {
	t.Helper()
	spec, part := f.spec0, map[int]any{1000: fl.region}
	if fl.kind != nil {
		spec, part = f.spec1, map[int]any{1000: fl.region, 1001: fl.kind}
	}
	content := fl.content
	b, err := iceberg.NewDataFileBuilder(spec, content, fl.path, iceberg.ParquetFile, part, nil, nil, fl.count, 1000)
	require.NoError(t, err)
	if content == iceberg.EntryContentEqDeletes {
		b.EqualityFieldIDs([]int{1})
	}
	if fl.nulls != nil {
		b.NullValueCounts(fl.nulls)
	}
	if fl.lower != nil {
		b.LowerBoundValues(fl.lower).UpperBoundValues(fl.upper)
	}
	return b.Build()
}

func enc(t *testing.T, l iceberg.Literal) []byte {
	t.Helper()
	b, err := l.MarshalBinary()
	require.NoError(t, err)
	return b
}

// newFile is a correct rewrite output in spec 1 for region/kind.
func (f verifyFixture) newFile(t *testing.T, path, region string, kind int32, count int64) iceberg.DataFile {
	t.Helper()
	r, k := enc(t, iceberg.NewLiteral(region)), enc(t, iceberg.NewLiteral(kind))
	return f.build(t, file{path: path, region: region, kind: kind, count: count,
		nulls: map[int]int64{2: 0, 3: 0}, lower: map[int][]byte{2: r, 3: k}, upper: map[int][]byte{2: r, 3: k}})
}

func TestVerifyRewrite(t *testing.T) {
	t.Parallel()
	f := newVerifyFixture(t)
	old := func(path, region string, kind any, count int64) table.FileScanTask {
		return table.FileScanTask{File: f.build(t, file{path: path, region: region, kind: kind, count: count})}
	}
	eu7a, eu7b := old("eu7a", "eu", int32(7), 100), old("eu7b", "eu", int32(7), 50)

	t.Run("same tuple, same count", func(t *testing.T) {
		v, err := verifyRewrite(f.meta, []table.FileScanTask{eu7a, eu7b}, []iceberg.DataFile{f.newFile(t, "n1", "eu", 7, 150)})
		require.NoError(t, err)
		require.Equal(t, Verification{ReplacedFiles: 2, NewFiles: 1, ReplacedRecords: 150, NewRecords: 150, IdentityBounds: 2, ElapsedUs: v.ElapsedUs,
			Partitions: []PartitionCheck{{Partition: "region=eu/kind=7", ReplacedRecords: 150, NewRecords: 150, Count: "exact"}}}, v)
	})
	t.Run("a row lost", func(t *testing.T) {
		_, err := verifyRewrite(f.meta, []table.FileScanTask{eu7a, eu7b}, []iceberg.DataFile{f.newFile(t, "n1", "eu", 7, 149)})
		require.ErrorIs(t, err, errVerify)
		require.ErrorContains(t, err, "partition region=eu/kind=7: the new files hold 149 records, want 150")
	})
	t.Run("a tuple no replaced file has", func(t *testing.T) {
		_, err := verifyRewrite(f.meta, []table.FileScanTask{eu7a}, []iceberg.DataFile{f.newFile(t, "n1", "us", 7, 100)})
		require.ErrorContains(t, err, "new file n1 has partition region=us/kind=7, which none of the 1 replaced files has (replaced: region=eu/kind=7)")
	})
	t.Run("partition values turned into null", func(t *testing.T) {
		naive := f.build(t, file{path: "n1", region: nil, kind: nil, count: 100})
		_, err := verifyRewrite(f.meta, []table.FileScanTask{eu7a}, []iceberg.DataFile{naive})
		require.ErrorIs(t, err, errVerify)
	})
	t.Run("identity column with nulls", func(t *testing.T) {
		nf := f.newFile(t, "n1", "eu", 7, 100)
		bad := f.build(t, file{path: "n1", region: "eu", kind: int32(7), count: 100, nulls: map[int]int64{2: 3, 3: 0},
			lower: nf.LowerBoundValues(), upper: nf.UpperBoundValues()})
		_, err := verifyRewrite(f.meta, []table.FileScanTask{eu7a}, []iceberg.DataFile{bad})
		require.ErrorContains(t, err, "new file n1: column region (field id 2) has 3 nulls, but its partition value is eu")
	})
	t.Run("identity column bounds wider than the value", func(t *testing.T) {
		r := enc(t, iceberg.NewLiteral("eu"))
		bad := f.build(t, file{path: "n1", region: "eu", kind: int32(7), count: 100, nulls: map[int]int64{2: 0, 3: 0},
			lower: map[int][]byte{2: r, 3: enc(t, iceberg.NewLiteral(int32(1)))}, upper: map[int][]byte{2: r, 3: enc(t, iceberg.NewLiteral(int32(9)))}})
		_, err := verifyRewrite(f.meta, []table.FileScanTask{eu7a}, []iceberg.DataFile{bad})
		require.ErrorContains(t, err, "column kind (field id 3) has bounds [1, 9], but its partition value is 7")
	})
	t.Run("no statistics to check", func(t *testing.T) {
		bare := f.build(t, file{path: "n1", region: "eu", kind: int32(7), count: 100})
		_, err := verifyRewrite(f.meta, []table.FileScanTask{eu7a}, []iceberg.DataFile{bare})
		require.ErrorContains(t, err, "has no null count for identity column region (field id 2), so it cannot be checked")
	})
	t.Run("truncated string bounds", func(t *testing.T) {
		long := "a-region-name-longer-than-sixteen"
		src := old("long", long, int32(7), 10)
		k := enc(t, iceberg.NewLiteral(int32(7)))
		nf := f.build(t, file{path: "n1", region: long, kind: int32(7), count: 10, nulls: map[int]int64{2: 0, 3: 0},
			lower: map[int][]byte{2: []byte(long[:16]), 3: k}, upper: map[int][]byte{2: []byte("a-region-name-lp"), 3: k}})
		_, err := verifyRewrite(f.meta, []table.FileScanTask{src}, []iceberg.DataFile{nf})
		require.NoError(t, err)
	})
	t.Run("position deletes bound the count", func(t *testing.T) {
		task := eu7a
		task.DeleteFiles = []iceberg.DataFile{f.build(t, file{content: iceberg.EntryContentPosDeletes, path: "pos", region: "eu", kind: int32(7), count: 10})}
		v, err := verifyRewrite(f.meta, []table.FileScanTask{task}, []iceberg.DataFile{f.newFile(t, "n1", "eu", 7, 92)})
		require.NoError(t, err)
		require.Equal(t, PartitionCheck{Partition: "region=eu/kind=7", ReplacedRecords: 100, NewRecords: 92, Count: "bounded", DeletedAtMost: 10}, v.Partitions[0])
		_, err = verifyRewrite(f.meta, []table.FileScanTask{task}, []iceberg.DataFile{f.newFile(t, "n1", "eu", 7, 89)})
		require.ErrorContains(t, err, "want between 90 and 100")
	})
	t.Run("deletion vectors are exact", func(t *testing.T) {
		task := eu7a
		task.DeletionVectorFiles = []iceberg.DataFile{f.build(t, file{content: iceberg.EntryContentPosDeletes, path: "dv", region: "eu", kind: int32(7), count: 4})}
		_, err := verifyRewrite(f.meta, []table.FileScanTask{task}, []iceberg.DataFile{f.newFile(t, "n1", "eu", 7, 96)})
		require.NoError(t, err)
		_, err = verifyRewrite(f.meta, []table.FileScanTask{task}, []iceberg.DataFile{f.newFile(t, "n1", "eu", 7, 97)})
		require.ErrorContains(t, err, "want 96")
	})
	t.Run("equality deletes: never more rows", func(t *testing.T) {
		task := eu7a
		task.EqualityDeleteFiles = []iceberg.DataFile{f.build(t, file{content: iceberg.EntryContentEqDeletes, path: "eq", region: "eu", kind: int32(7), count: 1})}
		v, err := verifyRewrite(f.meta, []table.FileScanTask{task}, []iceberg.DataFile{f.newFile(t, "n1", "eu", 7, 3)})
		require.NoError(t, err)
		require.Equal(t, int64(-1), v.Partitions[0].DeletedAtMost)
		_, err = verifyRewrite(f.meta, []table.FileScanTask{task}, []iceberg.DataFile{f.newFile(t, "n1", "eu", 7, 101)})
		require.ErrorContains(t, err, "want between 0 and 100")
	})
	t.Run("spec-0 files rewritten into spec 1 compare on region", func(t *testing.T) {
		a, b := old("s0a", "eu", nil, 60), old("s0b", "eu", nil, 40)
		v, err := verifyRewrite(f.meta, []table.FileScanTask{a, b},
			[]iceberg.DataFile{f.newFile(t, "n1", "eu", 1, 70), f.newFile(t, "n2", "eu", 2, 30)})
		require.NoError(t, err)
		require.Equal(t, "region=eu", v.Partitions[0].Partition)
		_, err = verifyRewrite(f.meta, []table.FileScanTask{a, b}, []iceberg.DataFile{f.newFile(t, "n1", "us", 1, 100)})
		require.ErrorContains(t, err, "has partition region=us")
	})
}

// The manifest-rewrite verifier accepts the same live files and names a
// file that appeared or went missing.
func TestVerifyManifestRewrite(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.small_files")
	tbl := b.load(t)
	fs, err := tbl.FS(b.ctx)
	require.NoError(t, err)
	snaps := tbl.Metadata().Snapshots()
	first, cur := &snaps[0], tbl.CurrentSnapshot()
	v, err := verifyManifestRewrite(b.ctx, fs, cur, cur)
	require.NoError(t, err)
	require.Equal(t, smallFiles, v.LiveFiles)
	require.EqualValues(t, smallRows, v.Records)
	_, err = verifyManifestRewrite(b.ctx, fs, first, cur)
	require.ErrorIs(t, err, errVerify)
	require.ErrorContains(t, err, "manifest rewrite added live file")
	_, err = verifyManifestRewrite(b.ctx, fs, cur, first)
	require.ErrorContains(t, err, "manifest rewrite dropped live file")

	// A real rewrite passes and is recorded.
	rep := b.run(t, Step{Type: ManifestRewrite, Policy: policyJSON(`{"minManifestNumber": 2}`)})
	require.Equal(t, Done, rep.Types[0].Outcome, rep.Types[0].Reason)
	require.Equal(t, smallFiles, rep.Types[0].Detail.(*ManifestRewriteDetail).Verified.LiveFiles)
}
