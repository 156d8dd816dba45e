package chain

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/drift"
	"github.com/tms-dev/tms/internal/location"
)

// Committing a rewrite through benign changes.
//
// The drift gate runs before a type starts its work (startGate): a table
// that moved between S0 and then ends the type ended-drift. Once the work
// is done, the commit is optimistic concurrency, as Iceberg Java's
// RewriteFiles does it: the snapshots that landed on main after S0 are
// classified (classifySince), and when they only appended data files, or
// added delete files that cannot apply to the rewrite's input files, the
// same rewrite (the same new files replacing the same old ones) is rebuilt
// on the new head and committed. iceberg-go v0.7.0 does not rebase by
// itself: a transaction asserts the snapshot it was built on
// (AssertRefSnapshotID), so the chain rebuilds the transaction on a freshly
// loaded table, and runs the verifier and the BeforeCommit gate (the fence)
// again for every attempt. A snapshot that removed or replaced an input
// file, added a delete file that could apply to one, or a change of the
// current schema or default spec is a conflict: nothing is committed.

// maxRebases bounds the attempts of one commit after the head moved.
const maxRebases = 5

// Rebase is one commit attempt that was rebuilt on a head that had moved
// since the previous base.
type Rebase struct {
	// From is the snapshot the attempt was built on before; To the new
	// head it was rebuilt on.
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Snapshots are the snapshots that landed in between, oldest first.
	Snapshots []InterveningSnapshot `json:"snapshots"`
}

// InterveningSnapshot is a snapshot that landed on main while a type worked.
type InterveningSnapshot struct {
	ID        int64  `json:"id"`
	Operation string `json:"operation"`
	// AddedDataFiles, AddedDeleteFiles and RemovedDataFiles count what the
	// snapshot itself added or removed.
	AddedDataFiles   int `json:"added_data_files"`
	AddedDeleteFiles int `json:"added_delete_files"`
	RemovedDataFiles int `json:"removed_data_files"`
}

// conflictError ends a type as conflict: a snapshot that landed since S0
// touched what the work replaced.
type conflictError struct{ reason string }

func (e *conflictError) Error() string { return "conflict: " + e.reason }

// startGate is the drift gate before a type's work: the table must still be
// at S0.
func (s *stepState) startGate(ctx context.Context) error {
	d, err := drift.Check(ctx, s.r.cat, s.base)
	if err != nil {
		return fmt.Errorf("check drift before starting: %w", err)
	}
	if !d.Kind.MayCommit() {
		return &driftError{d}
	}
	return s.recordS0(ctx)
}

// inputs are the files a rewrite replaces, for classifying snapshots.
type inputs struct {
	// paths holds the inputs' locations, compared by canonical spelling: a
	// concurrent writer may name an input as s3a:// where the manifest
	// says s3://.
	paths *location.Set
	// parts holds, per spec id, the partition tuples of the inputs.
	parts map[int32]map[string]bool
}

func newInputs(files []iceberg.DataFile) (inputs, error) {
	norm, err := location.New(location.Options{})
	if err != nil {
		return inputs{}, fmt.Errorf("location normaliser: %w", err)
	}
	in := inputs{paths: norm.NewSet(), parts: map[int32]map[string]bool{}}
	for _, f := range files {
		in.paths.Add(f.FilePath())
		if in.parts[f.SpecID()] == nil {
			in.parts[f.SpecID()] = map[string]bool{}
		}
		in.parts[f.SpecID()][fmt.Sprint(f.Partition())] = true
	}
	return in, nil
}

// mayApply reports whether the delete file d could apply to an input:
// a position delete or deletion vector that names an input, or names no
// file and shares an input's partition; an equality delete in an input's
// partition or in a spec without partition fields (it applies everywhere).
// A delete file in another spec is assumed to apply.
func (in inputs) mayApply(meta table.Metadata, d iceberg.DataFile) bool {
	if ref := d.ReferencedDataFile(); ref != nil && *ref != "" {
		return in.paths.Has(*ref)
	}
	if spec := meta.PartitionSpecByID(int(d.SpecID())); spec == nil || spec.NumFields() == 0 {
		return true
	}
	parts, ok := in.parts[d.SpecID()]
	if !ok {
		return len(in.parts) > 0
	}
	return parts[fmt.Sprint(d.Partition())]
}

// classifySince classifies the snapshots of fresh's main branch after
// base.SnapshotID. It returns them oldest first, or a *conflictError (or a
// *driftError when the head no longer descends from S0).
func classifySince(fs iceio.IO, base drift.Base, s0 table.Metadata, fresh *table.Table, in inputs) ([]InterveningSnapshot, error) {
	d := drift.CheckTable(base, fresh)
	switch d.Kind {
	case drift.Unchanged:
		return nil, nil
	case drift.Moved:
	default:
		return nil, &driftError{d}
	}
	meta := fresh.Metadata()
	if meta.CurrentSchema().ID != s0.CurrentSchema().ID {
		return nil, &conflictError{fmt.Sprintf("the schema changed (schema %d → %d) while the work ran", s0.CurrentSchema().ID, meta.CurrentSchema().ID)}
	}
	if meta.DefaultPartitionSpec() != s0.DefaultPartitionSpec() {
		return nil, &conflictError{fmt.Sprintf("the partition spec changed (spec %d → %d) while the work ran", s0.DefaultPartitionSpec(), meta.DefaultPartitionSpec())}
	}
	snaps := snapshotsSince(meta, d.HeadSnapshotID, base.SnapshotID)
	out := make([]InterveningSnapshot, 0, len(snaps))
	for _, snap := range snaps {
		is := InterveningSnapshot{ID: snap.SnapshotID}
		if snap.Summary != nil {
			is.Operation = string(snap.Summary.Operation)
		}
		mans, err := snap.Manifests(fs)
		if err != nil {
			return nil, fmt.Errorf("read manifest list of snapshot %d: %w", snap.SnapshotID, err)
		}
		for _, m := range mans {
			if m.SnapshotID() != snap.SnapshotID {
				continue // written by an earlier snapshot: holds none of this one's changes
			}
			entries, err := m.FetchEntries(fs, false)
			if err != nil {
				return nil, fmt.Errorf("read manifest %s of snapshot %d: %w", m.FilePath(), snap.SnapshotID, err)
			}
			for _, e := range entries {
				if e.SnapshotID() != snap.SnapshotID {
					continue
				}
				df := e.DataFile()
				data := df.ContentType() == iceberg.EntryContentData
				if e.Status() == iceberg.EntryStatusDELETED && in.paths.Has(df.FilePath()) {
					return nil, &conflictError{fmt.Sprintf("snapshot %d (%s) removed input file %s", snap.SnapshotID, is.Operation, df.FilePath())}
				}
				switch {
				case e.Status() == iceberg.EntryStatusDELETED && data:
					is.RemovedDataFiles++
				case e.Status() == iceberg.EntryStatusADDED && data:
					is.AddedDataFiles++
				case e.Status() == iceberg.EntryStatusADDED:
					is.AddedDeleteFiles++
					if in.mayApply(meta, df) {
						return nil, &conflictError{fmt.Sprintf("snapshot %d (%s) added delete file %s, which may apply to the input files", snap.SnapshotID, is.Operation, df.FilePath())}
					}
				}
			}
		}
		out = append(out, is)
	}
	return out, nil
}

// commitRewrite commits a rewrite built by build on the current head,
// rebuilding it on a new head when snapshots landed since S0 that do not
// conflict with it (see classifySince), at most maxRebases times. check runs
// before every attempt (the verifier), then the BeforeCommit gate, then the
// table is loaded and classified once more, so that what can slip in
// unseen is only what lands during the commit's own round trip (and that
// fails the catalog's assertion of the base snapshot, and is classified on
// the next attempt).
// It returns the committed table and the rebases it needed.
func (s *stepState) commitRewrite(ctx context.Context, in inputs, check func() error,
	build func(txn *table.Transaction) error,
) (*table.Table, []Rebase, error) {
	fs, err := s.tbl.FS(ctx)
	if err != nil {
		return nil, nil, err
	}
	s0 := s.tbl.Metadata()
	cur := s.tbl
	var rebases []Rebase
	var attempts []staged
	for attempt := 0; ; attempt++ {
		if err := check(); err != nil {
			return nil, rebases, err
		}
		fresh, err := s.fenceAndLoad(ctx)
		if err != nil {
			return nil, rebases, err
		}
		if landedIn(fresh, attempts) {
			// An earlier attempt whose answer was lost landed late.
			s.lostAnswers++
			return fresh, rebases, nil
		}
		if fresh.MetadataLocation() != cur.MetadataLocation() {
			since, err := classifySince(fs, s.base, s0, fresh, in)
			if err != nil {
				return nil, rebases, err
			}
			if head := fresh.CurrentSnapshot(); head != nil && (cur.CurrentSnapshot() == nil || head.SnapshotID != cur.CurrentSnapshot().SnapshotID) {
				from := int64(0)
				if c := cur.CurrentSnapshot(); c != nil {
					from = c.SnapshotID
				}
				rebases = append(rebases, Rebase{From: from, To: head.SnapshotID, Snapshots: newSince(since, rebases)})
			}
			cur = recordingTable(fresh, s.r.cat, s.rec)
		}
		txn := cur.NewTransaction()
		if err := build(txn); err != nil {
			return nil, rebases, err
		}
		a, err := stage(cur, txn)
		if err != nil {
			return nil, rebases, fmt.Errorf("stage rewrite: %w", err)
		}
		attempts = append(attempts, a)
		tbl, err := txn.Commit(ctx)
		if err == nil {
			return tbl, rebases, nil
		}
		after, landed, retry := s.afterFailedCommit(ctx, err, attempts)
		if landed {
			return after, rebases, nil
		}
		if !(isConflict(err) || retry) || attempt >= maxRebases {
			if isConflict(err) || retry {
				err = fmt.Errorf("commit rewrite after %d rebases: %w", len(rebases), err)
			}
			return nil, rebases, fmt.Errorf("commit rewrite: %w", err)
		}
		// Lost a race with a commit that landed after our load, or the
		// catalog did not apply the commit: classify what landed and try
		// again on the new head.
	}
}

// newSince drops from since the snapshots an earlier rebase already listed.
func newSince(since []InterveningSnapshot, earlier []Rebase) []InterveningSnapshot {
	seen := map[int64]bool{}
	for _, r := range earlier {
		for _, s := range r.Snapshots {
			seen[s.ID] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(since), func(s InterveningSnapshot) bool { return seen[s.ID] })
}

// commitReplanned commits the transaction plan builds on the current head.
// It is the rebase of the metadata-only types (manifest rewrite, snapshot
// expiry): when the table's metadata changed since the plan's base (the
// head moved, or a branch or tag was created or moved), the plan is made
// again on the new metadata — a manifest rewrite then carries the entries the
// new snapshots added, and an expiry sees the snapshot that became current
// and any branch or tag created meanwhile — at most maxRebases times. A
// head that does not descend from the base (rollback, drop, re-creation)
// ends the type ended-drift. Hooks.BeforeCommit runs before every attempt,
// and the table is loaded once more after it. What can still slip in
// unseen is a change that lands during the commit's own round trip; for an
// expiry that is a branch or tag created on a snapshot it removes, which
// iceberg-go's RemoveSnapshots drops with the snapshot (refs the plan saw
// are pinned, see planExpiry; a new one cannot be named in a requirement).
func (s *stepState) commitReplanned(ctx context.Context, plan func(cur *table.Table) (*table.Transaction, error)) (*table.Table, []Rebase, error) {
	cur := s.tbl
	var rebases []Rebase
	var attempts []staged
	for attempt := 0; ; attempt++ {
		txn, err := plan(cur)
		if err != nil {
			return nil, rebases, err
		}
		fresh, err := s.fenceAndLoad(ctx)
		if err != nil {
			return nil, rebases, err
		}
		if landedIn(fresh, attempts) {
			// An earlier attempt whose answer was lost landed late.
			s.lostAnswers++
			return fresh, rebases, nil
		}
		if moved, err := s.headMoved(cur, fresh, &rebases); err != nil {
			return nil, rebases, err
		} else if moved {
			if attempt >= maxRebases {
				return nil, rebases, &conflictError{fmt.Sprintf("the table kept changing: gave up after %d rebases", len(rebases))}
			}
			cur = recordingTable(fresh, s.r.cat, s.rec)
			continue
		}
		a, err := stage(cur, txn)
		if err != nil {
			return nil, rebases, fmt.Errorf("stage commit: %w", err)
		}
		attempts = append(attempts, a)
		tbl, err := txn.Commit(ctx)
		if err == nil {
			return tbl, rebases, nil
		}
		after, landed, retry := s.afterFailedCommit(ctx, err, attempts)
		if landed {
			return after, rebases, nil
		}
		if !(isConflict(err) || retry) || attempt >= maxRebases {
			return nil, rebases, fmt.Errorf("commit: %w", err)
		}
		// Lost a race with a commit that landed after our check, or the
		// catalog did not apply the commit: plan again on the head the
		// table has now.
		if fresh = after; fresh == nil {
			if fresh, err = catalogs.LoadTable(ctx, s.r.cat, s.r.ident); err != nil {
				return nil, rebases, fmt.Errorf("load table after a lost commit race: %w", err)
			}
		}
		if _, err := s.headMoved(cur, fresh, &rebases); err != nil {
			return nil, rebases, err
		}
		cur = recordingTable(fresh, s.r.cat, s.rec)
	}
}

// headMoved reports whether fresh is other metadata than cur: a head that
// descends from cur's and differs, or the same head with other metadata
// (a branch or tag created or moved, properties, schema), recording the
// rebase (with the snapshots in between, from their summaries) in
// rebases. A head that does not descend is a drift error.
func (s *stepState) headMoved(cur, fresh *table.Table, rebases *[]Rebase) (bool, error) {
	if fresh.MetadataLocation() == cur.MetadataLocation() {
		return false, nil
	}
	d := drift.CheckTable(drift.BaseOf(cur), fresh)
	switch d.Kind {
	case drift.Unchanged:
		*rebases = append(*rebases, Rebase{From: d.HeadSnapshotID, To: d.HeadSnapshotID, Snapshots: []InterveningSnapshot{}})
		return true, nil
	case drift.Moved:
	default:
		return false, &driftError{d}
	}
	from := drift.BaseOf(cur).SnapshotID
	meta := fresh.Metadata()
	var snaps []InterveningSnapshot
	for _, snap := range snapshotsSince(meta, d.HeadSnapshotID, from) {
		is := InterveningSnapshot{ID: snap.SnapshotID}
		if snap.Summary != nil {
			is.Operation = string(snap.Summary.Operation)
			is.AddedDataFiles = summaryInt(snap.Summary.Properties, "added-data-files")
			is.AddedDeleteFiles = summaryInt(snap.Summary.Properties, "added-delete-files")
			is.RemovedDataFiles = summaryInt(snap.Summary.Properties, "deleted-data-files")
		}
		snaps = append(snaps, is)
	}
	*rebases = append(*rebases, Rebase{From: from, To: d.HeadSnapshotID, Snapshots: snaps})
	return true, nil
}

// snapshotsSince returns the snapshots from base (exclusive) to head
// (inclusive) along parent ids, oldest first; the caller has proved with
// drift.CheckTable that head descends from base.
func snapshotsSince(meta table.Metadata, head, base int64) []*table.Snapshot {
	var out []*table.Snapshot
	for _, id := range ancestors(meta, head) {
		if id == base {
			break
		}
		out = append(out, meta.SnapshotByID(id))
	}
	slices.Reverse(out)
	return out
}

func summaryInt(props iceberg.Properties, key string) int {
	n, _ := strconv.Atoi(props[key])
	return n
}

// rebasedText is the part of a done reason that says how many rebases the
// commit needed.
func rebasedText(rebases []Rebase) string {
	if len(rebases) == 0 {
		return ""
	}
	k := 0
	for _, r := range rebases {
		k += len(r.Snapshots)
	}
	return fmt.Sprintf(", rebased %d times over %d snapshots that landed meanwhile", len(rebases), k)
}

// fenceAndLoad runs the BeforeCommit gate (the fence) and then loads the
// table for the last look before a commit, so that the window in which a
// change can slip in unseen is the commit's own round trip.
func (s *stepState) fenceAndLoad(ctx context.Context) (*table.Table, error) {
	if h := s.r.opts.Hooks.BeforeCommit; h != nil {
		if err := h(ctx, s.t); err != nil {
			return nil, &hookError{"before commit", err}
		}
	}
	fresh, err := catalogs.LoadTable(ctx, s.r.cat, s.r.ident)
	if err != nil {
		return nil, fmt.Errorf("load table before commit: %w", err)
	}
	return fresh, nil
}
