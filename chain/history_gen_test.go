package chain

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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
