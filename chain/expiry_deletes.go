package chain

import (
	"context"
	"errors"
	"fmt"
	stdfs "io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Snapshot expiry deletes the files only the expired snapshots referenced
// itself instead of through iceberg-go's post-commit step, so that the
// deletion is planned, recorded and finishable: the plan (pre's references
// minus post's) goes to Hooks.PlanDeletes before the commit, each planned
// file is deleted after it only if the committed metadata no longer
// references it, and Hooks.DeletesDone clears what was handled. A runner
// that dies in between leaves the plan in the ledger; the next Run of the
// table finishes it first (finishPendingDeletes), deleting only what is
// still unreferenced by every snapshot, branch and tag, and dropping the
// rest. gc.enabled=false deletes nothing, as in Iceberg.

// refIndex reads manifests at most once per path and collects what a set
// of snapshots references.
type refIndex struct {
	fs iceio.IO
	mu sync.Mutex
	// entries maps a manifest path to the files its entries name.
	entries map[string][]string
}

func newRefIndex(fs iceio.IO) *refIndex {
	return &refIndex{fs: fs, entries: map[string][]string{}}
}

// refs returns every file meta's snapshots not in skip reference: manifest
// lists, manifests, the files their entries name (any status, so that a
// file a retained snapshot deleted is kept until that snapshot expires too;
// and the data file a deletion vector names), statistics and partition
// statistics files.
func (x *refIndex) refs(ctx context.Context, meta table.Metadata, skip map[int64]bool) (map[string]bool, error) {
	out := map[string]bool{}
	for st := range meta.Statistics() {
		out[st.StatisticsPath] = true
	}
	for st := range meta.PartitionStatistics() {
		out[st.StatisticsPath] = true
	}
	var manifests []iceberg.ManifestFile
	seen := map[string]bool{}
	for _, snap := range meta.Snapshots() {
		if skip[snap.SnapshotID] {
			continue
		}
		out[snap.ManifestList] = true
		mans, err := snap.Manifests(x.fs)
		if err != nil {
			return nil, fmt.Errorf("read manifest list %s: %w", snap.ManifestList, err)
		}
		for _, m := range mans {
			if !seen[m.FilePath()] {
				seen[m.FilePath()] = true
				manifests = append(manifests, m)
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, m := range manifests {
		g.Go(func() error {
			_, err := x.files(gctx, m)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, m := range manifests {
		out[m.FilePath()] = true
		files, _ := x.files(ctx, m)
		for _, f := range files {
			out[f] = true
		}
	}
	return out, nil
}

// tableRefs is refs of tbl's metadata plus its metadata files (the
// current one and the metadata log).
func (x *refIndex) tableRefs(ctx context.Context, tbl *table.Table, skip map[int64]bool) (map[string]bool, error) {
	refs, err := x.refs(ctx, tbl.Metadata(), skip)
	if err != nil {
		return nil, err
	}
	refs[tbl.MetadataLocation()] = true
	for e := range tbl.Metadata().PreviousFiles() {
		refs[e.MetadataFile] = true
	}
	return refs, nil
}

// files returns the files m's entries name, reading m the first time.
func (x *refIndex) files(ctx context.Context, m iceberg.ManifestFile) ([]string, error) {
	x.mu.Lock()
	files, ok := x.entries[m.FilePath()]
	x.mu.Unlock()
	if ok {
		return files, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	entries, err := m.FetchEntries(x.fs, false)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
	}
	files = make([]string, 0, len(entries))
	for _, e := range entries {
		df := e.DataFile()
		files = append(files, df.FilePath())
		if ref := df.ReferencedDataFile(); ref != nil && *ref != "" {
			files = append(files, *ref)
		}
	}
	x.mu.Lock()
	x.entries[m.FilePath()] = files
	x.mu.Unlock()
	return files, nil
}

// gcEnabled reports the table property gc.enabled (default true).
func gcEnabled(props iceberg.Properties) bool {
	return !strings.EqualFold(strings.TrimSpace(props["gc.enabled"]), "false")
}

// expiryPlan returns the files pre's snapshots reference that post's do
// not, sorted.
func expiryPlan(ctx context.Context, x *refIndex, pre, post table.Metadata) ([]string, error) {
	was, err := x.refs(ctx, pre, nil)
	if err != nil {
		return nil, err
	}
	now, err := x.refs(ctx, post, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for f := range was {
		if f != "" && !now[f] {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out, nil
}

// deletePlanned deletes the planned files that tbl no longer references
// (its snapshots as refIndex.refs counts them, and its metadata files) and
// returns those deleted and those found referenced. Files already gone
// count as deleted.
func deletePlanned(ctx context.Context, x *refIndex, tbl *table.Table, planned []string, onDelete func(string)) (deleted, referenced []string, err error) {
	refs, err := x.tableRefs(ctx, tbl, nil)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, f := range planned {
		if refs[f] {
			referenced = append(referenced, f)
			continue
		}
		if err := ctx.Err(); err != nil {
			return deleted, referenced, err
		}
		if err := x.fs.Remove(f); err != nil && !errors.Is(err, stdfs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, f)
		if onDelete != nil {
			onDelete(f)
		}
	}
	return deleted, referenced, errors.Join(errs...)
}

// finishPendingDeletes finishes the deletion plan an earlier run of the
// table left in the ledger (Hooks.PendingDeletes), before any type runs.
// It returns how many files it deleted.
func (r *runner) finishPendingDeletes(ctx context.Context) (int, error) {
	h := r.opts.Hooks
	if h.PendingDeletes == nil || r.opts.DryRun {
		return 0, nil
	}
	pending, err := h.PendingDeletes(ctx)
	if err != nil || len(pending) == 0 {
		return 0, err
	}
	tbl, err := r.cat.LoadTable(ctx, r.ident)
	if err != nil {
		return 0, fmt.Errorf("load table to finish %d pending deletes: %w", len(pending), err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return 0, err
	}
	deleted, referenced, err := deletePlanned(ctx, newRefIndex(fs), tbl, pending, nil)
	if h.DeletesDone != nil {
		if derr := h.DeletesDone(ctx, slices.Concat(deleted, referenced)); derr != nil {
			err = errors.Join(err, derr)
		}
	}
	r.log.Info("finished the deletion plan of an earlier snapshot expiry", zap.Int("planned", len(pending)),
		zap.Int("deleted", len(deleted)), zap.Int("still_referenced", len(referenced)), zap.Error(err))
	return len(deleted), err
}
