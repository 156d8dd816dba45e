// Package scanoracle is the test oracle for the row-level content of an
// Iceberg table: which rows its current snapshot reads and whether every
// file its snapshots reference still exists.
//
// It uses only iceberg-go's public scan and manifest API, never TMS's
// checksum or internal/faithful packages, so that it shares no blind spot
// with the code under test: a bug in how TMS reads or counts rows cannot
// also hide itself from the check. Only tests import it.
package scanoracle

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Rows scans tbl's current snapshot with iceberg-go and returns every row as
// a canonical string, sorted, so that two reads compare as multisets with
// slices.Equal or Diff. A row is "name=value" for each column of the current
// schema, in schema order, joined by " | ". Columns are looked up by name,
// so a scan that orders them differently encodes the same. A NULL is
// spelled NULL and a string or binary value is quoted, so that neither a
// string "NULL" nor a value holding the separator reads as another row;
// other values, nested ones included, are arrow's ValueStr (JSON for
// structs, lists and maps, with their own nulls). A table without a
// snapshot has no rows.
func Rows(ctx context.Context, tbl *table.Table) ([]string, error) {
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	var names []string
	for _, f := range tbl.Schema().Fields() {
		names = append(names, f.Name)
	}
	_, records, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg-go cannot scan the table: %w", err)
	}
	var out []string
	var sb strings.Builder
	for rec, err := range records {
		if err != nil {
			return nil, fmt.Errorf("iceberg-go cannot scan the table: %w", err)
		}
		cols := make([]arrow.Array, len(names))
		for i, n := range names {
			idx := rec.Schema().FieldIndices(n)
			if len(idx) != 1 {
				rec.Release()
				return nil, fmt.Errorf("the scan has %d columns named %s, want 1", len(idx), n)
			}
			cols[i] = rec.Column(idx[0])
		}
		for r := range int(rec.NumRows()) {
			sb.Reset()
			for i, c := range cols {
				if i > 0 {
					sb.WriteString(" | ")
				}
				sb.WriteString(names[i])
				sb.WriteByte('=')
				writeValue(&sb, c, r)
			}
			out = append(out, sb.String())
		}
		rec.Release()
	}
	slices.Sort(out)
	return out, nil
}

// writeValue writes row r of column c as Rows encodes it.
func writeValue(sb *strings.Builder, c arrow.Array, r int) {
	if c.IsNull(r) {
		sb.WriteString("NULL")
		return
	}
	switch c.DataType().ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW, arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
		fmt.Fprintf(sb, "%q", c.ValueStr(r))
	default:
		sb.WriteString(c.ValueStr(r))
	}
}

// Diff compares want and got as multisets of rows and returns "" when they
// are equal. Otherwise it returns a short text, not the whole tables, so a
// failure stays readable at thousands of rows: both counts, how many rows
// were lost (in want only) and how many are extra (in got only), and the
// first max of each, in sorted order.
func Diff(want, got []string, max int) string {
	count := map[string]int{}
	for _, r := range want {
		count[r]++
	}
	for _, r := range got {
		count[r]--
	}
	var lost, extra []string
	for _, r := range slices.Sorted(maps.Keys(count)) {
		for n := count[r]; n > 0; n-- {
			lost = append(lost, r)
		}
		for n := count[r]; n < 0; n++ {
			extra = append(extra, r)
		}
	}
	if len(lost) == 0 && len(extra) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "want %d rows, got %d: %d rows lost, %d rows extra\n", len(want), len(got), len(lost), len(extra))
	for _, side := range []struct {
		what string
		rows []string
	}{{"lost", lost}, {"extra", extra}} {
		for i, r := range side.rows {
			if i == max {
				fmt.Fprintf(&b, "  … %d more %s\n", len(side.rows)-max, side.what)
				break
			}
			fmt.Fprintf(&b, "  %s: %s\n", side.what, r)
		}
	}
	return b.String()
}

// LiveFiles returns the live data files and delete files (position,
// equality and deletion vectors) of tbl's current snapshot, read from its
// manifests, so that a test can see what a maintenance run kept or
// replaced. A table without a snapshot has none.
func LiveFiles(ctx context.Context, tbl *table.Table) (data, deletes []iceberg.DataFile, err error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, nil, nil
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, nil, err
	}
	mans, err := snap.Manifests(fsys)
	if err != nil {
		return nil, nil, fmt.Errorf("read manifest list %s: %w", snap.ManifestList, err)
	}
	for _, m := range mans {
		entries, err := m.FetchEntries(fsys, true)
		if err != nil {
			return nil, nil, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
		}
		for _, e := range entries {
			if e.DataFile().ContentType() == iceberg.EntryContentData {
				data = append(data, e.DataFile())
			} else {
				deletes = append(deletes, e.DataFile())
			}
		}
	}
	return data, deletes, nil
}

// ReferencedFiles returns, sorted and each once, the files tbl references:
// its metadata file and, for the current snapshot or with allSnapshots for
// every snapshot, the manifest list, the manifests and the data and delete
// files (deletion-vector Puffin files included) of their live entries.
// Entries marked deleted are left out: the files they name were removed by
// their snapshot and may rightly be gone once older snapshots expire.
func ReferencedFiles(ctx context.Context, tbl *table.Table, allSnapshots bool) ([]string, error) {
	set := map[string]bool{}
	err := walk(ctx, tbl, allSnapshots, func(_, loc string) (bool, error) {
		set[loc] = true
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(set)), nil
}

// MissingFiles returns the files ReferencedFiles would list that do not
// open through tbl's FileIO, each as what references it and its location
// ("current snapshot 12 manifest s3://…"), so that a failure says which
// snapshot lost what. It does not read a manifest list or manifest that is
// missing, and reports it instead of failing. Opening through the FileIO
// makes it work on object stores and for every spelling of a location
// iceberg-go reads.
func MissingFiles(ctx context.Context, tbl *table.Table, allSnapshots bool) ([]string, error) {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	var missing []string
	err = walk(ctx, tbl, allSnapshots, func(what, loc string) (bool, error) {
		ok, err := opens(fsys, loc)
		if err == nil && !ok {
			missing = append(missing, what+" "+loc)
		}
		return ok, err
	})
	return missing, err
}

// Missing returns the locations that do not open through tbl's FileIO, so a
// test can check files it chose itself (a file under the spelling it was
// written with, every file before a failed run) the same way MissingFiles
// checks the referenced ones.
func Missing(ctx context.Context, tbl *table.Table, locations ...string) ([]string, error) {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, loc := range locations {
		ok, err := opens(fsys, loc)
		if err != nil {
			return missing, err
		}
		if !ok {
			missing = append(missing, loc)
		}
	}
	return missing, nil
}

// opens reports whether loc opens through fsys. A location that does not
// exist is false; any other error is returned, since the oracle cannot tell
// whether the file is there.
func opens(fsys icebergio.IO, loc string) (bool, error) {
	f, err := fsys.Open(loc)
	if errors.Is(err, iofs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open %s: %w", loc, err)
	}
	return true, f.Close()
}

// walk calls visit once for every file tbl references (see ReferencedFiles)
// with what references it. visit returns false for a manifest list or
// manifest that walk must not read (it is missing).
func walk(ctx context.Context, tbl *table.Table, allSnapshots bool, visit func(what, loc string) (bool, error)) error {
	seen := map[string]bool{}
	check := func(what, loc string) (bool, error) {
		if seen[loc] {
			return false, nil
		}
		seen[loc] = true
		return visit(what, loc)
	}
	if _, err := check("metadata file", tbl.MetadataLocation()); err != nil {
		return err
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	current := tbl.CurrentSnapshot()
	var snaps []table.Snapshot
	switch {
	case allSnapshots:
		snaps = tbl.Metadata().Snapshots()
	case current != nil:
		snaps = []table.Snapshot{*current}
	}
	for _, snap := range snaps {
		which := fmt.Sprintf("snapshot %d", snap.SnapshotID)
		if current != nil && snap.SnapshotID == current.SnapshotID {
			which = "current " + which
		}
		if ok, err := check(which+" manifest list", snap.ManifestList); err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		mans, err := snap.Manifests(fsys)
		if err != nil {
			return fmt.Errorf("read manifest list %s: %w", snap.ManifestList, err)
		}
		for _, m := range mans {
			if ok, err := check(which+" manifest", m.FilePath()); err != nil || !ok {
				if err != nil {
					return err
				}
				continue
			}
			entries, err := m.FetchEntries(fsys, true)
			if err != nil {
				return fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
			}
			for _, e := range entries {
				what := fmt.Sprintf("%s %s file", which, e.DataFile().ContentType())
				if _, err := check(what, e.DataFile().FilePath()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
