package chain

import (
	"context"
	"fmt"

	"github.com/tms-dev/tms/policy"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"
)

// rewriteManifests merges many or small manifests with iceberg-go's
// Transaction.RewriteManifests when S0 has at least minManifestNumber
// manifests averaging under maxAvgManifestSizeBytes, or at least
// maxManifestNumber manifests of any size.
func (s *stepState) rewriteManifests(ctx context.Context, p policy.ManifestOptions, log *zap.Logger) (string, error) {
	m := s.s0.Metrics
	if s.s0.SnapshotID == 0 {
		return "", skip{"table has no snapshot"}
	}
	v := p.Decide(m)
	if !v.Work {
		return "", skip{v.Reason}
	}
	trigger := v.Reason
	if s.r.opts.DryRun {
		return "", skip{fmt.Sprintf("dry run: would rewrite %d manifests; %s", m.ManifestNumber, trigger)}
	}
	if err := s.startGate(ctx); err != nil {
		return "", err
	}
	fs, err := s.tbl.FS(ctx)
	if err != nil {
		return "", err
	}
	detail := &ManifestRewriteDetail{}
	var res *table.RewriteManifestsResult
	plan := func(cur *table.Table) (*table.Transaction, error) {
		txn := cur.NewTransaction()
		var err error
		if res, err = txn.RewriteManifests(ctx, table.WithManifestTargetSize(p.TargetManifestSize)); err != nil {
			return nil, fmt.Errorf("rewrite manifests: %w", err)
		}
		if res.IsNoOp() {
			return nil, skip{fmt.Sprintf("%s, but iceberg-go found nothing to merge (%s)", trigger, res.NoOpReason)}
		}
		detail.RewrittenManifests, detail.AddedManifests = len(res.RewrittenManifests), len(res.AddedManifests)
		staged, err := txn.StagedTable()
		if err != nil {
			return nil, fmt.Errorf("stage manifest rewrite: %w", err)
		}
		if detail.Verified, err = verifyManifestRewrite(ctx, fs, cur.CurrentSnapshot(), staged.CurrentSnapshot()); err != nil {
			return nil, err
		}
		return txn, nil
	}
	tbl, rebases, err := s.commitReplanned(ctx, plan)
	detail.Rebases = rebases
	if err != nil {
		return "", err
	}
	s.rep.Detail = detail
	s.committed(tbl)
	log.Info("rewrote manifests", zap.Int("rewritten", len(res.RewrittenManifests)), zap.Int("added", len(res.AddedManifests)))
	return fmt.Sprintf("%s: merged %d manifests into %d%s", trigger, len(res.RewrittenManifests), len(res.AddedManifests), rebasedText(rebases)), nil
}

// manifestCount is used by tests and reports: the number of manifests of
// the current snapshot of tbl.
func manifestCount(tbl *table.Table) (int, error) {
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return 0, nil
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		return 0, err
	}
	var mans []iceberg.ManifestFile
	mans, err = snap.Manifests(fs)
	return len(mans), err
}
