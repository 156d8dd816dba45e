package chain

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
	"golang.org/x/sync/errgroup"

	"github.com/tms-dev/tms/internal/faithful"
)

// The rewrite of one file group. It is iceberg-go's ExecuteCompactionGroup
// (v0.7.0) with the read replaced by package faithful's: iceberg-go's scan
// reads a column that a data file does not store as NULL even when it is
// the source of an identity partition field whose value the file's
// partition tuple holds (Spark's migrate/add_files and Hive-style writers
// leave such files), and the group would be rewritten into partition
// col=null. The write side is iceberg-go's (WriteRecords), with its
// options, its row-lineage rule and its result, unchanged.

// groupOptions tune the rewrite of one group.
type groupOptions struct {
	target          int64
	scanConcurrency int
	batchRows       int
	buffered        int
}

// prepareGroups checks, before anything is written, that every file of
// every group reads faithfully, and plans the reads. A file that does not
// ends the type failed with the reason, naming the file and the column.
func (s *stepState) prepareGroups(ctx context.Context, fs iceio.IO, groups []compaction.Group, detail *CompactionDetail) ([]*faithful.Plan, error) {
	start := time.Now()
	defer func() { detail.ReadCheckUs = time.Since(start).Microseconds() }()
	plans := make([]*faithful.Plan, len(groups))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(4) // each Prepare reads its footers concurrently too
	for i, g := range groups {
		eg.Go(func() (err error) {
			if plans[i], err = faithful.Prepare(gctx, s.tbl.Metadata(), fs, s.tbl.Schema(), g.Tasks); err != nil {
				return fmt.Errorf("group %q: %w", g.PartitionKey, err)
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	for i, p := range plans {
		detail.Groups[i].FilledFiles = p.Filled()
		detail.FilledFiles += p.Filled()
	}
	return plans, nil
}

// rewriteGroup reads the group's files faithfully through rtbl (see
// readTable) and writes them out as files of about opts.target bytes.
func (s *stepState) rewriteGroup(ctx context.Context, rtbl *table.Table, g compaction.Group, plan *faithful.Plan, opts groupOptions) (table.CompactionGroupResult, error) {
	tbl := s.tbl
	meta := tbl.Metadata()
	scanOpts := []table.ScanOption{
		table.WithMaxConcurrency(opts.scanConcurrency),
		table.WithArrowBatchSize(opts.batchRows),
	}
	// As iceberg-go does: keep v3 row lineage only when every file of the
	// group carries it; a mixed group drops it for the whole output.
	lineage := meta.Version() >= 3 && len(g.Tasks) > 0
	for _, t := range g.Tasks {
		lineage = lineage && t.FirstRowID != nil
	}
	if lineage {
		scanOpts = append(scanOpts, table.WithRowLineage())
	}
	arrowSchema, records, err := faithful.Read(ctx, rtbl, plan, scanOpts...)
	if err != nil {
		return table.CompactionGroupResult{}, fmt.Errorf("read tasks: %w", err)
	}
	writeOpts := []table.WriteRecordOption{
		table.WithTargetFileSize(opts.target),
		table.WithRecordBatchBufferSize(opts.buffered),
	}
	// A group holds the files of one partition of one spec. Written in
	// that spec it is one partition, and the single-threaded clustered
	// writer fits; a group of an older spec is written in the table's
	// current spec, where its rows may span partitions in any order.
	if groupSpec(g) == meta.DefaultPartitionSpec() {
		writeOpts = append(writeOpts, table.WithClusteredWrite())
	}
	if lineage {
		projected := iceberg.SchemaWithRowLineage(tbl.Schema())
		arrowSchema, err = table.SchemaToArrowSchemaWithOptions(projected, table.ArrowSchemaOptions{
			IncludeFieldIDs: true, TableProperties: meta.Properties(),
		})
		if err != nil {
			return table.CompactionGroupResult{}, fmt.Errorf("arrow schema for a row-lineage write: %w", err)
		}
		writeOpts = append(writeOpts, table.WithPreserveRowLineage(projected))
	}
	res := table.CompactionGroupResult{PartitionKey: g.PartitionKey, BytesBefore: g.TotalSizeBytes}
	for df, err := range table.WriteRecords(ctx, tbl, arrowSchema, records, writeOpts...) {
		if err != nil {
			return res, fmt.Errorf("write compacted files: %w", err)
		}
		res.NewDataFiles = append(res.NewDataFiles, df)
		res.BytesAfter += df.FileSizeBytes()
	}
	for _, t := range g.Tasks {
		res.OldDataFiles = append(res.OldDataFiles, t.File)
	}
	// Only the deletion vectors, one per rewritten data file, are the
	// group's to name; which position-delete files die is decided over the
	// whole commit (table.CollectSafePositionDeletes returns every one the
	// tasks carry, including those that name files other groups, or no
	// group, keep; see deletes.go).
	res.SafeDeletionVectors = table.CollectSafeDeletionVectors(g.Tasks)
	return res, nil
}

// groupSpec is the partition spec id of a group's files (one per group by
// the planner's construction).
func groupSpec(g compaction.Group) int {
	if len(g.Tasks) == 0 {
		return 0
	}
	return int(g.Tasks[0].File.SpecID())
}
