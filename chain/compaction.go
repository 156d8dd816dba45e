package chain

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tms-dev/tms/policy"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/tms-dev/tms/catalogs"
)

// Memory of a compaction. Readers decode data files into Arrow record
// batches and a single encoder per file group writes them out; a buffer of
// batches between them lets the scan workers run ahead of the encoder (a
// buffer of a few batches starves it; BenchmarkCompaction200x10k shows the effect).
// The buffer is sized in bytes, not batches, so that wide rows or big files
// do not multiply it:
//
//   - a batch holds about compactionBatchBytes of decoded data: its row count
//     is compactionBatchBytes over the estimated decoded row width, between
//     minBatchRows and iceberg-go's default of 131,072 (which alone, for a
//     table of 128 MiB files, made 64 buffered batches take ~1 GB). Small
//     batches cost the encoder, which does per-batch work: a batch size
//     that splits a typical small file into two batches is measurably
//     slower than one that reads it as one, so the default holds a
//     10,000-row file of the benchmark tables in one batch;
//   - the running groups together buffer about compactionBufferBytes, each
//     at least minGroupBatchBuffer and at most maxGroupBatchBuffer batches.
//
// The decoded row width is estimated from the group's files as on-disk
// bytes per row times decodedPerEncodedByte, a deliberately rough factor
// (columnar compression makes decoded data several times its parquet size).
const (
	compactionBatchBytes  = 2 << 20
	compactionBufferBytes = 24 << 20
	minBatchRows          = 128
	maxBatchRows          = 1 << 17
	minGroupBatchBuffer   = 4
	maxGroupBatchBuffer   = 64
	decodedPerEncodedByte = 4
)

// groupBuffering returns the Arrow batch size in rows and the number of
// batches to buffer for one of conc concurrently running groups.
func groupBuffering(tasks []table.FileScanTask, conc int) (batchRows, buffered int) {
	var bytes, rows int64
	for _, t := range tasks {
		bytes += t.File.FileSizeBytes()
		rows += t.File.Count()
	}
	if rows <= 0 || bytes <= 0 {
		return maxBatchRows, minGroupBatchBuffer
	}
	rowBytes := max(1, bytes*decodedPerEncodedByte/rows)
	batchRows = int(min(maxBatchRows, max(minBatchRows, compactionBatchBytes/rowBytes)))
	// A batch never spans files: small files make small batches.
	perBatch := min(int64(batchRows), max(1, rows/int64(len(tasks)))) * rowBytes
	buffered = int(min(maxGroupBatchBuffer, max(minGroupBatchBuffer, compactionBufferBytes/int64(conc)/perBatch)))
	return batchRows, buffered
}

// CompactionDetail is the TypeReport.Detail of a compaction that planned
// work.
type CompactionDetail struct {
	Groups      []GroupReport `json:"groups"`
	Commits     int           `json:"commits"`
	InputFiles  int           `json:"input_files"`
	InputBytes  int64         `json:"input_bytes"`
	OutputFiles int           `json:"output_files"`
	OutputBytes int64         `json:"output_bytes"`
	// RemovedDeleteFiles counts the delete files the commits removed
	// (position and equality deletes and deletion vectors), each proved to
	// apply to no data file that stays. KeptDeleteFiles counts the delete
	// files the rewritten files carried that stay, because they may still
	// apply to a data file the compaction did not rewrite (a later run
	// that rewrites that file, or a delete-file rewrite, removes them).
	// UnreadDeleteFiles names the delete files found dead but kept because
	// what they name could not be read, with the reason.
	RemovedDeleteFiles int `json:"removed_delete_files"`
	// DanglingDeleteFiles counts those of RemovedDeleteFiles that applied
	// to no live data file before the commit either
	// (remove-dangling-deletes).
	DanglingDeleteFiles int      `json:"dangling_delete_files"`
	KeptDeleteFiles     int      `json:"kept_delete_files"`
	UnreadDeleteFiles   []string `json:"unread_delete_files,omitempty"`
	// DeleteCheckUs is how long deciding the delete files' removal and
	// reading what they name took, in microseconds (the verifier's
	// comparison itself is in Verified).
	DeleteCheckUs int64 `json:"delete_check_us"`
	// Verified holds the pre-commit verifier's checks, one per commit
	// attempt (see Verification).
	Verified []Verification `json:"verified,omitempty"`
	// Rebases lists the commit attempts rebuilt on a head that had moved:
	// the snapshots that landed while the compaction worked, all of them
	// found not to touch its input files (see Rebase).
	Rebases []Rebase `json:"rebases,omitempty"`
	// FilledFiles counts the input files read with identity-partition
	// columns filled from their partition tuple (see package faithful);
	// ReadCheckUs is how long reading every input file's footer to plan
	// the faithful read took, in microseconds.
	FilledFiles int   `json:"filled_files"`
	ReadCheckUs int64 `json:"read_check_us"`
}

// GroupReport is one compaction file group: its partition, what it read,
// what it wrote and how long that took (zero in a dry run).
type GroupReport struct {
	Partition   string `json:"partition"`
	InputFiles  int    `json:"input_files"`
	InputBytes  int64  `json:"input_bytes"`
	DeleteFiles int    `json:"delete_files"`
	OutputFiles int    `json:"output_files"`
	OutputBytes int64  `json:"output_bytes"`
	ElapsedMs   int64  `json:"elapsed_ms"`
	// FilledFiles counts the input files that lack an identity-partition
	// column, read with it filled from their partition tuple.
	FilledFiles int `json:"filled_files,omitempty"`
}

// compact decides from S0 whether the table needs compaction, plans file
// groups with iceberg-go's bin-pack planner, rewrites the groups
// concurrently and commits them with one RewriteFiles snapshot (or, with
// partial progress, up to max-commits snapshots).
func (s *stepState) compact(ctx context.Context, p policy.CompactionOptions, log *zap.Logger) (string, error) {
	if s.s0.SnapshotID == 0 {
		return "", skip{"table has no data files"}
	}
	v := p.Decide(s.s0.Metrics)
	if !v.Work {
		return "", skip{v.Reason}
	}
	trigger := v.Reason

	groups, cfg, err := s.planCompaction(ctx, p)
	if err != nil {
		return "", err
	}
	detail := &CompactionDetail{}
	for _, g := range groups {
		detail.Groups = append(detail.Groups, GroupReport{Partition: g.PartitionKey, InputFiles: len(g.Tasks),
			InputBytes: g.TotalSizeBytes, DeleteFiles: g.DeleteFileCount})
		detail.InputFiles += len(g.Tasks)
		detail.InputBytes += g.TotalSizeBytes
	}
	if len(groups) == 0 {
		return "", skip{fmt.Sprintf("%s, but no file group qualifies (min-input-files %d, target %d bytes)", trigger, cfg.MinInputFiles, cfg.TargetFileSizeBytes)}
	}
	s.rep.Detail = detail
	if s.r.opts.DryRun {
		return "", skip{fmt.Sprintf("dry run: would rewrite %d files (%d bytes) in %d groups; %s", detail.InputFiles, detail.InputBytes, len(groups), trigger)}
	}

	if err := s.startGate(ctx); err != nil {
		return "", err
	}
	results, err := s.executeGroups(ctx, groups, cfg.TargetFileSizeBytes, int(p.MaxConcurrent), detail, log)
	if err != nil {
		return "", err
	}
	if err := s.commitGroups(ctx, groups, results, p, detail); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: rewrote %d files (%d bytes) into %d (%d bytes) in %d groups, %d commits%s",
		trigger, detail.InputFiles, detail.InputBytes, detail.OutputFiles, detail.OutputBytes, len(groups), detail.Commits, rebasedText(detail.Rebases)), nil
}

// planCompaction plans file groups at S0, restricted to the `where`
// partitions and to the maxPartitionNum partitions with the most files.
func (s *stepState) planCompaction(ctx context.Context, p policy.CompactionOptions) ([]compaction.Group, compaction.Config, error) {
	target := p.TargetFileSize
	if target == 0 {
		v, err := strconv.ParseInt(cmp.Or(s.tbl.Metadata().Properties()[table.WriteTargetFileSizeBytesKey], "0"), 10, 64)
		if err != nil || v < 0 {
			return nil, compaction.Config{}, fmt.Errorf("table property %s: bad value", table.WriteTargetFileSizeBytesKey)
		}
		target = cmp.Or(v, int64(table.WriteTargetFileSizeBytesDefault))
	}
	cfg := compaction.DefaultConfig()
	cfg.TargetFileSizeBytes, cfg.MinFileSizeBytes, cfg.MaxFileSizeBytes = target, target*3/4, target*9/5
	if p.MinInputFiles > 0 {
		cfg.MinInputFiles = uint(p.MinInputFiles)
	}
	if p.DeleteFileThreshold > 0 {
		cfg.DeleteFileThreshold = int(p.DeleteFileThreshold)
	}
	cfg.DeleteRatioThreshold = p.DeleteRatioThreshold
	tasks, err := s.scanTasks(ctx, p)
	if err != nil {
		return nil, cfg, err
	}
	// A file is always rewritten whole: drop residual filters so that
	// reading a task returns every live row of its file, whatever `where`
	// said about the rows.
	for i := range tasks {
		tasks[i].Residual = nil
	}
	plan, err := cfg.PlanCompaction(tasks)
	if err != nil {
		return nil, cfg, fmt.Errorf("plan compaction: %w", err)
	}
	return limitPartitions(plan.Groups, int(p.MaxPartitionNum)), cfg, nil
}

// scanTasks returns the files to plan from. Without a `where` filter and
// without delete files the plan is every live data file, whole: S0's
// sample collected exactly those in its manifest read, so the manifests are
// not read a second time. Otherwise iceberg-go plans (it matches delete
// files to data files); a `where` filter then picks the data files.
func (s *stepState) scanTasks(ctx context.Context, p policy.CompactionOptions) ([]table.FileScanTask, error) {
	if p.Where == "" && s.s0.Metrics.DeleteFileNumber == 0 && s.s0.Tasks != nil {
		return slices.Clone(s.s0.Tasks), nil
	}
	tasks, err := s.tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan files: %w", err)
	}
	if p.Where == "" {
		return tasks, nil
	}
	// The filter only picks data files. A scan planned with it also drops
	// every equality-delete file whose column bounds cannot match the
	// filter, which is right for reading the filtered rows but not for
	// rewriting a picked file whole: its rows outside the filter would be
	// written without those deletes, and deleted rows would come back. So
	// the tasks, with all of their delete files, come from the unfiltered
	// plan.
	expr, err := policy.BindWhere(p.Where, s.tbl.Schema())
	if err != nil {
		return nil, fmt.Errorf("%w: rewriteOptions.where: %v", ErrInvalidPolicy, err)
	}
	picked, err := s.tbl.Scan(table.WithRowFilter(expr)).PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan files: %w", err)
	}
	want := make(map[string]bool, len(picked))
	for _, t := range picked {
		want[t.File.FilePath()] = true
	}
	return slices.DeleteFunc(tasks, func(t table.FileScanTask) bool { return !want[t.File.FilePath()] }), nil
}

// limitPartitions keeps the groups of the n partitions with the most input
// files, in plan order.
func limitPartitions(groups []compaction.Group, n int) []compaction.Group {
	files := map[string]int{}
	for _, g := range groups {
		files[g.PartitionKey] += len(g.Tasks)
	}
	if len(files) <= n {
		return groups
	}
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(files[b]-files[a], strings.Compare(a, b)) })
	keep := map[string]bool{}
	for _, k := range keys[:n] {
		keep[k] = true
	}
	return slices.DeleteFunc(slices.Clone(groups), func(g compaction.Group) bool { return !keep[g.PartitionKey] })
}

// groupConcurrency is how many of n file groups run at once, given the
// policy's limit and procs CPUs.
//
// A group is bound by its one parquet encoder: alone it keeps about 1.4 CPUs
// busy (encoder plus readers). So with more groups than CPUs, the groups left
// for the last round decide the tail: 5 equal groups, 2 at a time, end with
// one group running alone for a whole group's time while a CPU idles. Of
// procs to procs+2 running groups (within the limit) this takes the smallest
// whose last round still has at least procs groups, or none left over: 5
// groups on 2 CPUs run 3 then 2, 4 groups run 2 and 2, 7 run 4 then 3.
// More than procs+2 gains nothing (the CPUs are busy) and costs memory.
func groupConcurrency(n, limit, procs int) int {
	hi := max(1, min(limit, n))
	if hi <= procs {
		return hi
	}
	for c := procs; c <= min(hi, procs+2); c++ {
		if r := n % c; r == 0 || r >= procs {
			return c
		}
	}
	return min(hi, procs+1)
}

// Reading a group's files on object storage is bound by request latency,
// not CPU: a group reads up to maxObjectStoreReads files at once there, as
// many as fit objectStoreReadBytes of file data (so big files are still read
// a few at a time and memory stays bounded), and never fewer than its share
// of the CPUs.
const (
	maxObjectStoreReads  = 32
	objectStoreReadBytes = 64 << 20
)

// scanConcurrency is how many files of a group are read at once: the
// group's share of the CPUs on local storage, more on object storage.
func scanConcurrency(location string, tasks []table.FileScanTask, procs, conc int) int {
	cpu := max(1, procs/conc)
	if catalogs.IsLocal(location) || len(tasks) == 0 {
		return cpu
	}
	var bytes int64
	for _, t := range tasks {
		bytes += t.File.FileSizeBytes()
	}
	avg := max(1, bytes/int64(len(tasks)))
	return int(min(int64(maxObjectStoreReads), max(int64(cpu), objectStoreReadBytes/avg)))
}

// executeGroups rewrites groups with up to groupConcurrency running at once,
// largest first, so that a big group does not start last and run alone. The
// scan concurrency of each group is the CPU count shared among the running
// groups, so that concurrency does not multiply memory.
func (s *stepState) executeGroups(ctx context.Context, groups []compaction.Group, target int64, maxConcurrent int,
	detail *CompactionDetail, log *zap.Logger,
) ([]table.CompactionGroupResult, error) {
	rtbl, rfs, err := s.readTable(ctx, groups)
	if err != nil {
		return nil, err
	}
	plans, err := s.prepareGroups(ctx, rfs, groups, detail)
	if err != nil {
		return nil, err
	}
	procs := runtime.GOMAXPROCS(0)
	conc := groupConcurrency(len(groups), maxConcurrent, procs)
	results := make([]table.CompactionGroupResult, len(groups))
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(groups[b].TotalSizeBytes, groups[a].TotalSizeBytes) })
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(conc)
	for _, i := range order {
		g := groups[i]
		eg.Go(func() error {
			start := time.Now()
			batchRows, buffered := groupBuffering(g.Tasks, conc)
			res, err := s.rewriteGroup(gctx, rtbl, g, plans[i], groupOptions{
				target: target, scanConcurrency: scanConcurrency(s.tbl.Location(), g.Tasks, procs, conc), batchRows: batchRows, buffered: buffered,
			})
			if err != nil {
				return fmt.Errorf("rewrite group %q: %w", g.PartitionKey, err)
			}
			results[i] = res
			gr := &detail.Groups[i]
			gr.OutputFiles, gr.OutputBytes, gr.ElapsedMs = len(res.NewDataFiles), res.BytesAfter, time.Since(start).Milliseconds()
			log.Info("compacted file group", zap.String("partition", g.PartitionKey),
				zap.Int("input_files", len(g.Tasks)), zap.Int64("input_bytes", g.TotalSizeBytes),
				zap.Int("output_files", len(res.NewDataFiles)), zap.Int64("output_bytes", res.BytesAfter),
				zap.Int("batch_rows", batchRows), zap.Int("buffered_batches", buffered),
				zap.Duration("elapsed", time.Since(start)))
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	for _, r := range results {
		detail.OutputFiles += len(r.NewDataFiles)
		detail.OutputBytes += r.BytesAfter
	}
	return results, nil
}

// commitGroups commits the rewritten groups: all in one snapshot, or with
// partial progress in up to maxCommits snapshots of consecutive groups.
// Each commit removes the delete files that are dead once its own data
// files are rewritten (see deletes.go), decided on the table it commits on.
func (s *stepState) commitGroups(ctx context.Context, groups []compaction.Group, results []table.CompactionGroupResult, p policy.CompactionOptions, detail *CompactionDetail) error {
	batches := [][]table.CompactionGroupResult{results}
	groupBatches := [][]compaction.Group{groups}
	if p.PartialProgress {
		n := min(int(p.MaxCommits), len(results))
		size := (len(results) + n - 1) / n
		batches = slices.Collect(slices.Chunk(results, size))
		groupBatches = slices.Collect(slices.Chunk(groups, size))
	}
	for bi, batch := range batches {
		var tasks []table.FileScanTask
		var added []iceberg.DataFile
		for i, gr := range batch {
			tasks = append(tasks, groupBatches[bi][i].Tasks...)
			added = append(added, gr.NewDataFiles...)
		}
		start := time.Now()
		rm, err := s.planRemovals(ctx, batch, p.RemoveDanglingDeletes)
		detail.DeleteCheckUs += time.Since(start).Microseconds()
		if err != nil {
			return err
		}
		detail.UnreadDeleteFiles = append(detail.UnreadDeleteFiles, rm.kept...)
		var replaced []iceberg.DataFile
		removing := map[string]bool{}
		for _, df := range rm.files {
			replaced = append(replaced, df)
			removing[deleteKey(df)] = true
		}
		for _, t := range tasks {
			replaced = append(replaced, t.File)
		}
		meta := s.tbl.Metadata()
		check := func() error {
			ver, err := verifyRewrite(s.tbl.Metadata(), tasks, added)
			if err == nil {
				ver.Deletes, err = checkRemovals(meta, rm)
			}
			detail.Verified = append(detail.Verified, ver)
			return err
		}
		build := func(txn *table.Transaction) error {
			rw := txn.NewRewrite(iceberg.Properties{"tms.maintenance": string(Compaction)})
			for _, gr := range batch {
				// The groups' own lists of removable delete files are not
				// used: the commit's removals are decided over all of its
				// groups (rm).
				gr.SafePosDeletes, gr.SafeDeletionVectors = nil, nil
				rw.ApplyResult(gr)
			}
			for _, df := range rm.files {
				rw.DeleteFile(df)
			}
			if err := rw.Commit(ctx); err != nil {
				return fmt.Errorf("stage rewrite: %w", err)
			}
			return nil
		}
		in, err := newInputs(replaced)
		if err != nil {
			return err
		}
		tbl, rebases, err := s.commitRewrite(ctx, in, check, build)
		detail.Rebases = append(detail.Rebases, rebases...)
		if err != nil {
			return err
		}
		detail.RemovedDeleteFiles += len(rm.files)
		detail.DanglingDeleteFiles += len(rm.dangling)
		detail.KeptDeleteFiles += keptDeletes(tasks, removing)
		s.committed(tbl)
		detail.Commits++
	}
	return nil
}

// keptDeletes counts the distinct delete files the tasks carried that the
// commit does not remove.
func keptDeletes(tasks []table.FileScanTask, removing map[string]bool) int {
	seen := map[string]bool{}
	for _, t := range tasks {
		for _, d := range slices.Concat(t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles) {
			if k := deleteKey(d); !removing[k] {
				seen[k] = true
			}
		}
	}
	return len(seen)
}
