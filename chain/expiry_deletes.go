package chain

import (
	"context"
	"errors"
	"fmt"
	stdfs "io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/tms-dev/tms/internal/location"

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
//
// "Referenced" is decided by canonical location (package
// internal/location), never by the raw string: a file an expired snapshot
// names as file:///p or s3a://b/k and a retained one as file:/p or
// s3://b/k is one object, and deleting it would leave the retained
// snapshot unreadable. A planned file is deleted only when no retained
// reference has its path under any spelling, scheme or authority, and its
// location parses; the plan, the final check against the committed table
// and the finishing of an earlier plan all apply that rule.

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

// GCEnabled reports the table property gc.enabled (default true): false
// only when it says "false" (any case, spaces around), as Iceberg Java's
// PropertyUtil reads it. Everything that asks whether a table's files may
// be deleted asks here, the ledger's record of it included.
func GCEnabled(props iceberg.Properties) bool {
	return !strings.EqualFold(strings.TrimSpace(props["gc.enabled"]), "false")
}

// expiryFiles is what an expiry plans for the files pre's snapshots
// reference and post's do not under the same spelling.
type expiryFiles struct {
	// delete are the files no retained reference names under any
	// spelling, sorted: the deletion plan.
	delete []string
	// respelled are the files a retained reference names under another
	// spelling, by file.
	respelled []respelling
	// unparsable are the files whose location cannot be parsed, sorted;
	// they are kept.
	unparsable []string
}

// respelling is a file only expired snapshots reference under its
// spelling and a retained snapshot under another.
type respelling struct {
	file, retained string
	// samePath says the two are the same path under a scheme or
	// authority no equivalence maps, not the same object for certain.
	samePath bool
}

func (r respelling) String() string {
	if r.samePath {
		return fmt.Sprintf("%s has the path of retained %s under another scheme or authority", r.file, r.retained)
	}
	return fmt.Sprintf("%s is the same object as retained %s", r.file, r.retained)
}

// expiryPlan compares what pre's snapshots reference with what post's do,
// by canonical location (canon): a file post references under the same
// spelling is kept silently, one it references under another spelling is
// a respelling, one whose location does not parse is kept, the rest is
// the deletion plan.
func expiryPlan(ctx context.Context, x *refIndex, canon location.Normaliser, pre, post table.Metadata) (expiryFiles, error) {
	was, err := x.refs(ctx, pre, nil)
	if err != nil {
		return expiryFiles{}, err
	}
	now, err := x.refs(ctx, post, nil)
	if err != nil {
		return expiryFiles{}, err
	}
	live := liveSet(canon, now)
	var out expiryFiles
	for f := range was {
		if f == "" || now[f] {
			continue
		}
		if other, ok := live.Lookup(f); ok {
			out.respelled = append(out.respelled, respelling{file: f, retained: other})
			continue
		}
		if other, ok := live.LookupPath(f); ok {
			out.respelled = append(out.respelled, respelling{file: f, retained: other, samePath: true})
			continue
		}
		if _, err := canon.Parse(f); err != nil {
			out.unparsable = append(out.unparsable, f)
			continue
		}
		out.delete = append(out.delete, f)
	}
	slices.Sort(out.delete)
	slices.Sort(out.unparsable)
	slices.SortFunc(out.respelled, func(a, b respelling) int { return strings.Compare(a.file, b.file) })
	return out, nil
}

// liveSet returns the references refs keyed by canonical location.
func liveSet(canon location.Normaliser, refs map[string]bool) *location.Set {
	live := canon.NewSet()
	for f := range refs {
		live.Add(f)
	}
	return live
}

// check applies the prefix-mismatch mode to the files a retained snapshot
// references under another spelling: error (iceberg-go's and Spark's
// default) fails the type before it commits, naming both spellings of up
// to five of them; ignore keeps them, and so does delete, because an
// expiry never deletes a file a retained snapshot may read. Kept files and
// unparsable locations are logged.
func (ef expiryFiles) check(mode table.PrefixMismatchMode, log *zap.Logger) error {
	const shown = 5
	var pairs []string
	for _, r := range ef.respelled[:min(len(ef.respelled), shown)] {
		pairs = append(pairs, r.String())
	}
	if len(ef.respelled) > shown {
		pairs = append(pairs, fmt.Sprintf("and %d more", len(ef.respelled)-shown))
	}
	if len(ef.respelled) > 0 && mode == table.PrefixMismatchError {
		return fmt.Errorf("%d files only the expired snapshots reference are referenced by retained snapshots under another spelling: %s; "+
			"nothing expired or deleted (map schemes or authorities that name the same storage with equal-schemes or equal-authorities, "+
			"or set prefix-mismatch-mode to ignore to keep such files and expire)", len(ef.respelled), strings.Join(pairs, "; "))
	}
	if len(ef.respelled) > 0 {
		log.Warn("keeping files retained snapshots reference under another spelling",
			zap.Int("files", len(ef.respelled)), zap.Strings("examples", pairs))
	}
	if len(ef.unparsable) > 0 {
		log.Warn("keeping files whose location cannot be parsed", zap.Int("files", len(ef.unparsable)),
			zap.Strings("examples", ef.unparsable[:min(len(ef.unparsable), shown)]))
	}
	return nil
}

// deletePlanned deletes the planned files that tbl no longer references
// (its snapshots as refIndex.refs counts them, and its metadata files)
// under any spelling (location.Set.LookupPath: the same object, or the
// same path under another scheme or authority) and whose location canon
// can parse, and returns those deleted and those kept as referenced.
// Files already gone count as deleted.
func deletePlanned(ctx context.Context, x *refIndex, canon location.Normaliser, tbl *table.Table, planned []string, onDelete func(string)) (deleted, referenced []string, err error) {
	refs, err := x.tableRefs(ctx, tbl, nil)
	if err != nil {
		return nil, nil, err
	}
	live := liveSet(canon, refs)
	var errs []error
	for _, f := range planned {
		_, perr := canon.Parse(f)
		if _, ok := live.LookupPath(f); ok || refs[f] || perr != nil {
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
	// The policy that planned these is not known here; the default
	// equivalences do, because deletePlanned keeps a file whose path any
	// reference names under any scheme or authority, mapped or not.
	canon, err := location.New(location.Options{})
	if err != nil {
		return 0, fmt.Errorf("finish %d pending deletes: %w", len(pending), err)
	}
	deleted, referenced, err := deletePlanned(ctx, newRefIndex(fs), canon, tbl, pending, nil)
	if h.DeletesDone != nil {
		if derr := h.DeletesDone(ctx, slices.Concat(deleted, referenced)); derr != nil {
			err = errors.Join(err, derr)
		}
	}
	r.log.Info("finished the deletion plan of an earlier snapshot expiry", zap.Int("planned", len(pending)),
		zap.Int("deleted", len(deleted)), zap.Int("still_referenced", len(referenced)), zap.Error(err))
	return len(deleted), err
}
