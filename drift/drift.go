// Package drift answers the runner's question between sampling and working:
// "has the table's HEAD moved since snapshot S0 was sampled?" (see
// docs/architecture.md, the chain's drift rule). It classifies what
// happened — nothing, new snapshots on top of S0, a rewind, a drop, a
// re-creation — so the runner can end the current
// maintenance type with `ended-drift` and say why.
//
// It owns only reading table metadata through a catalog. It must never write
// to a table or a catalog, never read manifests or data files, and never log.
//
// Drift is about the `main` branch (the table's current snapshot). Changes
// that add no snapshot — properties, schema or sort order updates — are not
// drift: an Iceberg commit made against S0 still validates those through the
// catalog's optimistic concurrency.
package drift

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/internal/invalid"
)

// ErrInvalidArgument is wrapped by Check's error for an unusable Base.
var ErrInvalidArgument = invalid.New("invalid argument")

// Kind classifies how HEAD relates to S0.
type Kind int

const (
	// Unchanged: the same table (same table-uuid) and HEAD is still S0.
	Unchanged Kind = iota
	// Moved: HEAD descends from S0; new snapshots were committed on top.
	Moved
	// Rewound: HEAD does not provably descend from S0 — a rollback, a
	// replaced or removed main branch, or history expired so far that the
	// parent chain from HEAD no longer reaches S0.
	Rewound
	// Dropped: the table no longer exists in the catalog.
	Dropped
	// Recreated: a table of the same name exists but has another table-uuid.
	Recreated
)

var kindNames = [...]string{
	Unchanged: "unchanged",
	Moved:     "moved",
	Rewound:   "rewound",
	Dropped:   "dropped",
	Recreated: "recreated",
}

// String returns the stable lowercase name of k ("unchanged", "moved",
// "rewound", "dropped", "recreated"), as written to logs and the ledger.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// MarshalText encodes k as its String name.
func (k Kind) MarshalText() ([]byte, error) {
	if k < 0 || int(k) >= len(kindNames) {
		return nil, fmt.Errorf("%w: unknown drift kind %d", ErrInvalidArgument, int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText decodes a name written by MarshalText.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, name := range kindNames {
		if string(b) == name {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("%w: unknown drift kind %q", ErrInvalidArgument, b)
}

// MayCommit reports whether a maintenance type that planned its work at S0
// may still commit it. Only Unchanged allows it: after any drift the plan is
// stale and the type ends with `ended-drift`; the next wake-up re-samples.
func (k Kind) MayCommit() bool { return k == Unchanged }

// Base is what the runner remembers about the table when it sampled S0.
type Base struct {
	// Ident is the table's catalog identifier.
	Ident table.Identifier `json:"ident"`
	// TableUUID is the table-uuid at S0. Empty skips the re-creation check.
	TableUUID string `json:"table-uuid"`
	// SnapshotID is S0, or 0 when the table had no current snapshot.
	SnapshotID int64 `json:"snapshot-id"`
}

// BaseOf captures the Base of a loaded table at its current snapshot.
func BaseOf(tbl *table.Table) Base {
	b := Base{Ident: tbl.Identifier(), TableUUID: tbl.Metadata().TableUUID().String()}
	if s := tbl.CurrentSnapshot(); s != nil {
		b.SnapshotID = s.SnapshotID
	}
	return b
}

// Result is the answer of Check.
type Result struct {
	// Kind classifies the drift.
	Kind Kind
	// HeadSnapshotID is the current snapshot now, 0 if the table has none or
	// was dropped.
	HeadSnapshotID int64
	// TableUUID is the table-uuid now, empty if the table was dropped.
	TableUUID string
	// NewSnapshots is, for Moved, how many snapshots HEAD is ahead of S0
	// (counting HEAD); 0 otherwise.
	NewSnapshots int
	// Reason is a one-line human explanation, for logs and the ledger.
	Reason string
}

// Check loads base's table from cat and classifies how its HEAD relates to
// S0. A table the catalog reports as missing is Dropped; any other load
// failure is returned as an error, since drift cannot be decided.
func Check(ctx context.Context, cat catalog.Catalog, base Base) (Result, error) {
	if len(base.Ident) == 0 {
		return Result{}, fmt.Errorf("%w: base has no table identifier", ErrInvalidArgument)
	}
	name := strings.Join(base.Ident, ".")
	tbl, err := cat.LoadTable(ctx, base.Ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return Result{Kind: Dropped, Reason: fmt.Sprintf("table %s no longer exists", name)}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("load table %s to check drift: %w", name, err)
	}
	return CheckTable(base, tbl), nil
}

// CheckTable classifies a freshly loaded tbl against base, like Check without
// the catalog round trip.
//
// Ancestry is decided by walking parent snapshot ids back from HEAD. Reaching
// S0's id — including through the parent id recorded in a surviving snapshot
// when S0 itself has been expired — proves HEAD descends from S0: Moved. If
// the walk ends first (a root snapshot, or a missing intermediate snapshot
// that makes ancestry unknowable), the result is Rewound: conservative, since
// either way the plan made at S0 must not be committed.
func CheckTable(base Base, tbl *table.Table) Result {
	meta := tbl.Metadata()
	res := Result{TableUUID: meta.TableUUID().String()}
	if head := tbl.CurrentSnapshot(); head != nil {
		res.HeadSnapshotID = head.SnapshotID
	}
	switch {
	case base.TableUUID != "" && !strings.EqualFold(base.TableUUID, res.TableUUID):
		res.Kind = Recreated
		res.Reason = fmt.Sprintf("table-uuid changed from %s to %s: the table was dropped and created again", base.TableUUID, res.TableUUID)
	case res.HeadSnapshotID == base.SnapshotID:
		res.Kind = Unchanged
		res.Reason = fmt.Sprintf("head is still snapshot %d", base.SnapshotID)
	case base.SnapshotID == 0:
		res.Kind = Moved
		res.NewSnapshots = len(table.AncestorsOf(res.HeadSnapshotID, meta.SnapshotByID))
		res.Reason = fmt.Sprintf("the table had no snapshot at S0; head is now snapshot %d", res.HeadSnapshotID)
	case res.HeadSnapshotID == 0:
		res.Kind = Rewound
		res.Reason = fmt.Sprintf("S0 was snapshot %d; the table now has no current snapshot", base.SnapshotID)
	default:
		n, found, why := distance(res.HeadSnapshotID, base.SnapshotID, meta)
		if found {
			res.Kind, res.NewSnapshots = Moved, n
			res.Reason = fmt.Sprintf("head moved from snapshot %d to %d (%d new snapshots)", base.SnapshotID, res.HeadSnapshotID, n)
		} else {
			res.Kind = Rewound
			res.Reason = fmt.Sprintf("head is snapshot %d, which does not descend from S0 %d: %s", res.HeadSnapshotID, base.SnapshotID, why)
		}
	}
	return res
}

// distance walks parent ids from head looking for base. It returns the
// number of snapshots from head (inclusive) down to base (exclusive) when
// base is reached, else why the walk stopped.
func distance(head, base int64, meta table.Metadata) (n int, found bool, why string) {
	seen := map[int64]bool{}
	for id := head; ; {
		if seen[id] {
			return 0, false, fmt.Sprintf("snapshot %d is on a parent cycle", id)
		}
		seen[id] = true
		snap := meta.SnapshotByID(id)
		if snap == nil {
			return 0, false, fmt.Sprintf("snapshot %d on its parent chain is no longer in the metadata, so its ancestry is unknown", id)
		}
		n++
		if snap.ParentSnapshotID == nil {
			return 0, false, fmt.Sprintf("its history ends at root snapshot %d", id)
		}
		if *snap.ParentSnapshotID == base {
			return n, true, ""
		}
		id = *snap.ParentSnapshotID
	}
}
