// Package faithful reads the rows of Iceberg data files the way the Iceberg
// spec says every reader must, whoever wrote the files: Spark's
// migrate/add_files, Hive-style writers, Flink, Trino, PyIceberg. It is the
// read side of every TMS type that rewrites rows (compaction) and of the row
// checksum, so that a rewrite and the check of it read the same rows a query
// engine would.
//
// A column of the read schema that a data file lacks takes, in this order:
// the file's identity-partition value when the column is the source of an
// identity field of the file's partition spec; the field's initial-default
// (format v3); NULL when the field is optional. Files without field ids are
// matched through the table's name mapping (schema.name-mapping.default).
// What cannot be read exactly is refused before anything is read, with an
// error naming the file and the column (see Refusal): a required field with
// no value, a file column whose type is not the table type or one Iceberg
// promotes to it without loss, a file without field ids and no mapping, a
// data or delete file that is not Parquet (or a deletion vector that is not
// Puffin, or a deletion vector on a table below format v3), an equality
// delete keyed on a column that the data file does not store, an identity
// source nested in a struct that the file lacks.
//
// # What it works around in iceberg-go v0.7.0
//
// iceberg-go's scan (Scan.ReadTasks / ToArrowRecords) already applies the
// name mapping, fills initial-defaults and NULLs, and applies position,
// equality and deletion-vector deletes; faithful uses it for all of that. It
// does not fill identity-partition values: a column the file does not store
// is read as NULL even when the file's partition tuple holds its value, so a
// compaction of a migrated table rewrote every row into partition col=null.
// faithful therefore reads such files with a scan that does not select those
// columns and inserts constant columns of the partition value (the files of
// one partition with the same missing columns share one scan, so the scan's
// own concurrency still applies). iceberg-go also panics inside the read
// (as an error) on a required column with no value, and compares equality
// deletes against its NULL for a missing column; both are refused here
// instead. A top-level uuid column that a file stores as a plain
// FIXED_LEN_BYTE_ARRAY(16), without the UUID logical type (PyIceberg before
// its uuid extension type, plain Parquet writers), is the spec's uuid, but
// iceberg-go's scan fails on it (arrow-go has no cast from
// fixed_size_binary(16) to its uuid extension type): such files are read
// through a copy of the metadata that types those columns fixed[16], and the
// columns are relabelled as uuid without copying. Everything is decided from
// each file's Parquet footer, read once per file before the scan starts.
//
// Faithful must never write or delete a file and never log.
package faithful

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnfaithful is wrapped by every Refusal.
var ErrUnfaithful = errors.New("cannot read rows faithfully")

// Refusal is why a file cannot be read faithfully. It wraps ErrUnfaithful.
type Refusal struct {
	// File is the data (or delete) file's path as the metadata spells it.
	File string
	// Column names the column (and its field id) when the refusal is about
	// one; empty otherwise.
	Column string
	// Reason says what is wrong, in a phrase.
	Reason string
}

func (r *Refusal) Error() string {
	var b strings.Builder
	b.WriteString("cannot read ")
	b.WriteString(r.File)
	b.WriteString(" faithfully")
	if r.Column != "" {
		b.WriteString(": column ")
		b.WriteString(r.Column)
	}
	b.WriteString(": ")
	b.WriteString(r.Reason)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrUnfaithful) true.
func (r *Refusal) Unwrap() error { return ErrUnfaithful }

func refuse(file, column, format string, args ...any) *Refusal {
	return &Refusal{File: file, Column: column, Reason: fmt.Sprintf(format, args...)}
}
