package chain

import (
	"context"
	"fmt"
	"slices"

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
// Snapshots from Hooks.ProtectedSnapshots are never expired: when one would
// be, and it is an ancestor of main at depth d, retain-last is raised to d+1
// so the walk keeps it; if one would still be expired (it is on no retained
// branch) the type is skipped with the reason, so another job's S0 is never
// taken away.
func (s *stepState) expire(ctx context.Context, p expiryPolicy, log *zap.Logger) (string, error) {
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
	meta := s.tbl.Metadata()
	depth := map[int64]int{}
	for i, snap := range ancestors(meta, s.s0.SnapshotID) {
		depth[snap] = i
	}
	retain := p.retainLast
	var txn *table.Transaction
	var expired []int64
	for {
		var opts []table.ExpireSnapshotsOpt
		if p.hasOlder {
			opts = append(opts, table.WithOlderThan(p.olderThan))
		}
		if retain > 0 {
			opts = append(opts, table.WithRetainLast(int(retain)))
		}
		opts = append(opts, table.WithPostCommit(p.cleanFiles))
		txn = s.tbl.NewTransaction()
		if err := txn.ExpireSnapshots(opts...); err != nil {
			return "", fmt.Errorf("expire snapshots: %w", err)
		}
		staged, err := txn.StagedTable()
		if err != nil {
			return "", fmt.Errorf("stage snapshot expiry: %w", err)
		}
		expired = expired[:0]
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
			return "", skip{fmt.Sprintf("would expire snapshots %v that other jobs planned from and that no branch keeps; not expiring", stuck)}
		}
		if need == retain {
			break
		}
		log.Info("raising retain-last to keep protected snapshots", zap.Int64("retain_last", need))
		retain = need
	}
	desc := retentionString(p, retain)
	if len(expired) == 0 {
		return "", skip{"nothing to expire with " + desc}
	}
	if s.r.opts.DryRun {
		return "", skip{fmt.Sprintf("dry run: would expire %d of %d snapshots with %s", len(expired), len(meta.Snapshots()), desc)}
	}
	if err := s.gate(ctx); err != nil {
		return "", err
	}
	tbl, err := txn.Commit(ctx)
	if err != nil {
		return "", fmt.Errorf("commit snapshot expiry: %w", err)
	}
	s.committed(tbl)
	s.rep.Detail = map[string]any{"expired_snapshots": expired}
	return fmt.Sprintf("expired %d of %d snapshots with %s", len(expired), len(meta.Snapshots()), desc), nil
}

func retentionString(p expiryPolicy, retain int64) string {
	older := "older-than from table property history.expire.max-snapshot-age-ms"
	if p.hasOlder {
		older = "older-than " + p.olderThan.String()
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
