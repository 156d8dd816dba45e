// Package checksum computes an order-independent digest of the live rows of an
// Iceberg table at a snapshot: the rows a reader sees, with position and
// equality deletes applied. Two snapshots (of one table or of two tables)
// get the same checksum exactly when they hold the same multiset of rows, up
// to hash collisions, whatever their file layout, file order, row order or
// delete files. It is how compaction and the other maintenance types are
// verified not to have lost, duplicated or changed a row.
//
// It reads rows the way the Iceberg spec says a reader must (package
// internal/faithful, on top of iceberg-go's scan): a column a data file does
// not store takes the file's identity-partition value, else its
// initial-default, else NULL; files without field ids go through the name
// mapping; a file that cannot be read exactly is an error naming it, never a
// checksum. So a rewrite that turned partition values into NULL changes the
// checksum, even though iceberg-go alone reads both as NULL. Rows stream one
// Arrow batch at a time (memory stays bounded by the scan's batch size, not
// the table size). It must never write to a table and never log.
//
// # Digest
//
// Each row is encoded canonically: its non-null top-level columns in schema
// order, each as its Iceberg field id then its value tagged with its type;
// structs likewise (with a field count), lists element by element (null
// elements kept, as tagNull), maps with their entries sorted by encoded key so
// entry order does not matter. A null column is left out of the row, which
// keeps null distinct from 0, "" or false, and keeps a row read before and
// after "add optional column" encoded alike. Floats are encoded by their
// IEEE-754 bits (so -0.0 ≠ +0.0 and NaNs with different payloads differ).
//
// The encoding is hashed with 128-bit XXH3 and the two 64-bit halves are
// summed, each modulo 2^64, over all rows. Addition (unlike XOR) does not
// cancel a duplicated row, and it is commutative, so the order rows arrive in
// does not matter. A consequence worth knowing: the checksum of a union of
// disjoint row sets is the lane-wise sum of their checksums.
//
// # Schema evolution
//
// Columns are identified by field id, so renaming a column does not change
// the checksum. The promotions Iceberg allows without rewriting data encode
// alike: int → long, float → double, decimal precision widening; so does
// adding an optional column (its nulls are left out). Dropping a column,
// changing a value, or any other type change does change it. This lets a
// maintenance type compare S0 with the snapshot it committed even when the
// schema evolved in between: each snapshot is read with its own schema.
package checksum

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/zeebo/xxh3"

	"github.com/tms-dev/tms/internal/faithful"
)

// ErrNoSuchSnapshot is wrapped by Table's error when the requested snapshot
// id is not in the table's metadata.
var ErrNoSuchSnapshot = errors.New("snapshot not found")

// Result is the digest of a table's live rows at one snapshot.
type Result struct {
	// Rows is the number of live rows.
	Rows int64 `json:"rows"`
	// Checksum is 32 lowercase hex digits: the high lane then the low lane of
	// the 128-bit row-hash sum. A table without rows has EmptyChecksum.
	Checksum string `json:"checksum"`
}

// EmptyChecksum is the checksum of a snapshot with no live rows, and of a
// table without a snapshot.
const EmptyChecksum = "00000000000000000000000000000000"

// Table returns the digest of tbl's live rows at snapshotID (0 = the current
// snapshot). The scan always names the snapshot explicitly, so it reads with
// that snapshot's schema: Table(ctx, tbl, 0) equals
// Table(ctx, tbl, tbl.CurrentSnapshot().SnapshotID).
//
// A table without a current snapshot gives Rows 0 and EmptyChecksum. An
// unknown snapshot id is an error wrapping ErrNoSuchSnapshot.
func Table(ctx context.Context, tbl *table.Table, snapshotID int64) (Result, error) {
	var snap *table.Snapshot
	if snapshotID == 0 {
		if snap = tbl.CurrentSnapshot(); snap == nil {
			return Result{Checksum: EmptyChecksum}, nil
		}
	} else if snap = tbl.SnapshotByID(snapshotID); snap == nil {
		return Result{}, fmt.Errorf("%w: table %s has no snapshot %d",
			ErrNoSuchSnapshot, strings.Join(tbl.Identifier(), "."), snapshotID)
	}

	scan := tbl.Scan(table.WithSnapshotID(snap.SnapshotID))
	defer scan.Close()
	schema, err := scan.Projection()
	if err != nil {
		return Result{}, fmt.Errorf("schema of snapshot %d: %w", snap.SnapshotID, err)
	}
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("plan snapshot %d: %w", snap.SnapshotID, err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return Result{}, err
	}
	plan, err := faithful.Prepare(ctx, tbl.Metadata(), fs, schema, tasks)
	if err != nil {
		return Result{}, fmt.Errorf("snapshot %d: %w", snap.SnapshotID, err)
	}
	_, records, err := faithful.Read(ctx, tbl, plan, table.WithSnapshotID(snap.SnapshotID))
	if err != nil {
		return Result{}, fmt.Errorf("scan snapshot %d: %w", snap.SnapshotID, err)
	}

	var d digest
	for rec, err := range records {
		if err != nil {
			return Result{}, fmt.Errorf("read snapshot %d: %w", snap.SnapshotID, err)
		}
		err = d.addBatch(schema, rec)
		rec.Release()
		if err != nil {
			return Result{}, fmt.Errorf("hash rows of snapshot %d: %w", snap.SnapshotID, err)
		}
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
	}
	return d.result(), nil
}

// digest is the running 128-bit sum of row hashes.
type digest struct {
	rows   int64
	hi, lo uint64
	buf    []byte
}

// seed versions the row encoding: a change to the encoding must change it,
// so checksums from different encodings never compare equal by accident.
const seed = 0x746d732d72777631 // "tms-rwv1"

func (d *digest) addRow(row []byte) {
	h := xxh3.Hash128Seed(row, seed)
	d.hi += h.Hi
	d.lo += h.Lo
	d.rows++
}

func (d *digest) result() Result {
	return Result{Rows: d.rows, Checksum: fmt.Sprintf("%016x%016x", d.hi, d.lo)}
}

// Batches returns the digest of the rows of batches, whose columns are the
// top-level fields of schema (matched by name), as Table would compute it
// for a snapshot holding exactly those rows. Tests use it to checksum rows
// they built themselves, without reading a table.
func Batches(schema *iceberg.Schema, batches []arrow.RecordBatch) (Result, error) {
	var d digest
	for _, b := range batches {
		if err := d.addBatch(schema, b); err != nil {
			return Result{}, err
		}
	}
	return d.result(), nil
}
