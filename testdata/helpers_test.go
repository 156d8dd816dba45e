package testdata

import (
	"cmp"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
)

// loaded is a recipe table read back through a fresh catalog handle.
type loaded struct {
	tbl *table.Table
	fs  iceio.IO
}

// load opens dir's catalog without creating anything and loads name.
func load(t *testing.T, dir, name string) loaded {
	t.Helper()
	cat, err := catalogs.OpenLocal(t.Context(), dir, false)
	require.NoError(t, err)
	if c, ok := cat.(io.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	ident, err := catalogs.ParseIdent(name)
	require.NoError(t, err)
	tbl, err := catalogs.LoadTable(t.Context(), cat, ident)
	require.NoError(t, err)
	fs, err := tbl.FS(t.Context())
	require.NoError(t, err)
	return loaded{tbl: tbl, fs: fs}
}

// contents counts what the manifests of one snapshot hold.
type contents struct {
	manifests     []iceberg.ManifestFile
	data          []iceberg.DataFile
	posDeletes    []iceberg.DataFile
	eqDeletes     []iceberg.DataFile
	partitionRows map[string]int // partition key → live data files
}

// read walks every live entry of snap's manifests.
func (l loaded) read(t *testing.T, snap *table.Snapshot) contents {
	t.Helper()
	require.NotNil(t, snap)
	ms, err := snap.Manifests(l.fs)
	require.NoError(t, err)
	c := contents{manifests: ms, partitionRows: map[string]int{}}
	for _, m := range ms {
		for e, err := range m.Entries(l.fs, true) {
			require.NoError(t, err)
			df := e.DataFile()
			switch df.ContentType() {
			case iceberg.EntryContentData:
				require.Equal(t, iceberg.ManifestContentData, m.ManifestContent(), "data file in a delete manifest")
				c.data = append(c.data, df)
				c.partitionRows[partitionKey(df.Partition())]++
			case iceberg.EntryContentPosDeletes:
				require.Equal(t, iceberg.ManifestContentDeletes, m.ManifestContent())
				c.posDeletes = append(c.posDeletes, df)
			case iceberg.EntryContentEqDeletes:
				require.Equal(t, iceberg.ManifestContentDeletes, m.ManifestContent())
				c.eqDeletes = append(c.eqDeletes, df)
			}
		}
	}
	return c
}

// current reads the current snapshot.
func (l loaded) current(t *testing.T) contents {
	t.Helper()
	return l.read(t, l.tbl.CurrentSnapshot())
}

// scan returns every live row of the current snapshot, sorted by id.
func (l loaded) scan(t *testing.T) []Row {
	t.Helper()
	at, err := l.tbl.Scan().ToArrowTable(t.Context())
	require.NoError(t, err)
	defer at.Release()
	rdr := array.NewTableReader(at, 1<<14)
	defer rdr.Release()
	sc := rdr.Schema()
	col := func(name string) int {
		idx := sc.FieldIndices(name)
		require.Len(t, idx, 1, "column %s", name)
		return idx[0]
	}
	cID, cCat, cAmt, cTS, cNote := col("id"), col("category"), col("amount"), col("ts"), col("note")
	var rows []Row
	for rdr.Next() {
		rec := rdr.RecordBatch()
		ids := rec.Column(cID).(*array.Int64)
		cats := rec.Column(cCat).(array.StringLike)
		amts := rec.Column(cAmt).(*array.Float64)
		tss := rec.Column(cTS).(*array.Timestamp)
		require.Equal(t, arrow.Microsecond, tss.DataType().(*arrow.TimestampType).Unit)
		notes := rec.Column(cNote).(array.StringLike)
		for i := range int(rec.NumRows()) {
			r := Row{
				ID:       ids.Value(i),
				Category: cats.Value(i),
				Amount:   amts.Value(i),
				TS:       time.UnixMicro(int64(tss.Value(i))).UTC(),
			}
			if !notes.IsNull(i) {
				n := notes.Value(i)
				r.Note = &n
			}
			rows = append(rows, r)
		}
	}
	require.NoError(t, rdr.Err())
	slices.SortFunc(rows, func(a, b Row) int { return cmp.Compare(a.ID, b.ID) })
	return rows
}

// requireRows compares rows by their string form, so a failure shows which
// rows differ instead of two opaque pointers.
func requireRows(t *testing.T, want, got []Row) {
	t.Helper()
	str := func(rs []Row) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.String()
		}
		return out
	}
	require.Equal(t, len(want), len(got), "row count")
	require.Equal(t, str(want), str(got))
}

// ids returns the ids of rows.
func ids(rows []Row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}
