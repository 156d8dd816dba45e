package testdata

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownRecipe is returned (wrapped, with the valid names) for a recipe
// name that Lookup does not know.
var ErrUnknownRecipe = errors.New("unknown testdata recipe")

// DefaultTargetFileSize is the value of write.target-file-size-bytes set on
// every recipe table: iceberg-go's own default of 512 MiB. It is written into
// the table properties (rather than left implicit) so that samplers read the
// same target the writer used; with it every file the recipes write is "small".
const DefaultTargetFileSize = 512 << 20

// Recipe declares one table: its shape, how many commits build it and what
// else is planted next to it. Counts that grow with BuildOptions.Scale say so.
type Recipe struct {
	// Name is "namespace.table", e.g. "tms.small_files".
	Name string
	// Description says in one sentence what the table is for.
	Description string
	// FormatVersion is the Iceberg table format version (1, 2 or 3).
	FormatVersion int
	// PartitionByDay partitions the table by day(ts). Every append then
	// writes one data file per day it touches, and each append touches all
	// Days days.
	PartitionByDay bool
	// Days is the number of distinct calendar days (UTC, from 2024-01-01)
	// the ts column spans; rows go to days round robin by id.
	Days int
	// Appends is the number of append commits, each one snapshot. It is
	// multiplied by the scale.
	Appends int
	// RowsPerAppend is the number of rows each append commit adds. It does
	// not grow with the scale, so files stay small at any scale.
	RowsPerAppend int
	// FilesPerAppend is the number of data files each append of an
	// unpartitioned table adds in its one snapshot (rows are split evenly).
	// Zero or one means one file, written by Table.Append; more are written
	// one file each with table.WriteRecords and committed together with
	// Transaction.AddDataFiles, so they land in one new manifest.
	FilesPerAppend int
	// AppendsPerCommit groups that many appends in one transaction, so one
	// catalog commit (one metadata.json) carries several snapshots, each
	// still a separate fast append with its own manifest. Zero or one commits
	// every append on its own. Grouping keeps the metadata rewrite cost of
	// long histories linear; with it a 200-append table builds about twice
	// as fast.
	AppendsPerCommit int
	// PositionDeletes is the number of merge-on-read Table.Delete commits
	// made after the appends; each removes RowsPerDelete rows and writes
	// position-delete files. Multiplied by the scale. Needs FormatVersion 2.
	PositionDeletes int
	// EqualityDeletes is the number of equality-delete commits (RowDelta with
	// files from Transaction.WriteEqualityDeletes keyed on id) made after the
	// position deletes; each removes RowsPerDelete rows. Multiplied by the
	// scale. Needs FormatVersion 2.
	EqualityDeletes int
	// RowsPerDelete is the number of rows each delete commit removes. Deleted
	// ids are distinct across all delete commits.
	RowsPerDelete int
	// Orphans is the number of unreferenced files planted under the table's
	// data/ and metadata/ folders after it is built: even-numbered ones get an
	// mtime OrphanAge in the past, odd-numbered ones keep the build time.
	// Multiplied by the scale.
	Orphans int
	// OnlyWhenNamed keeps the recipe out of Recipes() and out of a Build
	// that names no recipes, because it is slow or big.
	OnlyWhenNamed bool
}

// Namespace returns the namespace part of Name.
func (r Recipe) Namespace() string {
	ns, _, _ := strings.Cut(r.Name, ".")
	return ns
}

// Table returns the table part of Name.
func (r Recipe) Table() string {
	_, tbl, _ := strings.Cut(r.Name, ".")
	return tbl
}

// filesPerAppend is the number of data files an append commit writes.
func (r Recipe) filesPerAppend() int {
	if r.PartitionByDay {
		return min(r.Days, r.RowsPerAppend)
	}
	return max(r.FilesPerAppend, 1)
}

// all is every recipe, defaults first, in a stable order.
var all = []Recipe{
	{
		Name:             "tms.small_files",
		Description:      "Unpartitioned v2 table built by 200 appends of 1,000 rows: 200 small data files, one per append; the compaction candidate.",
		FormatVersion:    2,
		Days:             7,
		Appends:          200,
		RowsPerAppend:    1000,
		AppendsPerCommit: 10,
	},
	{
		Name:           "tms.partitioned",
		Description:    "Table partitioned by day(ts) over 7 days; 12 appends each write one small file per day: 84 files across 7 partitions.",
		FormatVersion:  2,
		PartitionByDay: true,
		Days:           7,
		Appends:        12,
		RowsPerAppend:  700,
	},
	{
		Name:            "tms.deletes",
		Description:     "Merge-on-read v2 table with 10 appends of 1,000 rows, then 2 position-delete and 2 equality-delete commits of 25 rows each.",
		FormatVersion:   2,
		Days:            7,
		Appends:         10,
		RowsPerAppend:   1000,
		PositionDeletes: 2,
		EqualityDeletes: 2,
		RowsPerDelete:   25,
	},
	{
		Name:             "tms.many_snapshots",
		Description:      "Unpartitioned table with 120 fast appends of 50 rows: 120 snapshots and 120 manifests in the current snapshot; the manifest-rewrite and snapshot-expiry candidate.",
		FormatVersion:    2,
		Days:             7,
		Appends:          120,
		RowsPerAppend:    50,
		AppendsPerCommit: 10,
	},
	{
		Name:          "tms.orphans",
		Description:   "Small table (5 appends of 1,000 rows) with 12 planted unreferenced files under data/ and metadata/, half of them 5 days old; the orphan-cleanup candidate.",
		FormatVersion: 2,
		Days:          7,
		Appends:       5,
		RowsPerAppend: 1000,
		Orphans:       12,
	},
	{
		Name:             "tms.bench_10k",
		Description:      "Sampler benchmark table: 100 commits each adding 100 data files of 10 rows in one manifest: 10,000 data files in exactly 100 manifests.",
		FormatVersion:    2,
		Days:             7,
		Appends:          100,
		RowsPerAppend:    1000,
		FilesPerAppend:   100,
		AppendsPerCommit: 10,
		OnlyWhenNamed:    true,
	},
}

// Recipes returns the default recipes (those without OnlyWhenNamed) in a
// stable order. The slice is a copy.
func Recipes() []Recipe {
	out := make([]Recipe, 0, len(all))
	for _, r := range all {
		if !r.OnlyWhenNamed {
			out = append(out, r)
		}
	}
	return out
}

// Lookup returns the recipe called name, including recipes that are built
// only when named. An unknown name is an error that names it and lists the
// valid names.
func Lookup(name string) (Recipe, error) {
	for _, r := range all {
		if r.Name == name {
			return r, nil
		}
	}
	names := make([]string, len(all))
	for i, r := range all {
		names[i] = r.Name
	}
	return Recipe{}, fmt.Errorf("%w %q (valid: %s)", ErrUnknownRecipe, name, strings.Join(names, ", "))
}

// validate reports a recipe that cannot be built as declared.
func (r Recipe) validate() error {
	switch {
	case r.Namespace() == "" || r.Table() == "" || strings.Contains(r.Table(), "."):
		return fmt.Errorf("recipe %q: name must be NAMESPACE.TABLE", r.Name)
	case r.FormatVersion < 1 || r.FormatVersion > 3:
		return fmt.Errorf("recipe %q: format version %d not in 1..3", r.Name, r.FormatVersion)
	case r.Appends < 1 || r.RowsPerAppend < 1 || r.Days < 1:
		return fmt.Errorf("recipe %q: appends, rows per append and days must be positive", r.Name)
	case r.RowsPerAppend < r.filesPerAppend():
		return fmt.Errorf("recipe %q: %d rows cannot fill %d files per append", r.Name, r.RowsPerAppend, r.filesPerAppend())
	case (r.PositionDeletes > 0 || r.EqualityDeletes > 0) && r.FormatVersion < 2:
		return fmt.Errorf("recipe %q: row-level deletes need format version 2 or later", r.Name)
	case r.EqualityDeletes > 0 && r.PartitionByDay:
		return fmt.Errorf("recipe %q: equality deletes on a partitioned table are not supported (the delete records would need ts)", r.Name)
	case (r.PositionDeletes > 0 || r.EqualityDeletes > 0) && r.RowsPerDelete < 1:
		return fmt.Errorf("recipe %q: delete commits need RowsPerDelete > 0", r.Name)
	}
	return nil
}
