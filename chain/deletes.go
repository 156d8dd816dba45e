package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pqfile "github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
	"golang.org/x/sync/errgroup"

	"github.com/tms-dev/tms/internal/location"
	"github.com/tms-dev/tms/internal/partval"
)

// Delete files a rewrite removes.
//
// A delete file leaves the table only when it can no longer apply to any
// live data file after the commit. iceberg-go's per-group helper
// (table.CollectSafePositionDeletes) returns every position-delete file a
// group's tasks carry, whatever else it names; its caller contract says the
// check across the commit's whole set of rewritten files is the caller's.
// A merge-on-read DELETE writes one position-delete file for all the data
// files it touched, so taking that helper's answer per group removes the
// deletes of files the compaction keeps, and their rows come back. The
// chain decides instead, per commit, over the whole set of data files that
// commit removes (iceberg-go's CollectDeadPositionDeletes and
// CollectDeadEqualityDeletesWithSpecs, which work from manifests and
// sequence numbers), and then proves each removal on its own before every
// commit attempt (proveRemovals, checkRemovals): it reads what each
// position-delete file names (its referenced_data_file, equal file_path
// bounds, or the file_path column itself), and refuses the commit when a
// removed delete file still names, or for an equality delete still covers,
// a data file that stays. A delete file whose targets cannot be read is
// kept, never removed on faith, and the detail says so.

// posDeleteFilePathID is the field id of file_path in a position-delete
// file (the Iceberg spec's reserved id).
const posDeleteFilePathID = 2147483546

// deleteRemovals is what one rewrite commit removes besides its data files.
type deleteRemovals struct {
	// files are the delete files the commit removes (position deletes,
	// equality deletes and deletion vectors), each proved dead.
	files []iceberg.DataFile
	// named holds, per removed position delete or deletion vector (by
	// deleteKey), the data file paths it names.
	named map[string][]string
	// kept names the delete files that were decided dead but kept because
	// what they name could not be read, with the reason.
	kept []string
	// survivors indexes the data files that stay live after the commit.
	survivors *survivorIndex
	// dangling holds (by deleteKey) the removed delete files that applied
	// to no live data file before the commit either.
	dangling map[string]bool
	// canon maps a location to its canonical spelling.
	canon func(string) string
}

// deleteKey identifies a file entry: its path, and for a deletion vector
// (many of which may share one Puffin file) also the data file it
// references. It reads as a location in messages.
func deleteKey(df iceberg.DataFile) string {
	if table.IsDeletionVector(df) {
		if ref := df.ReferencedDataFile(); ref != nil {
			return df.FilePath() + " (deletion vector of " + *ref + ")"
		}
	}
	return df.FilePath()
}

// survivorIndex holds the live data files of a snapshot that a commit
// keeps, and the data sequence number of every live delete file.
type survivorIndex struct {
	// byPath maps a canonical data file path to the lowest data sequence
	// number it is live with.
	byPath map[string]int64
	// byPartition maps a (spec id, partition tuple) to the lowest data
	// sequence number of a surviving data file in it; all holds the lowest
	// over every survivor.
	byPartition map[string]int64
	all         int64
	anyLive     bool
	// deleteSeq maps a live delete file (deleteKey) to its data sequence
	// number; deletes holds them in manifest order.
	deleteSeq map[string]int64
	deletes   []iceberg.DataFile
}

// partitionKey spells a (spec id, partition tuple), typed (partval.Key),
// in field order.
func partitionKey(spec int32, part map[int]any) string {
	ids := make([]int, 0, len(part))
	for id := range part {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var b strings.Builder
	fmt.Fprintf(&b, "%d", spec)
	for _, id := range ids {
		fmt.Fprintf(&b, "\x00%d=%s", id, partval.Key(part[id]))
	}
	return b.String()
}

// indexSurvivors walks snap's manifests: every live data file not in
// removed (canonical paths) is a survivor.
func indexSurvivors(ctx context.Context, fs iceio.IO, snap *table.Snapshot, removed map[string]bool, canon func(string) string) (*survivorIndex, error) {
	x := &survivorIndex{byPath: map[string]int64{}, byPartition: map[string]int64{}, deleteSeq: map[string]int64{}}
	lowest := func(m map[string]int64, k string, seq int64) {
		if old, ok := m[k]; !ok || seq < old {
			m[k] = seq
		}
	}
	err := eachLiveEntry(ctx, fs, snap, func(e iceberg.ManifestEntry) error {
		df, seq := e.DataFile(), e.SequenceNum()
		if df.ContentType() != iceberg.EntryContentData {
			if _, dup := x.deleteSeq[deleteKey(df)]; !dup {
				x.deletes = append(x.deletes, df)
			}
			x.deleteSeq[deleteKey(df)] = seq
			return nil
		}
		p := canon(df.FilePath())
		if removed[p] {
			return nil
		}
		lowest(x.byPath, p, seq)
		lowest(x.byPartition, partitionKey(df.SpecID(), df.Partition()), seq)
		if !x.anyLive || seq < x.all {
			x.all, x.anyLive = seq, true
		}
		return nil
	})
	return x, err
}

// eachLiveEntry calls fn with every live entry (added or existing) of
// snap's manifests, data and delete manifests alike.
func eachLiveEntry(ctx context.Context, fs iceio.IO, snap *table.Snapshot, fn func(iceberg.ManifestEntry) error) error {
	mans, err := snap.Manifests(fs)
	if err != nil {
		return fmt.Errorf("read manifest list %s of snapshot %d: %w", snap.ManifestList, snap.SnapshotID, err)
	}
	for _, m := range mans {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			return fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
		}
		for _, e := range entries {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// planRemovals decides the delete files one commit removes: those of
// iceberg-go's dead-delete collectors over every data file the commit
// rewrites (all of its groups together), plus the groups' deletion vectors
// (one per rewritten data file), plus, with dangling, every live delete
// file that already applies to no live data file (survivorIndex.dangling),
// each then proved by proveRemovals.
func (s *stepState) planRemovals(ctx context.Context, results []table.CompactionGroupResult, dangling bool) (*deleteRemovals, error) {
	fs, err := s.tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	canon, err := defaultCanon()
	if err != nil {
		return nil, err
	}
	rewritten := map[string]struct{}{}
	removed := map[string]bool{}
	var dvs []iceberg.DataFile
	for _, r := range results {
		for _, df := range r.OldDataFiles {
			rewritten[df.FilePath()] = struct{}{}
			removed[canon(df.FilePath())] = true
		}
		dvs = append(dvs, r.SafeDeletionVectors...)
	}
	rm := &deleteRemovals{named: map[string][]string{}, canon: canon}
	snap := s.tbl.CurrentSnapshot()
	if snap == nil {
		return rm, nil
	}
	if !s.hasDeleteFiles() && len(dvs) == 0 {
		return rm, nil
	}
	// The two collectors and the survivor index each walk the snapshot's
	// manifests; they run at once.
	var eq, pos []iceberg.DataFile
	g, gctx := errgroup.WithContext(ctx)
	if s.hasDeleteFiles() {
		g.Go(func() (err error) {
			if eq, err = compaction.CollectDeadEqualityDeletesWithSpecs(gctx, fs, s.tbl.Metadata(), snap, rewritten); err != nil {
				return fmt.Errorf("collect dead equality deletes: %w", err)
			}
			return nil
		})
		g.Go(func() (err error) {
			if pos, err = compaction.CollectDeadPositionDeletes(gctx, fs, snap, rewritten); err != nil {
				return fmt.Errorf("collect dead position deletes: %w", err)
			}
			return nil
		})
	}
	g.Go(func() (err error) {
		rm.survivors, err = indexSurvivors(gctx, fs, snap, removed, canon)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	candidates := slices.Concat(eq, pos, dvs)
	seen := map[string]bool{}
	var unique []iceberg.DataFile
	for _, df := range candidates {
		if k := deleteKey(df); !seen[k] {
			seen[k] = true
			unique = append(unique, df)
		}
	}
	// Dangling candidates the collectors did not name: those whose targets
	// are known from metadata are decided (sure); the other position
	// deletes (maybe) are read like every removal and kept when what they
	// name is still live.
	maybe := map[string]bool{}
	if dangling {
		rm.dangling = map[string]bool{}
		sure, unsure := rm.survivors.dangling(s.tbl.Metadata(), removed, canon)
		for _, df := range slices.Concat(sure, unsure) {
			if k := deleteKey(df); !seen[k] {
				seen[k] = true
				unique = append(unique, df)
				rm.dangling[k] = true
			}
		}
		for _, df := range unsure {
			maybe[deleteKey(df)] = true
		}
	}
	if len(unique) == 0 {
		return rm, nil
	}
	// What the position deletes name is read concurrently: on object
	// storage each read is a few round trips.
	named := make([][]string, len(unique))
	errs := make([]error, len(unique))
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, df := range unique {
		if df.ContentType() == iceberg.EntryContentEqDeletes {
			continue
		}
		g.Go(func() error {
			named[i], errs[i] = namedPaths(gctx, fs, df)
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, df := range unique {
		k := deleteKey(df)
		if maybe[k] && (errs[i] != nil || rm.namesLive(named[i], k)) {
			// Not proved dangling: it stays, as it would without the option.
			delete(rm.dangling, k)
			continue
		}
		if errs[i] != nil {
			rm.kept = append(rm.kept, fmt.Sprintf("%s: %v", df.FilePath(), errs[i]))
			continue
		}
		if df.ContentType() != iceberg.EntryContentEqDeletes {
			rm.named[deleteKey(df)] = named[i]
		}
		rm.files = append(rm.files, df)
	}
	return rm, nil
}

// dangling returns the live delete files that may apply to no live data
// file, whatever the commit rewrites. sure are decided from metadata: a
// position delete or deletion vector whose one target (referenced_data_file,
// or equal file_path bounds) is not a live data file (removed earlier by a
// writer that left its deletes behind, or by this commit), and an equality
// delete with no live data file of a lower data sequence number in its
// partition (the table, for an unpartitioned spec). unsure are the other
// position delete files, which may name several data files: the caller
// reads what they name (namesLive). Every removal is proved again by
// checkRemovals.
func (x *survivorIndex) dangling(meta table.Metadata, removed map[string]bool, canon func(string) string) (sure, unsure []iceberg.DataFile) {
	for _, df := range x.deletes {
		seq := x.deleteSeq[deleteKey(df)]
		if df.ContentType() == iceberg.EntryContentEqDeletes {
			if lowest, any, _, ok := x.eqSurvivor(meta, df); ok && (!any || lowest >= seq) {
				sure = append(sure, df)
			}
			continue
		}
		target, ok := singleTarget(df)
		if !ok {
			unsure = append(unsure, df)
			continue
		}
		if p := canon(target); !removed[p] {
			if _, live := x.byPath[p]; !live {
				sure = append(sure, df)
			}
		}
	}
	return sure, unsure
}

// namesLive reports whether paths, what the delete file k names, hold a
// data file that stays and that it applies to.
func (rm *deleteRemovals) namesLive(paths []string, k string) bool {
	_, live := rm.survivors.namesLive(paths, rm.survivors.deleteSeq[k], rm.canon)
	return live
}

// eqSurvivor returns the lowest data sequence number of a surviving data
// file that equality delete df may apply to (any: there is one), and where
// those files are: its partition, or the table for an unpartitioned spec.
// ok is false when df's spec is not in meta.
func (x *survivorIndex) eqSurvivor(meta table.Metadata, df iceberg.DataFile) (lowest int64, any bool, where string, ok bool) {
	spec := meta.PartitionSpecByID(int(df.SpecID()))
	switch {
	case spec == nil:
		return 0, false, "", false
	case spec.NumFields() > 0:
		lowest, any = x.byPartition[partitionKey(df.SpecID(), df.Partition())]
		return lowest, any, "its partition", true
	}
	return x.all, x.anyLive, "the table", true
}

// namesLive returns the first of paths, what a position delete of data
// sequence number seq names, that is a data file that stays live and that
// it applies to (a data sequence number at or below its own), if any.
func (x *survivorIndex) namesLive(paths []string, seq int64, canon func(string) string) (string, bool) {
	for _, p := range paths {
		if live, ok := x.byPath[canon(p)]; ok && live <= seq {
			return p, true
		}
	}
	return "", false
}

// singleTarget returns the one data file a position delete or deletion
// vector names, from its metadata alone: its referenced_data_file, else
// equal file_path bounds.
func singleTarget(df iceberg.DataFile) (string, bool) {
	if ref := df.ReferencedDataFile(); ref != nil && *ref != "" {
		return *ref, true
	}
	lo, okL := df.LowerBoundValues()[posDeleteFilePathID]
	hi, okU := df.UpperBoundValues()[posDeleteFilePathID]
	if okL && okU && string(lo) == string(hi) {
		// A truncated string bound pair is never equal (the upper one
		// has its last character incremented), so equal bounds are the
		// one value the column holds.
		return string(lo), true
	}
	return "", false
}

// hasDeleteFiles reports whether S0 had a live delete file. Without one
// no delete file can be dead, and a writer that added one since conflicts
// with the rewrite anyway.
func (s *stepState) hasDeleteFiles() bool {
	return s.s0.Metrics.DeleteFileNumber > 0
}

// defaultCanon is the location normaliser with Spark's scheme
// equivalences (s3a, s3n = s3), as a function to the canonical spelling of
// one object.
func defaultCanon() (func(string) string, error) {
	n, err := location.New(location.Options{})
	if err != nil {
		return nil, fmt.Errorf("location normaliser: %w", err)
	}
	return func(p string) string { return n.Canon(p).Full }, nil
}

// namedPaths returns the data file paths a position-delete file or
// deletion vector names: its referenced_data_file, else the single value
// its file_path bounds allow, else the distinct values of its file_path
// column, read from the file.
func namedPaths(ctx context.Context, fs iceio.IO, df iceberg.DataFile) ([]string, error) {
	if table.IsDeletionVector(df) {
		if ref := df.ReferencedDataFile(); ref == nil || *ref == "" {
			return nil, errors.New("deletion vector without referenced_data_file")
		}
	}
	if target, ok := singleTarget(df); ok {
		return []string{target}, nil
	}
	if df.FileFormat() != iceberg.ParquetFile {
		return nil, fmt.Errorf("cannot read the file_path values of a %s position-delete file", df.FileFormat())
	}
	return readFilePaths(ctx, fs, df.FilePath())
}

// readFilePaths reads the distinct file_path values of a Parquet
// position-delete file with arrow-go's Parquet reader (not iceberg-go's
// delete-file reader, whose matching is what this check must not trust).
func readFilePaths(ctx context.Context, fs iceio.IO, path string) ([]string, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	pr, err := pqfile.NewParquetReader(f)
	if err != nil {
		return nil, fmt.Errorf("read parquet footer: %w", err)
	}
	defer pr.Close()
	col := -1
	sc := pr.MetaData().Schema
	for i := range sc.NumColumns() {
		c := sc.Column(i)
		if c.SchemaNode().FieldID() == posDeleteFilePathID || (col < 0 && c.Name() == "file_path") {
			col = i
		}
	}
	if col < 0 {
		return nil, errors.New("no file_path column")
	}
	ar, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	rr, err := ar.GetRecordReader(ctx, []int{col}, nil)
	if err != nil {
		return nil, fmt.Errorf("read file_path: %w", err)
	}
	defer rr.Release()
	set := map[string]bool{}
	for rr.Next() {
		rec := rr.RecordBatch()
		switch a := rec.Column(0).(type) {
		case *array.String:
			for i := range a.Len() {
				if a.IsValid(i) {
					set[a.Value(i)] = true
				}
			}
		case *array.LargeString:
			for i := range a.Len() {
				if a.IsValid(i) {
					set[a.Value(i)] = true
				}
			}
		case *array.Binary:
			for i := range a.Len() {
				if a.IsValid(i) {
					set[string(a.Value(i))] = true
				}
			}
		default:
			return nil, fmt.Errorf("file_path column is %s, not a string", rec.Column(0).DataType())
		}
	}
	if err := rr.Err(); err != nil {
		return nil, fmt.Errorf("read file_path: %w", err)
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// DeleteRemovalCheck is what the verifier checked of the delete files a
// commit removes.
type DeleteRemovalCheck struct {
	// Removed counts the delete files the commit removes; NamedPaths the
	// data file paths the removed position deletes and deletion vectors
	// name, all checked to leave the table with the commit.
	Removed    int `json:"removed"`
	NamedPaths int `json:"named_paths"`
}

// checkRemovals is the verifier's check of rm: no removed position delete
// or deletion vector names a data file that stays live with a data
// sequence number it applies to (at or below its own), and no removed
// equality delete shares a partition (or, unpartitioned, the table) with a
// surviving data file of a lower sequence number.
func checkRemovals(meta table.Metadata, rm *deleteRemovals) (DeleteRemovalCheck, error) {
	var c DeleteRemovalCheck
	if rm == nil || len(rm.files) == 0 {
		return c, nil
	}
	x := rm.survivors
	for _, df := range rm.files {
		k := deleteKey(df)
		seq, ok := x.deleteSeq[k]
		if !ok {
			return c, fmt.Errorf("%w: the commit removes delete file %s, which is not live in the snapshot it replaces", errVerify, df.FilePath())
		}
		c.Removed++
		if df.ContentType() == iceberg.EntryContentEqDeletes {
			lowest, any, where, ok := x.eqSurvivor(meta, df)
			if !ok {
				return c, fmt.Errorf("%w: equality delete file %s has partition spec %d, not in the table metadata", errVerify, df.FilePath(), df.SpecID())
			}
			if any && lowest < seq {
				return c, fmt.Errorf("%w: the commit removes equality delete file %s (sequence number %d), which still applies to a data file of %s that stays (sequence number %d)",
					errVerify, df.FilePath(), seq, where, lowest)
			}
			continue
		}
		paths, ok := rm.named[k]
		if !ok {
			return c, fmt.Errorf("%w: the commit removes delete file %s, whose data files were not read", errVerify, df.FilePath())
		}
		c.NamedPaths += len(paths)
		if p, ok := x.namesLive(paths, seq, rm.canon); ok {
			return c, fmt.Errorf("%w: the commit removes delete file %s, which still names data file %s that stays", errVerify, df.FilePath(), p)
		}
	}
	return c, nil
}
