package chain

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	pqfile "github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/tms-dev/tms/policy"
)

// delete-rewrite merges the position-delete files of a partition into one,
// the cheap half of keeping a merge-on-read table readable: every DELETE,
// UPDATE or MERGE adds small delete files that each scan of the partition
// must open. It reads what each file deletes with arrow-go's Parquet reader
// (never iceberg-go's delete matching, which the result is checked
// against), keeps the entries that still apply (their data file is live
// with a data sequence number at or below the delete file's), and writes
// them sorted into one file that takes the highest data sequence number of
// the files it replaces, so it applies to exactly the positions they did.
// Deletion vectors, one per data file already, are left alone.

// posDeletePosID is the field id of pos in a position-delete file.
const posDeletePosID = 2147483545

// DeleteRewriteDetail is what a delete-rewrite did.
type DeleteRewriteDetail struct {
	Partitions []DeletePartitionReport `json:"partitions"`
	// InputFiles counts the position-delete files replaced; OutputFiles
	// the files written (none for a partition whose entries all dangle).
	InputFiles  int `json:"input_files"`
	OutputFiles int `json:"output_files"`
	// InputEntries counts the (file_path, pos) rows read, OutputEntries
	// those written; DroppedEntries those that applied to no live data
	// file, and DuplicateEntries those deleted twice.
	InputEntries     int64 `json:"input_entries"`
	OutputEntries    int64 `json:"output_entries"`
	DroppedEntries   int64 `json:"dropped_entries"`
	DuplicateEntries int64 `json:"duplicate_entries"`
	// Verified is the pre-commit check of each written file.
	Verified []DeleteFileVerification `json:"verified,omitempty"`
	Rebases  []Rebase                 `json:"rebases,omitempty"`
}

// DeletePartitionReport is one partition's merge.
type DeletePartitionReport struct {
	Partition     string `json:"partition"`
	InputFiles    int    `json:"input_files"`
	InputEntries  int64  `json:"input_entries"`
	OutputEntries int64  `json:"output_entries"`
	OutputFile    string `json:"output_file,omitempty"`
	// DataSequenceNumber is the new file's: the highest of the files it
	// replaces.
	DataSequenceNumber int64 `json:"data_sequence_number"`
}

// DeleteFileVerification is the pre-commit check of one written delete
// file: read back, it holds exactly the entries that still applied, every
// one naming a live data file it applies to.
type DeleteFileVerification struct {
	File      string `json:"file"`
	Entries   int64  `json:"entries"`
	DataFiles int    `json:"data_files"`
}

// posEntry is one deleted position: an index into the group's paths and
// the row position.
type posEntry struct {
	path uint32
	pos  int64
}

// deleteGroup is the position-delete files of one (spec id, partition).
type deleteGroup struct {
	key, shown string
	spec       int32
	partition  map[int]any
	files      []iceberg.DataFile
	seqs       []int64
}

// rewriteDeletes decides from S0 whether the table has enough
// position-delete files, plans the partitions that do, merges each into
// one file and commits them in one RewriteFiles snapshot.
func (s *stepState) rewriteDeletes(ctx context.Context, p policy.DeleteRewriteOptions, log *zap.Logger) (string, error) {
	if s.s0.SnapshotID == 0 {
		return "", skip{"table has no snapshot"}
	}
	v := p.Decide(s.s0.Metrics)
	if !v.Work {
		return "", skip{v.Reason}
	}
	trigger := v.Reason
	if s.tbl.Metadata().Version() >= 3 {
		// A v3 writer must not add position-delete files: the merge of a v3
		// table's leftover v2 files would have to write deletion vectors.
		return "", skip{fmt.Sprintf("%s, but the table is format v%d, where deletes are merged into deletion vectors, which delete-rewrite does not write yet", trigger, s.tbl.Metadata().Version())}
	}
	fs, err := s.tbl.FS(ctx)
	if err != nil {
		return "", err
	}
	canon, err := defaultCanon()
	if err != nil {
		return "", err
	}
	groups, live, err := planDeleteGroups(ctx, fs, s.tbl, canon, int(p.MinPositionDeleteFileNumber))
	if err != nil {
		return "", err
	}
	if len(groups) == 0 {
		return "", skip{fmt.Sprintf("%s, but no partition holds %d of them", trigger, p.MinPositionDeleteFileNumber)}
	}
	detail := &DeleteRewriteDetail{}
	for _, g := range groups {
		detail.Partitions = append(detail.Partitions, DeletePartitionReport{Partition: g.shown, InputFiles: len(g.files)})
		detail.InputFiles += len(g.files)
	}
	s.rep.Detail = detail
	if s.r.opts.DryRun {
		return "", skip{fmt.Sprintf("dry run: would merge %d position-delete files in %d partitions; %s", detail.InputFiles, len(groups), trigger)}
	}
	if err := s.startGate(ctx); err != nil {
		return "", err
	}

	var removed, added []iceberg.DataFile
	var addedSeqs []int64
	for i, g := range groups {
		rep := &detail.Partitions[i]
		df, seq, err := s.mergeDeleteGroup(ctx, fs, g, live, canon, rep, detail)
		if err != nil {
			return "", fmt.Errorf("partition %s: %w", g.shown, err)
		}
		removed = append(removed, g.files...)
		if df != nil {
			added = append(added, df)
			addedSeqs = append(addedSeqs, seq)
		}
	}
	in, err := newInputs(removed)
	if err != nil {
		return "", err
	}
	check := func() error { return nil } // each file was verified as it was written
	build := func(txn *table.Transaction) error {
		rw := txn.NewRewrite(iceberg.Properties{"tms.maintenance": string(DeleteRewrite)})
		for _, df := range removed {
			rw.DeleteFile(df)
		}
		for i, df := range added {
			rw.AddDeleteFileWithDataSequenceNumber(df, addedSeqs[i])
		}
		if err := rw.Commit(ctx); err != nil {
			return fmt.Errorf("stage delete rewrite: %w", err)
		}
		return nil
	}
	tbl, rebases, err := s.commitRewrite(ctx, in, check, build)
	detail.Rebases = rebases
	if err != nil {
		return "", err
	}
	s.committed(tbl)
	log.Info("merged position-delete files", zap.Int("input_files", detail.InputFiles), zap.Int("output_files", detail.OutputFiles),
		zap.Int64("dropped_entries", detail.DroppedEntries))
	return fmt.Sprintf("%s: merged %d position-delete files into %d in %d partitions (%d entries kept, %d no longer applied)%s",
		trigger, detail.InputFiles, detail.OutputFiles, len(groups), detail.OutputEntries, detail.DroppedEntries, rebasedText(rebases)), nil
}

// planDeleteGroups walks the current snapshot's live entries: the
// position-delete files that are not deletion vectors, grouped by (spec id,
// partition), the groups of at least min files in key order; and the live
// data files by canonical path with their lowest data sequence number.
func planDeleteGroups(ctx context.Context, fs iceio.IO, tbl *table.Table, canon func(string) string, min int) ([]*deleteGroup, map[string]int64, error) {
	byKey := map[string]*deleteGroup{}
	live := map[string]int64{}
	spec := func(id int32) *iceberg.PartitionSpec { return tbl.Metadata().PartitionSpecByID(int(id)) }
	err := eachLiveEntry(ctx, fs, tbl.CurrentSnapshot(), func(e iceberg.ManifestEntry) error {
		df, seq := e.DataFile(), e.SequenceNum()
		switch {
		case df.ContentType() == iceberg.EntryContentData:
			p := canon(df.FilePath())
			if old, ok := live[p]; !ok || seq < old {
				live[p] = seq
			}
		case df.ContentType() == iceberg.EntryContentPosDeletes && !table.IsDeletionVector(df):
			k := partitionKey(df.SpecID(), df.Partition())
			g := byKey[k]
			if g == nil {
				g = &deleteGroup{key: k, spec: df.SpecID(), partition: df.Partition(), shown: partitionText(spec(df.SpecID()), df.Partition())}
				byKey[k] = g
			}
			g.files = append(g.files, df)
			g.seqs = append(g.seqs, seq)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var out []*deleteGroup
	for _, g := range byKey {
		if len(g.files) >= min {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b *deleteGroup) int { return strings.Compare(a.key, b.key) })
	return out, live, nil
}

// partitionText spells a partition for people: name=value/…, or
// (unpartitioned).
func partitionText(spec *iceberg.PartitionSpec, part map[int]any) string {
	if spec == nil || spec.NumFields() == 0 {
		return "(unpartitioned)"
	}
	var parts []string
	for _, f := range spec.Fields() {
		v := "null"
		if x := part[f.FieldID]; x != nil {
			v = fmt.Sprint(x)
		}
		parts = append(parts, f.Name+"="+v)
	}
	return strings.Join(parts, "/")
}

// mergeDeleteGroup reads g's files, keeps the entries that still apply,
// writes them as one file and verifies it. It returns the new file (nil
// when nothing applies any more) and its data sequence number.
func (s *stepState) mergeDeleteGroup(ctx context.Context, fs iceio.IO, g *deleteGroup, live map[string]int64, canon func(string) string,
	rep *DeletePartitionReport, detail *DeleteRewriteDetail,
) (iceberg.DataFile, int64, error) {
	read := make([]posRows, len(g.files))
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(8)
	for i, df := range g.files {
		eg.Go(func() (err error) {
			if df.FileFormat() != iceberg.ParquetFile {
				return fmt.Errorf("position-delete file %s is %s: only Parquet delete files are read", df.FilePath(), df.FileFormat())
			}
			if read[i], err = readPositions(ectx, fs, df.FilePath()); err != nil {
				return fmt.Errorf("position-delete file %s: %w", df.FilePath(), err)
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, 0, err
	}
	// Paths are interned across the group; entries that name a data file
	// that is gone, or one written after the delete file (a position
	// delete applies to data files of a data sequence number at or below
	// its own), are dropped.
	index := map[string]uint32{}
	var paths []string
	var entries []posEntry
	var newSeq int64
	for i, r := range read {
		seq := g.seqs[i]
		newSeq = max(newSeq, seq)
		rep.InputEntries += int64(len(r.pos))
		for j, p := range r.paths {
			dataSeq, ok := live[canon(p)]
			if !ok || dataSeq > seq {
				detail.DroppedEntries += int64(len(r.pos[j]))
				continue
			}
			id, ok := index[p]
			if !ok {
				id = uint32(len(paths))
				index[p] = id
				paths = append(paths, p)
			}
			for _, pos := range r.pos[j] {
				entries = append(entries, posEntry{id, pos})
			}
		}
	}
	rep.DataSequenceNumber = newSeq
	detail.InputEntries += rep.InputEntries
	// Sorted by path, then position, as the spec asks of a position-delete
	// file; the same position deleted twice is written once.
	rank := make([]uint32, len(paths))
	order := make([]uint32, len(paths))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(paths[a], paths[b]) })
	for r, id := range order {
		rank[id] = uint32(r)
	}
	slices.SortFunc(entries, func(a, b posEntry) int {
		return cmp.Or(cmp.Compare(rank[a.path], rank[b.path]), cmp.Compare(a.pos, b.pos))
	})
	n := len(entries)
	entries = slices.CompactFunc(entries, func(a, b posEntry) bool { return a == b })
	detail.DuplicateEntries += int64(n - len(entries))
	rep.OutputEntries = int64(len(entries))
	detail.OutputEntries += rep.OutputEntries
	if len(entries) == 0 {
		return nil, newSeq, nil
	}
	df, err := s.writePositions(ctx, g, paths, entries)
	if err != nil {
		return nil, 0, err
	}
	rep.OutputFile = df.FilePath()
	detail.OutputFiles++
	ver, err := verifyMergedDeletes(ctx, fs, df, paths, entries, live, canon, newSeq)
	if err != nil {
		return nil, 0, err
	}
	detail.Verified = append(detail.Verified, ver)
	return df, newSeq, nil
}

// posRows is what one position-delete file deletes: per distinct path, in
// the order first seen, its positions.
type posRows struct {
	paths []string
	pos   [][]int64
}

// readPositions reads the file_path and pos columns of a Parquet
// position-delete file with arrow-go (by the spec's field ids, else by
// name).
func readPositions(ctx context.Context, fs iceio.IO, path string) (posRows, error) {
	f, err := fs.Open(path)
	if err != nil {
		return posRows{}, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	pr, err := pqfile.NewParquetReader(f)
	if err != nil {
		return posRows{}, fmt.Errorf("read parquet footer: %w", err)
	}
	defer pr.Close()
	pathCol, posCol := -1, -1
	sc := pr.MetaData().Schema
	for i := range sc.NumColumns() {
		c := sc.Column(i)
		switch id := c.SchemaNode().FieldID(); {
		case id == posDeleteFilePathID || (id < 0 && pathCol < 0 && c.Name() == "file_path"):
			pathCol = i
		case id == posDeletePosID || (id < 0 && posCol < 0 && c.Name() == "pos"):
			posCol = i
		}
	}
	if pathCol < 0 || posCol < 0 {
		return posRows{}, fmt.Errorf("no file_path and pos columns (field ids %d, %d)", posDeleteFilePathID, posDeletePosID)
	}
	ar, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return posRows{}, fmt.Errorf("open parquet: %w", err)
	}
	rr, err := ar.GetRecordReader(ctx, []int{pathCol, posCol}, nil)
	if err != nil {
		return posRows{}, fmt.Errorf("read file_path and pos: %w", err)
	}
	defer rr.Release()
	var out posRows
	at := map[string]int{}
	for rr.Next() {
		rec := rr.RecordBatch()
		pathAt, err := stringColumn(rec.Column(0))
		if err != nil {
			return posRows{}, err
		}
		pos, ok := rec.Column(1).(*array.Int64)
		if !ok {
			return posRows{}, fmt.Errorf("pos column is %s, not a long", rec.Column(1).DataType())
		}
		for i := range int(rec.NumRows()) {
			if !pos.IsValid(i) {
				return posRows{}, fmt.Errorf("row %d: pos is null", i)
			}
			p, ok := pathAt(i)
			if !ok {
				return posRows{}, fmt.Errorf("row %d: file_path is null", i)
			}
			j, seen := at[p]
			if !seen {
				j = len(out.paths)
				at[p] = j
				out.paths = append(out.paths, p)
				out.pos = append(out.pos, nil)
			}
			out.pos[j] = append(out.pos[j], pos.Value(i))
		}
	}
	if err := rr.Err(); err != nil {
		return posRows{}, fmt.Errorf("read file_path and pos: %w", err)
	}
	return out, nil
}

// stringColumn returns the values of a string-like column by row.
func stringColumn(a arrow.Array) (func(int) (string, bool), error) {
	switch a := a.(type) {
	case *array.String:
		return func(i int) (string, bool) { return a.Value(i), a.IsValid(i) }, nil
	case *array.LargeString:
		return func(i int) (string, bool) { return a.Value(i), a.IsValid(i) }, nil
	case *array.Binary:
		return func(i int) (string, bool) { return string(a.Value(i)), a.IsValid(i) }, nil
	}
	return nil, fmt.Errorf("file_path column is %s, not a string", a.DataType())
}

// writePositions writes entries (sorted) as one Parquet position-delete
// file under the table's data location and returns its DataFile in g's
// partition, with full (untruncated) file_path and pos bounds so that a
// file naming one data file is file-scoped by its bounds.
func (s *stepState) writePositions(ctx context.Context, g *deleteGroup, paths []string, entries []posEntry) (iceberg.DataFile, error) {
	const batchRows = 64 << 10
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(true))
	w, err := pqarrow.NewFileWriter(table.PositionalDeleteArrowSchema, &buf, props, pqarrow.NewArrowWriterProperties())
	if err != nil {
		return nil, err
	}
	for lo := 0; lo < len(entries); lo += batchRows {
		b := array.NewRecordBuilder(memory.DefaultAllocator, table.PositionalDeleteArrowSchema)
		pb, ob := b.Field(0).(*array.StringBuilder), b.Field(1).(*array.Int64Builder)
		for _, e := range entries[lo:min(lo+batchRows, len(entries))] {
			pb.Append(paths[e.path])
			ob.Append(e.pos)
		}
		rec := b.NewRecordBatch()
		b.Release()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("write position deletes: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("write position deletes: %w", err)
	}
	fsys, err := s.tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	wf, ok := fsys.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("file IO %T cannot write files", fsys)
	}
	lp, err := s.tbl.LocationProvider()
	if err != nil {
		return nil, fmt.Errorf("data location: %w", err)
	}
	loc := lp.NewDataLocation(fmt.Sprintf("%s-deletes.parquet", uuid.New()))
	if err := wf.WriteFile(loc, buf.Bytes()); err != nil {
		return nil, fmt.Errorf("write %s: %w", loc, err)
	}
	spec := s.tbl.Metadata().PartitionSpecByID(int(g.spec))
	if spec == nil {
		return nil, fmt.Errorf("partition spec %d is not in the table metadata", g.spec)
	}
	first, last := entries[0], entries[len(entries)-1]
	lowPos, highPos := first.pos, first.pos
	for _, e := range entries {
		lowPos, highPos = min(lowPos, e.pos), max(highPos, e.pos)
	}
	long := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	n := int64(len(entries))
	b, err := iceberg.NewDataFileBuilder(*spec, iceberg.EntryContentPosDeletes, loc, iceberg.ParquetFile, g.partition, nil, nil, n, int64(buf.Len()))
	if err != nil {
		return nil, err
	}
	b.ValueCounts(map[int]int64{posDeleteFilePathID: n, posDeletePosID: n}).
		NullValueCounts(map[int]int64{posDeleteFilePathID: 0, posDeletePosID: 0}).
		LowerBoundValues(map[int][]byte{posDeleteFilePathID: []byte(paths[first.path]), posDeletePosID: long(lowPos)}).
		UpperBoundValues(map[int][]byte{posDeleteFilePathID: []byte(paths[last.path]), posDeletePosID: long(highPos)})
	if first.path == last.path && s.tbl.Metadata().Version() >= 3 {
		b.ReferencedDataFile(paths[first.path])
	}
	return b.Build(), nil
}

// verifyMergedDeletes reads df back and checks it against want: the same
// entries in the same order, as many as its record count, each naming a
// live data file of a data sequence number at or below seq.
func verifyMergedDeletes(ctx context.Context, fs iceio.IO, df iceberg.DataFile, paths []string, want []posEntry, live map[string]int64, canon func(string) string, seq int64) (DeleteFileVerification, error) {
	v := DeleteFileVerification{File: df.FilePath()}
	got, err := readPositions(ctx, fs, df.FilePath())
	if err != nil {
		return v, fmt.Errorf("%w: read back %s: %w", errVerify, df.FilePath(), err)
	}
	i := 0
	for j, p := range got.paths {
		if dataSeq, ok := live[canon(p)]; !ok || dataSeq > seq {
			return v, fmt.Errorf("%w: %s names data file %s, which is not a live data file it applies to", errVerify, df.FilePath(), p)
		}
		for _, pos := range got.pos[j] {
			if i >= len(want) || paths[want[i].path] != p || want[i].pos != pos {
				return v, fmt.Errorf("%w: %s: entry %d is (%s, %d), not the entry merged", errVerify, df.FilePath(), i, p, pos)
			}
			i++
		}
	}
	if i != len(want) || int64(i) != df.Count() {
		return v, fmt.Errorf("%w: %s holds %d entries, want %d (record count %d)", errVerify, df.FilePath(), i, len(want), df.Count())
	}
	v.Entries, v.DataFiles = int64(i), len(got.paths)
	return v, nil
}
