package chain

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

// The operations a history draws (opKinds in history_gen_test.go), each done
// with iceberg-go's public API only, as a writer other than TMS would.

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
