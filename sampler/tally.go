package sampler

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/tms-dev/tms/internal/partval"
	"golang.org/x/sync/errgroup"
)

// tally accumulates the file-level metrics of one or more manifests. Sums of
// squares are kept exactly in 128 bits, so the MSE does not depend on the
// order in which manifests finish.
type tally struct {
	dataFiles, posDeletes, eqDeletes  int64
	smallFiles                        int64
	totalSize, records                int64
	posDeleteRecords, eqDeleteRecords int64
	deletionVectors                   int64
	sqHi, sqLo                        uint64
	// partitions maps each (spec id, partition tuple) key of a live data
	// file to the number of small data files in it (a pointer, so that
	// counting a file in a known partition allocates no key).
	partitions map[string]*int64
	// deletePartitions maps each (spec id, partition tuple) key of a live
	// delete file to the number of delete files in it.
	deletePartitions map[string]*int64
	tasks            []table.FileScanTask // live data files, when collect
	collect          bool
	// folders maps the folder of each referenced file not under the
	// table location's spelling to whether it lies outside the location
	// (outsideFilter.note).
	folders map[string]bool
	out     *outsideFilter
}

// addSquare adds d² to the 128-bit sum of squares.
func (t *tally) addSquare(d uint64) {
	hi, lo := bits.Mul64(d, d)
	var carry uint64
	t.sqLo, carry = bits.Add64(t.sqLo, lo, 0)
	t.sqHi, _ = bits.Add64(t.sqHi, hi, carry)
}

// merge adds o into t.
func (t *tally) merge(o *tally) {
	t.dataFiles += o.dataFiles
	t.posDeletes += o.posDeletes
	t.eqDeletes += o.eqDeletes
	t.smallFiles += o.smallFiles
	t.totalSize += o.totalSize
	t.records += o.records
	t.posDeleteRecords += o.posDeleteRecords
	t.eqDeleteRecords += o.eqDeleteRecords
	t.deletionVectors += o.deletionVectors
	var carry uint64
	t.sqLo, carry = bits.Add64(t.sqLo, o.sqLo, 0)
	t.sqHi, _ = bits.Add64(t.sqHi, o.sqHi, carry)
	if t.partitions == nil {
		t.partitions = make(map[string]*int64, len(o.partitions))
	}
	addCounts(&t.partitions, o.partitions)
	addCounts(&t.deletePartitions, o.deletePartitions)
	t.tasks = append(t.tasks, o.tasks...)
	for d, out := range o.folders {
		if t.folders == nil {
			t.folders = map[string]bool{}
		}
		t.folders[d] = out
	}
}

// addCounts adds the per-partition counts of from into *into.
func addCounts(into *map[string]*int64, from map[string]*int64) {
	if *into == nil {
		*into = make(map[string]*int64, len(from))
	}
	for k, n := range from {
		if p, ok := (*into)[k]; ok {
			*p += *n
		} else {
			v := *n
			(*into)[k] = &v
		}
	}
}

// fill writes the file-level metrics into m.
func (t *tally) fill(m *Metrics) {
	m.DataFileNumber = t.dataFiles
	m.PositionDeleteFileNumber = t.posDeletes
	m.EqualityDeleteFileNumber = t.eqDeletes
	m.DeleteFileNumber = t.posDeletes + t.eqDeletes
	m.FileNumber = t.dataFiles + m.DeleteFileNumber
	m.SmallFileNumber = t.smallFiles
	m.TotalFileSize = t.totalSize
	m.RecordCount = t.records
	m.PartitionNumber = int64(len(t.partitions))
	for _, n := range t.partitions {
		m.MaxPartitionSmallFileNumber = max(m.MaxPartitionSmallFileNumber, *n)
	}
	m.PositionDeleteRecordCount = t.posDeleteRecords
	m.EqualityDeleteRecordCount = t.eqDeleteRecords
	m.DeletionVectorNumber = t.deletionVectors
	for _, n := range t.deletePartitions {
		m.MaxPartitionDeleteFileNumber = max(m.MaxPartitionDeleteFileNumber, *n)
	}
	if t.records > 0 {
		m.DeleteRatio = min(1, float64(t.posDeleteRecords+t.eqDeleteRecords)/float64(t.records))
	}
	if t.dataFiles > 0 {
		n := float64(t.dataFiles)
		m.AvgFileSize = float64(t.totalSize) / n
		m.DataFileMSE = (float64(t.sqHi)*0x1p64 + float64(t.sqLo)) / n
	}
}

// smallThreshold returns the smallest size that is NOT small for target T:
// size < 0.75·T  ⇔  size < ⌈3T/4⌉, computed without overflowing int64.
func smallThreshold(target int64) int64 {
	return 3*(target/4) + (3*(target%4)+3)/4
}

// tallyManifests reads the live entries of every manifest, at most
// concurrency at a time, and returns their combined tally.
func tallyManifests(ctx context.Context, fs iceio.IO, meta table.Metadata, manifests []iceberg.ManifestFile, target int64, concurrency int, tasks bool, out *outsideFilter) (*tally, error) {
	results := make([]tally, len(manifests))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, min(concurrency, len(manifests))))
	small := smallThreshold(target)
	for i, mf := range manifests {
		// A manifest whose list entry says it has no added and no existing
		// files holds only DELETED entries: nothing live, so nothing to read.
		// Unknown counts (null in a v1 list) read as "has files", and the
		// manifest is read. This is the skip PlanFiles makes too: a delete or
		// a rewrite writes the DELETED entries of the files it removed into
		// manifests of their own, which its snapshot lists (S1 of every
		// compaction has one).
		if !mf.HasAddedFiles() && !mf.HasExistingFiles() {
			continue
		}
		g.Go(func() error {
			results[i].collect = tasks
			results[i].out = out
			if err := tallyManifest(gctx, fs, meta, mf, target, small, &results[i]); err != nil {
				return fmt.Errorf("read manifest %s: %w", mf.FilePath(), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	total := &tally{partitions: map[string]*int64{}}
	for i := range results {
		total.merge(&results[i])
	}
	return total, nil
}

// tallyManifest streams one manifest's live entries into t. The projected
// read skips the per-column statistics maps (bounds, value counts), which are
// most of a manifest entry's decoding cost and are not needed here.
func tallyManifest(ctx context.Context, fs iceio.IO, meta table.Metadata, mf iceberg.ManifestFile, target, small int64, t *tally) error {
	specID := int(mf.PartitionSpecID())
	spec := meta.PartitionSpecByID(specID)
	unpartitioned := spec != nil && spec.NumFields() == 0
	specKey := strconv.Itoa(specID)
	t.partitions = map[string]*int64{}
	t.deletePartitions = map[string]*int64{}
	var key []byte
	var unpartSmall *int64

	entries := iceberg.EntriesWithProjection(fs, mf, true, iceberg.ManifestEntryProjection{})
	for entry, err := range entries {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		df := entry.DataFile()
		t.out.note(&t.folders, df.FilePath())
		switch df.ContentType() {
		case iceberg.EntryContentPosDeletes:
			t.posDeletes++
			t.posDeleteRecords += df.Count()
			if table.IsDeletionVector(df) {
				t.deletionVectors++
			}
			key = t.countDelete(key, specKey, spec, df)
			continue
		case iceberg.EntryContentEqDeletes:
			t.eqDeletes++
			t.eqDeleteRecords += df.Count()
			key = t.countDelete(key, specKey, spec, df)
			continue
		case iceberg.EntryContentData:
		default:
			return fmt.Errorf("entry %s has unknown content type %d", df.FilePath(), df.ContentType())
		}
		size := df.FileSizeBytes()
		if t.collect {
			task := table.FileScanTask{File: df, Start: 0, Length: size, FirstRowID: df.FirstRowID()}
			if seq := entry.SequenceNum(); seq >= 0 {
				task.DataSequenceNumber = &seq
			}
			t.tasks = append(t.tasks, task)
		}
		t.dataFiles++
		t.totalSize += size
		t.records += df.Count()
		var isSmall int64
		if size < small {
			t.smallFiles++
			isSmall = 1
		}
		if size < target {
			t.addSquare(uint64(target - max(size, 0)))
		}
		if unpartitioned {
			// One partition for the whole manifest: its counter is kept.
			if unpartSmall == nil {
				unpartSmall = new(int64)
				t.partitions[specKey] = unpartSmall
			}
			*unpartSmall += isSmall
			continue
		}
		key = partitionKey(key[:0], specKey, spec, df.Partition())
		if p, ok := t.partitions[string(key)]; ok {
			*p += isSmall
		} else {
			n := isSmall
			t.partitions[string(key)] = &n
		}
	}
	return nil
}

// countDelete counts delete file df in its (spec id, partition tuple),
// reusing key's buffer, which it returns.
func (t *tally) countDelete(key []byte, specKey string, spec *iceberg.PartitionSpec, df iceberg.DataFile) []byte {
	key = partitionKey(key[:0], specKey, spec, df.Partition())
	if p, ok := t.deletePartitions[string(key)]; ok {
		*p++
	} else {
		n := int64(1)
		t.deletePartitions[string(key)] = &n
	}
	return key
}

// partitionKey appends a canonical encoding of (spec id, partition tuple) to
// buf: the values in spec field order, each with its Go type so that, say,
// the int 1 and the string "1" stay distinct, and null distinct from both
// (partval.Key).
func partitionKey(buf []byte, specKey string, spec *iceberg.PartitionSpec, part map[int]any) []byte {
	buf = append(buf, specKey...)
	appendValue := func(id int, v any) {
		buf = fmt.Appendf(buf, "|%d=%s", id, partval.Key(v))
	}
	if spec != nil {
		for i := range spec.NumFields() {
			id := spec.Field(i).FieldID
			appendValue(id, part[id])
		}
		return buf
	}
	// A spec missing from the metadata would be invalid metadata; still
	// produce a stable key from the field ids in the entry.
	ids := make([]int, 0, len(part))
	for id := range part {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		appendValue(id, part[id])
	}
	return buf
}
