package chain

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
)

// This file generates the random table histories of TestRandomHistories
// (history_test.go): a table created with iceberg-go in its own local
// catalog, then a random sequence of operations, every one of them done
// with iceberg-go's public API only, as a writer other than TMS would.

// The field ids of the base schema. Columns added later get ids from 6 on.
const (
	hID     = 1
	hCat    = 2
	hAmount = 3
	hTS     = 4
	hNote   = 5
)

// hBaseTime is the first day of the ts values; rows spread over hDays days.
var hBaseTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// hDays is the number of days the ts values span.
const hDays = 3

// hCats are the cat values (a few rows hold NULL instead).
var hCats = []string{"a", "b", "c", "d"}

// historySchema is the schema every history's table starts with.
func historySchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: hID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: hCat, Name: "cat", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: hAmount, Name: "amount", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: hTS, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: hNote, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
}

// partitionLayouts are the partition specs a history's table starts with.
var partitionLayouts = []struct {
	name   string
	weight int
	fields []iceberg.PartitionField
}{
	{"unpartitioned", 35, nil},
	{"identity(cat)", 25, []iceberg.PartitionField{{SourceIDs: []int{hCat}, FieldID: 1000, Name: "cat", Transform: iceberg.IdentityTransform{}}}},
	{"bucket[4](id)", 15, []iceberg.PartitionField{{SourceIDs: []int{hID}, FieldID: 1000, Name: "id_bucket", Transform: iceberg.BucketTransform{NumBuckets: 4}}}},
	{"day(ts)", 15, []iceberg.PartitionField{{SourceIDs: []int{hTS}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{}}}},
	{"identity(cat), day(ts)", 10, []iceberg.PartitionField{
		{SourceIDs: []int{hCat}, FieldID: 1000, Name: "cat", Transform: iceberg.IdentityTransform{}},
		{SourceIDs: []int{hTS}, FieldID: 1001, Name: "ts_day", Transform: iceberg.DayTransform{}},
	}},
}

// The spellings of one local path: what iceberg-go writes (file:///abs),
// what Hadoop-based engines write (file:/abs), and a bare path.
const (
	spellTriple = "file:///"
	spellSingle = "file:/"
	spellBare   = "bare"
)

// spellings are the spellings a history draws from.
var spellings = []string{spellTriple, spellSingle, spellBare}

// spell writes the absolute OS path p in spelling s.
func spell(p, s string) string {
	switch s {
	case spellTriple:
		return "file://" + filepath.ToSlash(p)
	case spellSingle:
		return "file:" + filepath.ToSlash(p)
	}
	return p
}

// spellingOf returns the spelling of location loc.
func spellingOf(loc string) string {
	switch {
	case strings.HasPrefix(loc, "file:///"):
		return spellTriple
	case strings.HasPrefix(loc, "file:/"):
		return spellSingle
	}
	return spellBare
}

// osPathOf turns a local location in any spelling into an OS path. It is the
// oracle's own conversion, independent of TMS's path canonicalization.
func osPathOf(loc string) string {
	if strings.HasPrefix(loc, "file:") {
		u, err := url.Parse(loc)
		if err == nil {
			return filepath.FromSlash(u.Path)
		}
	}
	return loc
}

// opTally counts how often an operation kind was applied and how often
// iceberg-go refused it, with the first refusal's error.
type opTally struct {
	applied, refused int
	firstRefusal     string
	// took is the time spent in the operation, refusals included.
	took time.Duration
}

// history is one random table history and everything the oracle needs to
// explain a failure: the operations applied, the chain rounds and their
// outcomes.
type history struct {
	t       *testing.T
	ctx     context.Context
	seed    uint64
	rng     *rand.Rand
	dir     string
	cat     catalog.Catalog
	ident   table.Identifier
	version int
	// nextID is the id of the next generated row; ids are unique except for
	// rows of a file added again.
	nextID int64
	// story is the log printed with a failure: the table, every operation
	// and every chain step.
	story []string
	// removed are data files an operation or chain round removed from the
	// current snapshot, oldest first, as the table spelled them.
	removed []string
	// orphans and hidden are the files planted in the table location that no
	// metadata references: orphans may be deleted by orphan cleanup, hidden
	// ones (names starting with "." or "_") never.
	orphans, hidden []string
	// columns counts added columns, so each gets a new name.
	columns int
	ops     map[string]*opTally
	times   historyTimes
	// checked is what the oracle last found, at metadata file metadata: the
	// rows and live data files of the table after a chain round. The next
	// round starts from it when no operation ran in between.
	checked struct {
		metadata string
		rows     []string
		live     map[string]iceberg.DataFile
	}
}

// newHistory returns the empty history of seed, in a fresh temporary
// folder.
func newHistory(t *testing.T, seed uint64) *history {
	return &history{
		t: t, ctx: t.Context(), seed: seed,
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		dir:   t.TempDir(),
		ident: table.Identifier{"h", "t"},
		ops:   map[string]*opTally{},
	}
}

// logf adds a line to the story.
func (h *history) logf(format string, args ...any) {
	h.story = append(h.story, fmt.Sprintf(format, args...))
}

// pick returns an index into weights, drawn with those weights.
func (h *history) pick(weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := h.rng.IntN(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	return len(weights) - 1
}

// chance reports true with probability p.
func (h *history) chance(p float64) bool { return h.rng.Float64() < p }

// load loads the history's table from its catalog.
func (h *history) load() *table.Table {
	h.t.Helper()
	tbl, err := h.cat.LoadTable(h.ctx, h.ident)
	require.NoError(h.t, err, "seed %d: load table", h.seed)
	return tbl
}

// create opens a fresh local catalog and creates the history's table: format
// v2 or v3, one of partitionLayouts, a small write.target-file-size-bytes
// (4 to 16 KiB) so that a file of a thousand rows or more lands above
// compaction's size band, merge-on-read deletes, and a location in one of
// the three spellings.
func (h *history) create() {
	t := h.t
	cat, err := catalogs.OpenLocal(h.ctx, h.dir, true)
	require.NoError(t, err)
	h.cat = cat
	require.NoError(t, cat.CreateNamespace(h.ctx, table.Identifier{"h"}, nil))
	h.version = []int{2, 3}[h.pick(60, 40)]
	weights := make([]int, len(partitionLayouts))
	for i, l := range partitionLayouts {
		weights[i] = l.weight
	}
	layout := partitionLayouts[h.pick(weights...)]
	target := []int{4 << 10, 8 << 10, 16 << 10}[h.rng.IntN(3)]
	props := iceberg.Properties{
		"format-version":                  strconv.Itoa(h.version),
		table.WriteTargetFileSizeBytesKey: strconv.Itoa(target),
		table.WriteDeleteModeKey:          table.WriteModeMergeOnRead,
		// zstd, iceberg-go's default, costs much of a small file's write
		// under the race detector (its encoder is set up per file).
		"write.parquet.compression-codec": "snappy",
	}
	spec := iceberg.NewPartitionSpec(layout.fields...)
	opts := []catalog.CreateTableOpt{catalog.WithProperties(props), catalog.WithPartitionSpec(&spec)}
	locSpelling := spellings[h.pick(70, 15, 15)]
	if locSpelling != spellTriple {
		abs, err := filepath.Abs(filepath.Join(h.dir, "warehouse", "h.db", "t"))
		require.NoError(t, err)
		opts = append(opts, catalog.WithLocation(spell(abs, locSpelling)))
	}
	tbl, err := cat.CreateTable(h.ctx, h.ident, historySchema(), opts...)
	require.NoError(t, err)
	for _, f := range historySchema().Fields() {
		got, ok := tbl.Schema().FindColumnName(f.ID)
		require.True(t, ok && got == f.Name, "iceberg-go assigned field id %d to %q", f.ID, got)
	}
	h.logf("table: format v%d, %s, write.target-file-size-bytes %d, location %s", h.version, layout.name, target, tbl.Location())
}

// name is the current name of field id.
func (h *history) name(sc *iceberg.Schema, id int) string {
	n, ok := sc.FindColumnName(id)
	require.True(h.t, ok, "field %d is not in the schema", id)
	return n
}

// rowFix pins values so that generated rows fall into one partition.
type rowFix struct {
	cat *string
	day int // -1: any
}

// anyRow pins nothing.
var anyRow = rowFix{day: -1}

// record generates n rows in the Arrow form of schema sc (with field ids):
// unique ids, cat mostly one of hCats, amounts from 0 to 1000, ts over hDays
// days, notes half NULL, added columns 30% NULL.
func (h *history) record(sc *iceberg.Schema, n int, fix rowFix) (*arrow.Schema, arrow.RecordBatch) {
	asc, err := table.SchemaToArrowSchema(sc, nil, true, false)
	require.NoError(h.t, err)
	b := array.NewRecordBuilder(memory.DefaultAllocator, asc)
	defer b.Release()
	fields := sc.Fields()
	for range n {
		for i, f := range fields {
			fb := b.Field(i)
			switch f.ID {
			case hID:
				fb.(*array.Int64Builder).Append(h.nextID)
				h.nextID++
				continue
			case hCat:
				cb := fb.(*array.StringBuilder)
				switch {
				case fix.cat != nil:
					cb.Append(*fix.cat)
				case h.chance(0.05):
					cb.AppendNull()
				default:
					cb.Append(hCats[h.rng.IntN(len(hCats))])
				}
				continue
			case hAmount:
				if h.chance(0.05) {
					fb.AppendNull()
				} else {
					fb.(*array.Float64Builder).Append(float64(h.rng.IntN(100_000)) / 100)
				}
				continue
			case hTS:
				day := fix.day
				if day < 0 {
					if h.chance(0.03) {
						fb.AppendNull()
						continue
					}
					day = h.rng.IntN(hDays)
				}
				ts := hBaseTime.AddDate(0, 0, day).Add(time.Duration(h.rng.IntN(86_400)) * time.Second)
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
				continue
			}
			nullShare := 0.3
			if f.ID == hNote {
				nullShare = 0.5
			}
			if h.chance(nullShare) {
				fb.AppendNull()
				continue
			}
			switch vb := fb.(type) {
			case *array.Int32Builder:
				vb.Append(int32(h.rng.IntN(1000)))
			case *array.Int64Builder:
				vb.Append(int64(h.rng.IntN(1_000_000)))
			case *array.StringBuilder:
				vb.Append(fmt.Sprintf("n%d", h.rng.IntN(50)))
			default:
				require.Failf(h.t, "no generator", "column %s of type %s", f.Name, f.Type)
			}
		}
	}
	return asc, b.NewRecordBatch()
}

// rowCount draws the size of an append: mostly tiny (1 to 20 rows) or small
// (30 to 300), sometimes 500 to 1,500.
func (h *history) rowCount() int {
	switch h.pick(45, 35, 20) {
	case 0:
		return 1 + h.rng.IntN(20)
	case 1:
		return 30 + h.rng.IntN(270)
	}
	return 500 + h.rng.IntN(1000)
}

// errNotApplicable is returned by an operation that found nothing to work
// on (a schema without an int column to promote, say): another is drawn and
// nothing is counted.
var errNotApplicable = errors.New("not applicable to this table")

// opKind is one kind of operation a history draws.
type opKind struct {
	name   string
	weight int
	// ok reports whether the operation can be drawn on this history now.
	ok func(h *history, tbl *table.Table) bool
	// do applies it and describes it. An error is iceberg-go refusing the
	// operation (the history draws another and counts the refusal); any
	// other problem fails the test.
	do func(h *history, tbl *table.Table) (string, error)
}

// always lets an operation be drawn on any table.
func always(*history, *table.Table) bool { return true }

// hasRows lets an operation be drawn once the table has a snapshot.
func hasRows(_ *history, tbl *table.Table) bool { return tbl.CurrentSnapshot() != nil }

// opKinds are the operations a history draws from, with their weights.
var opKinds = []opKind{
	{"append", 30, always, (*history).opAppend},
	{"append-big", 6, always, (*history).opAppendBig},
	{"delete-merge-on-read", 14, hasRows, func(h *history, tbl *table.Table) (string, error) {
		return h.opDelete(tbl, table.WriteModeMergeOnRead)
	}},
	{"delete-copy-on-write", 6, hasRows, func(h *history, tbl *table.Table) (string, error) {
		return h.opDelete(tbl, table.WriteModeCopyOnWrite)
	}},
	{"overwrite", 5, hasRows, (*history).opOverwrite},
	{"equality-delete", 7, hasRows, (*history).opEqualityDelete},
	{"add-files", 6, always, (*history).opAddFiles},
	{"re-add-removed-file", 5, func(h *history, _ *table.Table) bool { return len(h.removed) > 0 }, (*history).opReAdd},
	{"schema-evolution", 5, always, (*history).opSchema},
	{"partition-evolution", 4, always, (*history).opSpec},
	{"upgrade-to-v3", 2, func(h *history, tbl *table.Table) bool { return tbl.Metadata().Version() == 2 }, (*history).opUpgrade},
	{"plant-orphans", 4, always, (*history).opPlantOrphans},
	{"tag", 3, hasRows, (*history).opTag},
	{"branch-append", 3, hasRows, (*history).opBranchAppend},
}

// operations applies n operations drawn from opKinds (the first of a fresh
// table an append). An operation iceberg-go refuses is counted and another
// is drawn; a history whose draws keep being refused fails.
func (h *history) operations(n int) {
	t := h.t
	weights := make([]int, len(opKinds))
	var tbl *table.Table
	for applied, attempts := 0, 0; applied < n; attempts++ {
		require.Less(t, attempts, 4*n+8, "seed %d: iceberg-go refused too many operations\n%s", h.seed, strings.Join(h.story, "\n"))
		if tbl == nil {
			tbl = h.load()
		}
		var k opKind
		if tbl.CurrentSnapshot() == nil && applied == 0 {
			k = opKinds[0]
		} else {
			for i, o := range opKinds {
				weights[i] = 0
				if o.ok(h, tbl) {
					weights[i] = o.weight
				}
			}
			k = opKinds[h.pick(weights...)]
		}
		tally := h.ops[k.name]
		if tally == nil {
			tally = &opTally{}
			h.ops[k.name] = tally
		}
		start := time.Now()
		desc, err := k.do(h, tbl)
		tally.took += time.Since(start)
		if errors.Is(err, errNotApplicable) {
			continue
		}
		if err != nil {
			tally.refused++
			if tally.firstRefusal == "" {
				tally.firstRefusal = strings.ReplaceAll(err.Error(), h.dir, "$DIR")
			}
			h.logf("  (iceberg-go refused %s %s: %v)", k.name, desc, err)
			tbl = nil // a refused operation may have committed part of its work
			continue
		}
		tally.applied++
		applied++
		after := h.load()
		h.logf("op %s %s → %s", k.name, desc, summary(after, tbl))
		h.trackRemovedBy(after, tbl)
		tbl = after
	}
}

// summary describes the snapshot an operation committed.
func summary(after, before *table.Table) string {
	snap := after.CurrentSnapshot()
	if snap == nil {
		return "no snapshot"
	}
	if b := before.CurrentSnapshot(); b != nil && b.SnapshotID == snap.SnapshotID {
		if after.MetadataLocation() == before.MetadataLocation() {
			return "no change"
		}
		return "metadata only"
	}
	var parts []string
	op := ""
	if snap.Summary != nil {
		op = string(snap.Summary.Operation)
		for _, k := range []string{"added-data-files", "deleted-data-files", "added-delete-files", "removed-delete-files",
			"added-position-deletes", "added-equality-deletes", "added-dvs", "total-records", "total-data-files", "total-delete-files"} {
			if v, ok := snap.Summary.Properties[k]; ok && v != "0" {
				parts = append(parts, k+"="+v)
			}
		}
	}
	return fmt.Sprintf("%s snapshot %d: %s", op, snap.SnapshotID, strings.Join(parts, " "))
}

// liveDataFiles returns the data files of tbl's current snapshot by path,
// read from its manifests with iceberg-go.
func (h *history) liveDataFiles(tbl *table.Table) map[string]iceberg.DataFile {
	out := map[string]iceberg.DataFile{}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return out
	}
	fsys, err := tbl.FS(h.ctx)
	require.NoError(h.t, err)
	mans, err := snap.Manifests(fsys)
	require.NoError(h.t, err)
	for _, m := range mans {
		if m.ManifestContent() != iceberg.ManifestContentData {
			continue
		}
		entries, err := m.FetchEntries(fsys, true)
		require.NoError(h.t, err)
		for _, e := range entries {
			out[e.DataFile().FilePath()] = e.DataFile()
		}
	}
	return out
}

// byContent orders data files by record count and lowest id, so that a
// replay, whose file names differ, orders them the same.
func byContent(files []iceberg.DataFile) {
	sort.SliceStable(files, func(i, j int) bool {
		a, b := files[i], files[j]
		if a.Count() != b.Count() {
			return a.Count() < b.Count()
		}
		return string(a.LowerBoundValues()[hID]) < string(b.LowerBoundValues()[hID])
	})
}

// trackRemovedBy records the data files the current snapshot of tbl
// removed, read from the DELETED entries of the manifests it wrote (cheaper
// than comparing every manifest before and after).
func (h *history) trackRemovedBy(tbl *table.Table, before *table.Table) {
	snap := tbl.CurrentSnapshot()
	if snap == nil || before.CurrentSnapshot() != nil && before.CurrentSnapshot().SnapshotID == snap.SnapshotID {
		return
	}
	fsys, err := tbl.FS(h.ctx)
	require.NoError(h.t, err)
	mans, err := snap.Manifests(fsys)
	require.NoError(h.t, err)
	var gone []iceberg.DataFile
	for _, m := range mans {
		if m.ManifestContent() != iceberg.ManifestContentData || m.SnapshotID() != snap.SnapshotID || m.DeletedDataFiles() == 0 {
			continue
		}
		entries, err := m.FetchEntries(fsys, false)
		require.NoError(h.t, err)
		for _, e := range entries {
			if e.Status() == iceberg.EntryStatusDELETED {
				gone = append(gone, e.DataFile())
			}
		}
	}
	byContent(gone)
	for _, df := range gone {
		h.removed = append(h.removed, df.FilePath())
	}
}

// trackRemovedSince records the data files that were live in before and
// are not in tbl's current snapshot (a chain round may commit several
// snapshots and expire some of them), and returns the live ones.
func (h *history) trackRemovedSince(tbl *table.Table, before map[string]iceberg.DataFile) map[string]iceberg.DataFile {
	live := h.liveDataFiles(tbl)
	var gone []iceberg.DataFile
	for p, df := range before {
		if _, ok := live[p]; !ok {
			gone = append(gone, df)
		}
	}
	byContent(gone)
	for _, df := range gone {
		h.removed = append(h.removed, df.FilePath())
	}
	return live
}

// removedOnDisk returns the removed data files still on disk and not live
// under any spelling in tbl.
func (h *history) removedOnDisk(tbl *table.Table) []string {
	liveOS := map[string]bool{}
	for p := range h.liveDataFiles(tbl) {
		liveOS[osPathOf(p)] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range h.removed {
		op := osPathOf(p)
		if seen[op] || liveOS[op] {
			continue
		}
		seen[op] = true
		if _, err := os.Stat(op); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// opAppend appends rowCount rows in one iceberg-go append: one data file
// per partition they touch, or more past the target file size.
func (h *history) opAppend(tbl *table.Table) (string, error) {
	n := h.rowCount()
	asc, rec := h.record(tbl.Schema(), n, anyRow)
	defer rec.Release()
	rdr, err := array.NewRecordReader(asc, []arrow.RecordBatch{rec})
	require.NoError(h.t, err)
	defer rdr.Release()
	_, err = tbl.Append(h.ctx, rdr, nil)
	return fmt.Sprintf("%d rows", n), err
}

// opAppendBig appends 800 to 2,000 rows in one transaction that raises
// write.target-file-size-bytes for the append and restores it, so the files
// (one per partition) land above compaction's size band.
func (h *history) opAppendBig(tbl *table.Table) (string, error) {
	n := 800 + h.rng.IntN(1200)
	desc := fmt.Sprintf("%d rows", n)
	asc, rec := h.record(tbl.Schema(), n, anyRow)
	defer rec.Release()
	rdr, err := array.NewRecordReader(asc, []arrow.RecordBatch{rec})
	require.NoError(h.t, err)
	defer rdr.Release()
	target := tbl.Properties()[table.WriteTargetFileSizeBytesKey]
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(iceberg.Properties{table.WriteTargetFileSizeBytesKey: strconv.Itoa(64 << 20)}); err != nil {
		return desc, err
	}
	if err := txn.Append(h.ctx, rdr, nil); err != nil {
		return desc, err
	}
	if err := txn.SetProperties(iceberg.Properties{table.WriteTargetFileSizeBytesKey: target}); err != nil {
		return desc, err
	}
	_, err = txn.Commit(h.ctx)
	return desc, err
}

// predicate draws a row filter over the current schema, most spanning
// several data files, big and small ones: id ranges and sets, amounts,
// categories, days and NULL notes.
func (h *history) predicate(sc *iceberg.Schema) (iceberg.BooleanExpression, string) {
	id, cat, amount, ts := iceberg.Reference(h.name(sc, hID)), iceberg.Reference(h.name(sc, hCat)),
		iceberg.Reference(h.name(sc, hAmount)), iceberg.Reference(h.name(sc, hTS))
	maxID := max(h.nextID, 1)
	for {
		switch h.rng.IntN(8) {
		case 0:
			lo := h.rng.Int64N(maxID)
			hi := lo + 1 + h.rng.Int64N(max(1, maxID/3))
			return iceberg.NewAnd(iceberg.GreaterThanEqual(id, lo), iceberg.LessThan(id, hi)), fmt.Sprintf("%s in [%d, %d)", id, lo, hi)
		case 1:
			k := 1 + h.rng.IntN(40)
			ids := make([]int64, k)
			for i := range ids {
				ids[i] = h.rng.Int64N(maxID)
			}
			return iceberg.IsIn(id, ids...), fmt.Sprintf("%s in %d random ids", id, k)
		case 2:
			v := float64(h.rng.IntN(400))
			return iceberg.LessThan(amount, v), fmt.Sprintf("%s < %g", amount, v)
		case 3:
			c := hCats[h.rng.IntN(len(hCats))]
			return iceberg.EqualTo(cat, c), fmt.Sprintf("%s = %q", cat, c)
		case 4:
			c := hCats[h.rng.IntN(len(hCats))]
			x := h.rng.Int64N(maxID)
			return iceberg.NewAnd(iceberg.EqualTo(cat, c), iceberg.GreaterThanEqual(id, x)), fmt.Sprintf("%s = %q and %s >= %d", cat, c, id, x)
		case 5:
			day := hBaseTime.AddDate(0, 0, 1+h.rng.IntN(hDays-1)).Format("2006-01-02T15:04:05-07:00")
			return iceberg.LessThan(ts, day), fmt.Sprintf("%s < %s", ts, day)
		case 6:
			lo := h.rng.Int64N(maxID)
			v := float64(200 + h.rng.IntN(600))
			return iceberg.NewAnd(iceberg.GreaterThanEqual(id, lo), iceberg.GreaterThan(amount, v)), fmt.Sprintf("%s >= %d and %s > %g", id, lo, amount, v)
		case 7:
			if name, ok := sc.FindColumnName(hNote); ok {
				return iceberg.IsNull(iceberg.Reference(name)), name + " is null"
			}
		}
	}
}

// opDelete deletes the rows of a random predicate in write mode mode: a
// merge-on-read delete writes position-delete files on v2 (one per
// partition, naming every data file it hits) and deletion vectors on v3; a
// copy-on-write delete rewrites the files it hits.
func (h *history) opDelete(tbl *table.Table, mode string) (string, error) {
	filter, desc := h.predicate(tbl.Schema())
	txn := tbl.NewTransaction()
	if tbl.Properties()[table.WriteDeleteModeKey] != mode {
		if err := txn.SetProperties(iceberg.Properties{table.WriteDeleteModeKey: mode}); err != nil {
			return desc, err
		}
	}
	if err := txn.Delete(h.ctx, filter, nil); err != nil {
		return desc, err
	}
	_, err := txn.Commit(h.ctx)
	return desc, err
}

// opOverwrite replaces the rows of a random predicate with new rows
// (copy-on-write).
func (h *history) opOverwrite(tbl *table.Table) (string, error) {
	filter, desc := h.predicate(tbl.Schema())
	n := h.rowCount()
	asc, rec := h.record(tbl.Schema(), n, anyRow)
	defer rec.Release()
	rdr, err := array.NewRecordReader(asc, []arrow.RecordBatch{rec})
	require.NoError(h.t, err)
	defer rdr.Release()
	desc = fmt.Sprintf("%s with %d new rows", desc, n)
	_, err = tbl.Overwrite(h.ctx, rdr, nil, table.WithOverwriteFilter(filter))
	return desc, err
}

// keyRow is the equality key of one existing row.
type keyRow struct {
	id  int64
	cat *string
	ts  *arrow.Timestamp
}

// keyRows scans the id, cat and ts of every current row, sorted by id.
func (h *history) keyRows(tbl *table.Table) []keyRow {
	sc := tbl.Schema()
	names := []string{h.name(sc, hID), h.name(sc, hCat), h.name(sc, hTS)}
	at, err := tbl.Scan(table.WithSelectedFields(names...)).ToArrowTable(h.ctx)
	require.NoError(h.t, err)
	defer at.Release()
	var out []keyRow
	tr := array.NewTableReader(at, 4096)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		ids := rec.Column(rec.Schema().FieldIndices(names[0])[0]).(*array.Int64)
		cats := rec.Column(rec.Schema().FieldIndices(names[1])[0]).(*array.String)
		tss := rec.Column(rec.Schema().FieldIndices(names[2])[0]).(*array.Timestamp)
		for i := range int(rec.NumRows()) {
			r := keyRow{id: ids.Value(i)}
			if cats.IsValid(i) {
				c := cats.Value(i)
				r.cat = &c
			}
			if tss.IsValid(i) {
				v := tss.Value(i)
				r.ts = &v
			}
			out = append(out, r)
		}
	}
	require.NoError(h.t, tr.Err())
	sort.SliceStable(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// opEqualityDelete deletes 1 to 25 existing rows (and sometimes an id that
// does not exist) with an equality-delete file keyed on id plus the source
// columns of the current partition spec, which iceberg-go needs to route
// the keys to partitions; on an unpartitioned table the key is sometimes
// cat alone, which deletes a whole category.
func (h *history) opEqualityDelete(tbl *table.Table) (string, error) {
	sc := tbl.Schema()
	keys := []int{hID}
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		if !slices.Contains(keys, f.SourceID()) {
			keys = append(keys, f.SourceID())
		}
	}
	if tbl.Spec().IsUnpartitioned() && h.chance(0.15) {
		keys = []int{hCat}
	}
	rows := h.keyRows(tbl)
	if len(rows) == 0 {
		return "on an empty table", errNotApplicable
	}
	k := 1 + h.rng.IntN(25)
	var picked []keyRow
	for range k {
		picked = append(picked, rows[h.rng.IntN(len(rows))])
	}
	if h.chance(0.2) {
		picked = append(picked, keyRow{id: h.nextID + 1_000_000})
	}
	fields := make([]iceberg.NestedField, len(keys))
	var names []string
	for i, id := range keys {
		f, ok := sc.FindFieldByID(id)
		require.True(h.t, ok)
		fields[i] = f
		names = append(names, f.Name)
	}
	ksc, err := table.SchemaToArrowSchema(iceberg.NewSchema(0, fields...), nil, true, false)
	require.NoError(h.t, err)
	b := array.NewRecordBuilder(memory.DefaultAllocator, ksc)
	defer b.Release()
	for _, r := range picked {
		for i, id := range keys {
			switch id {
			case hID:
				b.Field(i).(*array.Int64Builder).Append(r.id)
			case hCat:
				if r.cat == nil {
					b.Field(i).AppendNull()
				} else {
					b.Field(i).(*array.StringBuilder).Append(*r.cat)
				}
			case hTS:
				if r.ts == nil {
					b.Field(i).AppendNull()
				} else {
					b.Field(i).(*array.TimestampBuilder).Append(*r.ts)
				}
			}
		}
	}
	rec := b.NewRecordBatch()
	records := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	desc := fmt.Sprintf("of %d keys on (%s)", len(picked), strings.Join(names, ", "))
	txn := tbl.NewTransaction()
	files, err := txn.WriteEqualityDeletes(h.ctx, keys, records)
	if err != nil {
		return desc, err
	}
	if err := txn.NewRowDelta(nil).AddDeletes(files...).Commit(h.ctx); err != nil {
		return desc, err
	}
	_, err = txn.Commit(h.ctx)
	return desc, err
}

// writeParquet writes rec as one parquet file at the OS path p, the way a
// foreign engine leaves a file for add_files: field ids from the table
// schema, snappy.
func (h *history) writeParquet(p string, asc *arrow.Schema, rec arrow.RecordBatch) {
	require.NoError(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	f, err := os.Create(p)
	require.NoError(h.t, err)
	w, err := pqarrow.NewFileWriter(asc, f, parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy)), pqarrow.NewArrowWriterProperties())
	require.NoError(h.t, err)
	require.NoError(h.t, w.Write(rec))
	require.NoError(h.t, w.Close())
}

// opAddFiles writes one parquet file itself, inside the table location
// (mostly) or outside it, and adds it with Transaction.AddFiles under one
// of the three spellings. On a partitioned table the rows are pinned to one
// partition (iceberg-go infers the tuple from the column bounds and refuses
// non-linear transforms such as bucket).
func (h *history) opAddFiles(tbl *table.Table) (string, error) {
	n := h.rowCount()
	fix := anyRow
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		switch f.SourceID() {
		case hCat:
			c := hCats[h.rng.IntN(len(hCats))]
			fix.cat = &c
		case hTS:
			fix.day = h.rng.IntN(hDays)
		}
	}
	asc, rec := h.record(tbl.Schema(), n, fix)
	defer rec.Release()
	root := osPathOf(tbl.Location())
	where := "inside"
	name := fmt.Sprintf("added-%d-%d.parquet", h.seed, h.nextID)
	p := filepath.Join(root, "data", "added", name)
	if h.chance(0.2) {
		where = "outside"
		p = filepath.Join(h.dir, "external", name)
	}
	h.writeParquet(p, asc, rec)
	s := spellings[h.rng.IntN(len(spellings))]
	loc := spell(p, s)
	desc := fmt.Sprintf("%d rows %s the table location as %s", n, where, loc)
	txn := tbl.NewTransaction()
	if err := txn.AddFiles(h.ctx, []string{loc}, nil, false); err != nil {
		return desc, err
	}
	_, err := txn.Commit(h.ctx)
	return desc, err
}

// opReAdd adds a data file that an earlier operation removed from the
// current snapshot, and that older snapshots still reference, back with
// Transaction.AddFiles under another spelling of its path: the same file
// is then named two ways by the table's snapshots.
func (h *history) opReAdd(tbl *table.Table) (string, error) {
	cands := h.removedOnDisk(tbl)
	if len(cands) == 0 {
		return "", errNotApplicable
	}
	old := cands[h.rng.IntN(len(cands))]
	others := slices.DeleteFunc(slices.Clone(spellings), func(s string) bool { return s == spellingOf(old) })
	loc := spell(osPathOf(old), others[h.rng.IntN(len(others))])
	desc := fmt.Sprintf("%s as %s", old, loc)
	txn := tbl.NewTransaction()
	if err := txn.AddFiles(h.ctx, []string{loc}, nil, false); err != nil {
		return desc, err
	}
	_, err := txn.Commit(h.ctx)
	return desc, err
}

// opSchema evolves the schema: adds a column, renames one, drops note or an
// added column, or promotes an added int column to long.
func (h *history) opSchema(tbl *table.Table) (string, error) {
	sc := tbl.Schema()
	txn := tbl.NewTransaction()
	us := txn.UpdateSchema(true, false)
	var desc string
	inSpec := map[int]bool{}
	for _, spec := range tbl.Metadata().PartitionSpecs() {
		for _, f := range spec.Fields() {
			inSpec[f.SourceID()] = true
		}
	}
	var droppable, ints []iceberg.NestedField
	for _, f := range sc.Fields() {
		if f.ID >= hNote && !inSpec[f.ID] {
			droppable = append(droppable, f)
		}
		if f.Type.Equals(iceberg.PrimitiveTypes.Int32) {
			ints = append(ints, f)
		}
	}
	switch h.rng.IntN(4) {
	case 0:
		h.columns++
		name := fmt.Sprintf("extra%d", h.columns)
		typ := []iceberg.Type{iceberg.PrimitiveTypes.Int32, iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.String}[h.rng.IntN(3)]
		us.AddColumn([]string{name}, typ, "", false, nil)
		desc = fmt.Sprintf("add column %s %s", name, typ)
	case 1:
		fields := sc.Fields()
		f := fields[h.rng.IntN(len(fields))]
		us.RenameColumn([]string{f.Name}, f.Name+"_r")
		desc = fmt.Sprintf("rename column %s to %s_r", f.Name, f.Name)
	case 2:
		if len(droppable) == 0 {
			return "drop column (none droppable)", errNotApplicable
		}
		f := droppable[h.rng.IntN(len(droppable))]
		us.DeleteColumn([]string{f.Name})
		desc = "drop column " + f.Name
	default:
		if len(ints) == 0 {
			return "promote int column (none)", errNotApplicable
		}
		f := ints[h.rng.IntN(len(ints))]
		us.UpdateColumn([]string{f.Name}, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Val: iceberg.PrimitiveTypes.Int64, Valid: true}})
		desc = "promote column " + f.Name + " to long"
	}
	if err := us.Commit(); err != nil {
		return desc, err
	}
	_, err := txn.Commit(h.ctx)
	return desc, err
}

// opSpec evolves the partition spec: adds identity(cat), day(ts) or
// bucket[4](id) when the spec lacks it and has fewer than two fields, or
// removes a field.
func (h *history) opSpec(tbl *table.Table) (string, error) {
	sc := tbl.Schema()
	current := map[int]string{}
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		current[f.SourceID()] = f.Name
	}
	txn := tbl.NewTransaction()
	us := txn.UpdateSpec(true)
	var desc string
	// Two partition fields at most: a third multiplies the tiny files of
	// every append and the run time with them.
	if len(current) >= 2 || len(current) > 0 && h.chance(0.4) {
		var names []string
		for _, n := range current {
			names = append(names, n)
		}
		slices.Sort(names)
		n := names[h.rng.IntN(len(names))]
		us.RemoveField(n)
		desc = "remove partition field " + n
	} else {
		type cand struct {
			src  int
			tr   iceberg.Transform
			name string
		}
		var cands []cand
		for _, c := range []cand{
			{hCat, iceberg.IdentityTransform{}, "cat_p"},
			{hTS, iceberg.DayTransform{}, "ts_day_p"},
			{hID, iceberg.BucketTransform{NumBuckets: 4}, "id_bucket_p"},
		} {
			if _, ok := current[c.src]; !ok {
				cands = append(cands, c)
			}
		}
		if len(cands) == 0 {
			return "add partition field (all present)", errNotApplicable
		}
		c := cands[h.rng.IntN(len(cands))]
		us.AddField(h.name(sc, c.src), c.tr, c.name)
		desc = fmt.Sprintf("add partition field %s(%s)", c.tr, h.name(sc, c.src))
	}
	if err := us.Commit(); err != nil {
		return desc, err
	}
	_, err := txn.Commit(h.ctx)
	return desc, err
}

// opUpgrade upgrades a v2 table to format v3, keeping its v2 position
// deletes; later merge-on-read deletes write deletion vectors.
func (h *history) opUpgrade(tbl *table.Table) (string, error) {
	txn := tbl.NewTransaction()
	if err := txn.UpgradeFormatVersion(3); err != nil {
		return "v2 → v3", err
	}
	_, err := txn.Commit(h.ctx)
	if err == nil {
		h.version = 3
	}
	return "v2 → v3", err
}

// opPlantOrphans leaves files no metadata references in the table's data
// folder: garbage named like a data file, a parquet data file written by
// iceberg-go and never committed, and sometimes a hidden file (name
// starting with "." or "_") that orphan cleanup must keep.
func (h *history) opPlantOrphans(tbl *table.Table) (string, error) {
	root := osPathOf(tbl.Location())
	var planted []string
	junk := filepath.Join(root, "data", fmt.Sprintf("orphan-%d-%d.parquet", h.seed, len(h.orphans)))
	require.NoError(h.t, os.MkdirAll(filepath.Dir(junk), 0o755))
	require.NoError(h.t, os.WriteFile(junk, []byte("PAR1 not really PAR1"), 0o644))
	h.orphans = append(h.orphans, junk)
	planted = append(planted, filepath.Base(junk))
	if h.chance(0.5) {
		asc, rec := h.record(tbl.Schema(), 1+h.rng.IntN(50), anyRow)
		one := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
		for df, err := range table.WriteRecords(h.ctx, tbl, asc, one) {
			if err != nil {
				return strings.Join(planted, ", "), err
			}
			h.orphans = append(h.orphans, osPathOf(df.FilePath()))
			planted = append(planted, "uncommitted "+filepath.Base(df.FilePath()))
		}
	}
	if h.chance(0.3) {
		hidden := filepath.Join(root, "data", []string{".", "_"}[h.rng.IntN(2)]+fmt.Sprintf("hidden-%d", len(h.hidden)))
		require.NoError(h.t, os.WriteFile(hidden, []byte("hidden"), 0o644))
		h.hidden = append(h.hidden, hidden)
		planted = append(planted, "hidden "+filepath.Base(hidden))
	}
	return strings.Join(planted, ", "), nil
}

// snapshotsByAge returns tbl's snapshots oldest first (by sequence number,
// which a replay reproduces, unlike snapshot ids).
func snapshotsByAge(tbl *table.Table) []table.Snapshot {
	snaps := slices.Clone(tbl.Metadata().Snapshots())
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].SequenceNumber < snaps[j].SequenceNumber })
	return snaps
}

// opTag tags a random snapshot, which keeps it (and its files) from expiry.
func (h *history) opTag(tbl *table.Table) (string, error) {
	snaps := snapshotsByAge(tbl)
	snap := snaps[h.rng.IntN(len(snaps))]
	refs := 0
	for range tbl.Metadata().Refs() {
		refs++
	}
	name := fmt.Sprintf("tag%d", refs)
	desc := fmt.Sprintf("%s on snapshot %d", name, snap.SnapshotID)
	_, _, err := h.cat.CommitTable(h.ctx, h.ident, nil, []table.Update{table.NewSetSnapshotRefUpdate(name, snap.SnapshotID, table.TagRef, 0, 0, 0)})
	return desc, err
}

// opBranchAppend appends rows to the branch "side", creating it first at a
// random snapshot: the branch's snapshots reference files main does not.
func (h *history) opBranchAppend(tbl *table.Table) (string, error) {
	var desc string
	hasSide := false
	for name := range tbl.Metadata().Refs() {
		hasSide = hasSide || name == "side"
	}
	if !hasSide {
		snaps := snapshotsByAge(tbl)
		snap := snaps[h.rng.IntN(len(snaps))]
		desc = fmt.Sprintf("create branch side at snapshot %d, ", snap.SnapshotID)
		if _, _, err := h.cat.CommitTable(h.ctx, h.ident, nil, []table.Update{table.NewSetSnapshotRefUpdate("side", snap.SnapshotID, table.BranchRef, 0, 0, 0)}); err != nil {
			return desc, err
		}
		tbl = h.load()
	}
	n := h.rowCount()
	desc += fmt.Sprintf("%d rows to branch side", n)
	asc, rec := h.record(tbl.Schema(), n, anyRow)
	defer rec.Release()
	rdr, err := array.NewRecordReader(asc, []arrow.RecordBatch{rec})
	require.NoError(h.t, err)
	defer rdr.Release()
	txn := tbl.NewTransactionOnBranch("side")
	if err := txn.Append(h.ctx, rdr, nil); err != nil {
		return desc, err
	}
	_, err = txn.Commit(h.ctx)
	return desc, err
}
