package chain

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"
)

// OrphanPlan is the TypeReport.Detail of orphan cleanup: exactly the files
// it deleted, or in a dry run would delete.
type OrphanPlan struct {
	OlderThan  string       `json:"older_than"`
	Files      []OrphanFile `json:"files"`
	TotalBytes int64        `json:"total_bytes"`
}

// OrphanFile is one planned orphan.
type OrphanFile struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
}

// cleanOrphans plans with iceberg-go's Table.PlanOrphanFiles (every file
// under the table location older than older-than that no metadata file,
// manifest list, manifest, statistics file or metadata log entry
// references; a referenced file whose scheme or authority differs from the
// listing is an error) and then deletes exactly that plan with
// Table.ExecuteOrphanCleanup, after checking each planned path lies under
// the table location, that HEAD has not moved, and the BeforeCommit hook.
func (s *stepState) cleanOrphans(ctx context.Context, p orphanPolicy, log *zap.Logger) (string, error) {
	plan, err := s.tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(p.olderThan),
		table.WithPrefixMismatchMode(table.PrefixMismatchError))
	if err != nil {
		return "", fmt.Errorf("plan orphan files: %w", err)
	}
	loc := s.tbl.Location()
	detail := &OrphanPlan{OlderThan: p.olderThan.String(), TotalBytes: plan.TotalSizeBytes(), Files: []OrphanFile{}}
	for _, f := range plan.OrphanFiles() {
		p := asLocation(f.Path, loc)
		if !strings.HasPrefix(p, strings.TrimSuffix(loc, "/")+"/") {
			return "", fmt.Errorf("planned orphan %s is not under the table location %s", f.Path, loc)
		}
		detail.Files = append(detail.Files, OrphanFile{Path: p, SizeBytes: f.SizeBytes})
	}
	s.rep.Detail = detail
	if len(detail.Files) == 0 {
		return "", skip{fmt.Sprintf("no orphan files older than %s", p.olderThan)}
	}
	if s.r.opts.DryRun {
		return "", skip{fmt.Sprintf("dry run: would delete %d orphan files (%d bytes) older than %s", len(detail.Files), detail.TotalBytes, p.olderThan)}
	}
	if err := s.gate(ctx); err != nil {
		return "", err
	}
	res, err := s.tbl.ExecuteOrphanCleanup(ctx, plan)
	if err != nil {
		return "", fmt.Errorf("delete orphan files: %w", err)
	}
	log.Info("deleted orphan files", zap.Int("files", len(res.DeletedFiles)), zap.Int64("bytes", detail.TotalBytes))
	return fmt.Sprintf("deleted %d orphan files (%d bytes) older than %s", len(res.DeletedFiles), detail.TotalBytes, p.olderThan), nil
}

// asLocation spells a listed path the way the table location spells it:
// iceberg-go's local FileIO lists plain OS paths under a file:// location.
func asLocation(p, loc string) string {
	if strings.Contains(p, "://") {
		return p
	}
	if u, err := url.Parse(loc); err == nil && u.Scheme == "file" && strings.HasPrefix(p, "/") {
		return "file://" + p
	}
	return p
}
