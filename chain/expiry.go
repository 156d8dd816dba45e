package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tms-dev/tms/internal/location"
	"github.com/tms-dev/tms/policy"

	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"
)

// expire expires snapshots with iceberg-go's Transaction.ExpireSnapshots.
//
// Retention comes from the policy (older-than / retain-last, top level or
// in rewriteOptions) and otherwise from the table's history.expire.*
// properties (Iceberg's defaults: 5 days, keep 1). Files no longer
// referenced are deleted after the commit unless clean-expired-files is
// false.
//
// A file is planned for deletion only when no retained snapshot references
// it under any spelling (package internal/location; expiry_deletes.go): a
// file one writer wrote as file:///p or s3a:// and another re-added as
// file:/p or s3:// is one object. When a retained snapshot references a
// planned file under another spelling, the policy's prefix-mismatch-mode
// decides: error (the default) fails the type before it commits; ignore
// and delete keep the file and expire.
//
// Snapshots from Hooks.ProtectedSnapshots are never expired: when one would
// be, and it is an ancestor of main at depth d, retain-last is raised to d+1
// so the walk keeps it; if one would still be expired (it is on no retained
// branch) the type is skipped with the reason, so another job's S0 is never
// taken away.
func (s *stepState) expire(ctx context.Context, p policy.ExpiryOptions, log *zap.Logger) (string, error) {
	if s.s0.SnapshotID == 0 {
		return "", skip{"table has no snapshot"}
	}
	var protected []int64
	if h := s.r.opts.Hooks.ProtectedSnapshots; h != nil {
		var err error
		if protected, err = h(ctx); err != nil {
			return "", fmt.Errorf("protected snapshots: %w", err)
		}
	}
	if !s.r.opts.DryRun {
		if err := s.startGate(ctx); err != nil {
			return "", err
		}
	}
	fs, err := s.tbl.FS(ctx)
	if err != nil {
		return "", err
	}
	canon, err := location.New(location.Options{EqualSchemes: p.EqualSchemes, EqualAuthorities: p.EqualAuthorities})
	if err != nil {
		return "", fmt.Errorf("snapshot expiry: %w", err)
	}
	x := newRefIndex(fs)
	var expired []int64
	var retain int64
	var total int
	var planned []string
	var kept expiryFiles
	plan := func(cur *table.Table) (*table.Transaction, error) {
		txn, ex, r, err := s.planExpiry(cur, p, protected, log)
		expired, retain, total = ex, r, len(cur.Metadata().Snapshots())
		if err != nil {
			return nil, err
		}
		desc := retentionString(p, retain)
		if len(expired) == 0 {
			return nil, skip{"nothing to expire with " + desc}
		}
		if s.r.opts.DryRun {
			return nil, skip{fmt.Sprintf("dry run: would expire %d of %d snapshots with %s", len(expired), total, desc)}
		}
		if p.CleanExpiredFiles && GCEnabled(cur.Properties()) {
			staged, err := txn.StagedTable()
			if err != nil {
				return nil, fmt.Errorf("stage snapshot expiry: %w", err)
			}
			ef, err := expiryPlan(ctx, x, canon, cur.Metadata(), staged.Metadata())
			if err != nil {
				return nil, fmt.Errorf("plan the files to delete: %w", err)
			}
			if err := ef.check(p.PrefixMismatch, log); err != nil {
				return nil, err
			}
			kept = ef
			files := ef.delete
			if h := s.r.opts.Hooks.PlanDeletes; h != nil && len(files) > 0 {
				if err := h(ctx, files); err != nil {
					return nil, &hookError{"record the deletion plan", err}
				}
			}
			planned = mergeSorted(planned, files)
		}
		return txn, nil
	}
	tbl, rebases, err := s.commitReplanned(ctx, plan)
	if err != nil {
		return "", err
	}
	s.committed(tbl)
	detail := &ExpiryDetail{ExpiredSnapshots: expired, Rebases: rebases, PlannedDeletes: len(planned),
		KeptRespelled: len(kept.respelled), KeptUnparsable: len(kept.unparsable)}
	s.rep.Detail = detail
	reason := fmt.Sprintf("expired %d of %d snapshots with %s%s", len(expired), total, retentionString(p, retain), rebasedText(rebases))
	if n := len(kept.respelled); n > 0 {
		reason += fmt.Sprintf("; kept %d files retained snapshots reference under another spelling", n)
	}
	if n := len(kept.unparsable); n > 0 {
		reason += fmt.Sprintf("; kept %d files whose location cannot be parsed", n)
	}
	if len(planned) == 0 {
		return reason, nil
	}
	deleted, referenced, derr := deletePlanned(ctx, x, canon, tbl, planned, s.r.opts.Hooks.FileDeleted)
	detail.DeletedFiles = len(deleted)
	if h := s.r.opts.Hooks.DeletesDone; h != nil {
		if err := h(ctx, slices.Concat(deleted, referenced)); err != nil {
			derr = errors.Join(derr, err)
		}
	}
	reason += fmt.Sprintf("; deleted %d files only they referenced", len(deleted))
	if derr != nil {
		// The expiry landed; what is left of the plan is finished by the
		// next run of the table.
		reason += fmt.Sprintf("; %d deletions left for the next run: %v", len(planned)-len(deleted)-len(referenced), derr)
		log.Warn("snapshot expiry deletions", zap.Error(derr))
	}
	return reason, nil
}

// mergeSorted returns the sorted union of two sorted path lists.
func mergeSorted(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// ExpiryDetail is the TypeReport.Detail of a snapshot expiry that
// committed.
type ExpiryDetail struct {
	ExpiredSnapshots []int64 `json:"expired_snapshots"`
	// PlannedDeletes counts the files only the expired snapshots
	// referenced (recorded with Hooks.PlanDeletes before the commit);
	// DeletedFiles those deleted after it.
	PlannedDeletes int `json:"planned_deletes"`
	DeletedFiles   int `json:"deleted_files"`
	// KeptRespelled counts the files only the expired snapshots reference
	// under their spelling that a retained snapshot references under
	// another (the same object, or the same path under a scheme or
	// authority no equivalence maps), kept because prefix-mismatch-mode is
	// ignore or delete; with error the type fails instead.
	KeptRespelled int `json:"kept_respelled"`
	// KeptUnparsable counts the files only the expired snapshots reference
	// whose location cannot be parsed (location.ErrUnparsable): they may
	// be live under a spelling TMS cannot compare, so they are kept.
	KeptUnparsable int `json:"kept_unparsable"`
	// Rebases lists the times the expiry was planned again on a head that
	// had moved (see Rebase).
	Rebases []Rebase `json:"rebases,omitempty"`
}

// planExpiry stages an expiry on cur and returns it with the snapshots it
// expires and the retain-last it used: the policy's, raised so that no
// protected snapshot on main's ancestry is expired.
func (s *stepState) planExpiry(cur *table.Table, p policy.ExpiryOptions, protected []int64, log *zap.Logger) (*table.Transaction, []int64, int64, error) {
	meta := cur.Metadata()
	depth := map[int64]int{}
	if head := cur.CurrentSnapshot(); head != nil {
		for i, snap := range ancestors(meta, head.SnapshotID) {
			depth[snap] = i
		}
	}
	retain := p.RetainLast
	for {
		var opts []table.ExpireSnapshotsOpt
		if p.HasOlderThan {
			opts = append(opts, table.WithOlderThan(p.OlderThan))
		}
		if retain > 0 {
			opts = append(opts, table.WithRetainLast(int(retain)))
		}
		// The files only the expired snapshots referenced are deleted by
		// the chain (expiry_deletes.go), after recording the plan.
		opts = append(opts, table.WithPostCommit(false))
		txn := cur.NewTransaction()
		// iceberg-go's RemoveSnapshots drops, without a word, every ref
		// that points at a removed snapshot, against the metadata the
		// catalog holds at commit time: pin every ref this plan saw, so a
		// branch or tag moved meanwhile fails the commit (and the plan is
		// made again) instead of being dropped.
		for name := range meta.Refs() {
			if err := txn.AssertRefSnapshotID(name); err != nil {
				return nil, nil, retain, fmt.Errorf("pin ref %s: %w", name, err)
			}
		}
		if err := txn.ExpireSnapshots(opts...); err != nil {
			return nil, nil, retain, fmt.Errorf("expire snapshots: %w", err)
		}
		staged, err := txn.StagedTable()
		if err != nil {
			return nil, nil, retain, fmt.Errorf("stage snapshot expiry: %w", err)
		}
		var expired []int64
		for _, snap := range meta.Snapshots() {
			if staged.Metadata().SnapshotByID(snap.SnapshotID) == nil {
				expired = append(expired, snap.SnapshotID)
			}
		}
		need := retain
		var stuck []int64
		for _, id := range protected {
			if !slices.Contains(expired, id) {
				continue
			}
			if d, ok := depth[id]; ok {
				need = max(need, int64(d+1))
			} else {
				stuck = append(stuck, id)
			}
		}
		if len(stuck) > 0 {
			return nil, nil, retain, skip{fmt.Sprintf("would expire snapshots %v that other jobs planned from and that no branch keeps; not expiring", stuck)}
		}
		if need == retain {
			return txn, expired, retain, nil
		}
		log.Info("raising retain-last to keep protected snapshots", zap.Int64("retain_last", need))
		retain = need
	}
}

func retentionString(p policy.ExpiryOptions, retain int64) string {
	older := "older-than from table property history.expire.max-snapshot-age-ms"
	if p.HasOlderThan {
		older = "older-than " + p.OlderThan.String()
	}
	keep := "retain-last from table property history.expire.min-snapshots-to-keep"
	if retain > 0 {
		keep = fmt.Sprintf("retain-last %d", retain)
	}
	return older + ", " + keep
}

// ancestors returns the snapshot ids from id back along parent ids, id
// first, stopping at a snapshot the metadata no longer has.
func ancestors(meta table.Metadata, id int64) []int64 {
	var out []int64
	for seen := map[int64]bool{}; !seen[id]; {
		snap := meta.SnapshotByID(id)
		if snap == nil {
			break
		}
		seen[id] = true
		out = append(out, id)
		if snap.ParentSnapshotID == nil {
			break
		}
		id = *snap.ParentSnapshotID
	}
	return out
}
