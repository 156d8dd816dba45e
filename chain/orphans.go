package chain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	stdfs "io/fs"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tms-dev/tms/internal/location"
	"github.com/tms-dev/tms/policy"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// OrphanPlan is the TypeReport.Detail of orphan cleanup: exactly the files
// it deleted, or in a dry run would delete.
//
// SkippedLinks names the symbolic links the listing met and left alone
// (orphanlinks.go); it is absent when there were none.
//
// Scope is the policy's scope and ListedRoots the folders the plan covers
// (orphanscope.go). OutsideTablePaths counts the unreferenced files under
// the table location outside those folders, which the cleanup left alone
// whatever their age; it is absent when they were not counted (scope
// location lists nothing outside, and a table at a root does not list its
// location to count them). OtherTables names the roots of other tables
// found under the listed folders, which nothing was planned below
// (orphanforeign.go); ReferencedByOtherTables the other tables whose files
// under them were kept (orphanbrought.go).
type OrphanPlan struct {
	OlderThan         string       `json:"older_than"`
	Scope             string       `json:"scope"`
	ListedRoots       []string     `json:"listed_roots"`
	OutsideTablePaths *int         `json:"outside_table_paths,omitempty"`
	OtherTables       []OtherTable `json:"other_tables,omitempty"`
	// ReferencedByOtherTables names the other tables whose references
	// kept files under the listed folders (orphanbrought.go).
	ReferencedByOtherTables []OtherReference `json:"referenced_by_other_tables,omitempty"`
	Files                   []OrphanFile     `json:"files"`
	TotalBytes              int64            `json:"total_bytes"`
	SkippedLinks            *OrphanLinks     `json:"skipped_links,omitempty"`
}

// OrphanFile is one planned orphan.
type OrphanFile struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
}

// errOrphanGuard is wrapped by the error of a cleanup that the last guard
// aborted.
var errOrphanGuard = errors.New("orphan cleanup aborted, nothing deleted")

// cleanOrphans plans with TMS's own planner (planOrphans), runs the last
// guard over the plan, and deletes exactly that plan after checking that
// HEAD has not moved and the BeforeCommit hook.
//
// TMS does not use iceberg-go's Table.PlanOrphanFiles: it compares spellings
// that are not canonical (a relative listing against the absolute metadata
// paths a hadoop catalog reports, so it plans the current metadata.json and
// the whole metadata log of such a table), and it lists hidden files
// (.crc, _SUCCESS, _temporary/) that Iceberg Java never deletes. Wrapping it
// would not help: its plan would have to be re-checked against a second,
// canonical reference set, which means reading every manifest twice, and
// the guard needs that set anyway. ExecuteOrphanCleanup only takes
// iceberg-go's own plan, so deletion is TMS's too.
//
// A table with gc.enabled=false is skipped before anything is listed: the
// property says no file of the table may be deleted, and Iceberg Java's
// orphan removal refuses such a table too.
func (s *stepState) cleanOrphans(ctx context.Context, p policy.OrphanOptions, log *zap.Logger) (string, error) {
	if !GCEnabled(s.tbl.Properties()) {
		return "", skip{"table property gc.enabled=false: no file of this table may be deleted"}
	}
	fsys, err := s.tbl.FS(ctx)
	if err != nil {
		return "", err
	}
	canon, err := location.New(location.Options{EqualSchemes: p.EqualSchemes, EqualAuthorities: p.EqualAuthorities})
	if err != nil {
		return "", fmt.Errorf("plan orphan files: %w", err)
	}
	var registered []Neighbour
	if h := s.r.opts.Hooks.OtherTables; h != nil {
		if registered, err = h(ctx); err != nil {
			return "", fmt.Errorf("plan orphan files: read the other tables: %w", err)
		}
	}
	pl := orphanPlanner{
		registered: registered,
		canon:      canon,
		olderThan:  p.OlderThan,
		mismatch:   p.PrefixMismatch,
		scope:      p.Scope,
		warehouse:  s.r.opts.Warehouse,
	}
	plan, err := pl.plan(ctx, s.tbl, fsys)
	if shared := (sharedFolderError{}); errors.As(err, &shared) {
		return "", skip{shared.Error()}
	}
	if err != nil {
		return "", fmt.Errorf("plan orphan files: %w", err)
	}
	if err := plan.guard(); err != nil {
		return "", err
	}
	detail := plan.detail(p.OlderThan, cmp.Or(p.Scope, policy.OrphanScopeTablePaths))
	s.rep.Detail = detail
	if len(plan.files) == 0 {
		return "", skip{fmt.Sprintf("no orphan files older than %s%s", p.OlderThan, plan.summary())}
	}
	if s.r.opts.DryRun {
		return "", skip{fmt.Sprintf("dry run: would delete %d orphan files (%d bytes) older than %s%s", len(detail.Files), detail.TotalBytes, p.OlderThan, plan.summary())}
	}
	if err := s.gate(ctx); err != nil {
		return "", err
	}
	deleted, err := plan.execute(ctx, fsys)
	if len(deleted) < len(plan.files) {
		detail = plan.subset(deleted).detail(p.OlderThan, cmp.Or(p.Scope, policy.OrphanScopeTablePaths))
		s.rep.Detail = detail
	}
	if err != nil {
		return "", fmt.Errorf("delete orphan files (%d of %d deleted): %w", len(deleted), len(plan.files), err)
	}
	log.Info("deleted orphan files", zap.Int("files", len(deleted)), zap.Int64("bytes", detail.TotalBytes))
	return fmt.Sprintf("deleted %d orphan files (%d bytes) older than %s%s", len(deleted), detail.TotalBytes, p.OlderThan, plan.summary()), nil
}

// orphanPlanner finds the files under a table's location that it does not
// reference.
type orphanPlanner struct {
	canon     location.Normaliser
	olderThan time.Duration
	mismatch  table.PrefixMismatchMode
	// scope is policy.OrphanScopeTablePaths (also when empty) or
	// policy.OrphanScopeLocation; warehouse is the catalog's warehouse
	// location when the caller knows it, to recognise a table at its root.
	scope     string
	warehouse string
	// registered are the other tables the caller knows (Hooks.OtherTables).
	registered []Neighbour
}

// orphanPlan is a planned cleanup: the orphans, the reference set they
// were planned against (for the guard), and the links the listing (and
// later execute) skipped, for the detail.
type orphanPlan struct {
	files    []plannedOrphan
	refs     *orphanRefs
	location string
	links    *linkLog
	// roots are the folders the plan covers; outside counts the files
	// under the location outside them, nil when they were not counted.
	roots   []orphanRoot
	outside *int
	// others are the roots of other tables found under the listed folders
	// (orphanforeign.go), nothing below which is planned.
	others *otherSet
	// brought are the files under the listed folders that other tables
	// reference (orphanbrought.go).
	brought *broughtFiles
}

// plannedOrphan is one orphan: path is the listed spelling, the one deleted.
type plannedOrphan struct {
	path  string
	canon location.Canonical
	size  int64
}

// plan lists the files of the scope (orphanscope.go) older than olderThan
// that are not hidden (hiddenFilter), reading the reference set at the same
// time, and keeps those match finds unreferenced and that the metadata
// does not reference through a symbolic link either (keepLinked). Both
// sides go through the same canonicalization.
//
// With scope table-paths a table not at a root has its location listed
// once (a walk, or on an object store one flat listing) and each file
// classified by the root it lies under, which also counts the files
// outside them; roots outside the location are listed on their own. A
// table at a root has only its roots listed, after the references are
// read (the referenced folders are roots too): listing a bucket or the
// warehouse to count what is left alone would read every other table.
func (pl orphanPlanner) plan(ctx context.Context, tbl *table.Table, fsys iceio.IO) (*orphanPlan, error) {
	lister, ok := fsys.(iceio.ListableIO)
	if !ok {
		return nil, fmt.Errorf("file IO %T cannot list directories", fsys)
	}
	loc := tbl.Location()
	locCanon := pl.canon.Canon(loc)
	filter := newHiddenFilter(tbl.Metadata().PartitionSpecs())
	cutoff := time.Now().Add(-pl.olderThan)
	own := tableRoots(tbl, pl.canon)
	scopeLocation := pl.scope == policy.OrphanScopeLocation
	if scopeLocation {
		if err := checkLocationScope(loc, own, pl.canon, pl.warehouse); err != nil {
			return nil, err
		}
	}
	atRoot := rootKind(loc, pl.canon, pl.warehouse) != ""
	listLocation := scopeLocation || !atRoot

	var refs *orphanRefs
	var mu sync.Mutex
	var listed []listedFile
	collect := func(f listedFile) {
		mu.Lock()
		listed = append(listed, f)
		mu.Unlock()
	}
	links := &linkLog{}
	var outside []orphanRoot // the table's own roots outside its location
	for _, r := range own {
		if r.canon.Full != locCanon.Full && !r.canon.Under(locCanon) {
			outside = append(outside, r)
		}
	}
	outsideSet := newRootSet(outside)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		refs, err = pl.references(gctx, tbl, fsys)
		return err
	})
	if listLocation {
		// One listing at a time: the link log is not safe for concurrent
		// walks, and a walk is bound by the disk, not the CPU.
		g.Go(func() error {
			if err := listRoot(gctx, lister, loc, pl.canon, filter, links, collect); err != nil {
				return err
			}
			if scopeLocation {
				return nil
			}
			for _, r := range outsideSet.roots {
				if err := listRoot(gctx, lister, r.raw, pl.canon, filter, links, collect); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	var roots *rootSet
	var outsideCount *int
	if scopeLocation {
		roots = newRootSet([]orphanRoot{{raw: loc, canon: locCanon}})
	} else {
		roots = newRootSet(own)
		roots = newRootSet(append(slices.Clone(roots.roots), referencedRoots(refs, locCanon, roots, pl.canon)...))
		if !listLocation {
			for _, r := range roots.roots {
				if err := listRoot(ctx, lister, r.raw, pl.canon, filter, links, collect); err != nil {
					return nil, err
				}
			}
		} else {
			n := 0
			outsideCount = &n
		}
	}

	ownMeta := slices.Clone(refs.metaDirs)
	for _, r := range own {
		if r.why == table.WriteMetadataPathKey || r.why == metadataPathWhy {
			ownMeta = append(ownMeta, r.canon)
		}
	}
	others, err := otherTables(ctx, fsys, listed, refs, ownMeta, tbl.Metadata().TableUUID().String(), pl.canon)
	if err != nil {
		return nil, err
	}
	reg, err := registeredTables(pl.registered, loc, append(slices.Clone(roots.roots), outsideSet.roots...), pl.canon)
	if err != nil {
		return nil, err
	}
	brought, err := pl.broughtFiles(ctx, newRootSet(append(slices.Clone(roots.roots), outsideSet.roots...)))
	if err != nil {
		return nil, err
	}
	otherSet := newOtherSet(append(append(others, reg...), brought.unread...))

	var inScope []plannedOrphan
	seen := map[string]bool{}
	for _, f := range listed {
		c := pl.canon.Canon(f.path)
		if seen[c.Full] {
			continue // a file listed twice: under the location and an outside root
		}
		seen[c.Full] = true
		if o, ok := otherSet.under(c); ok {
			o.files++
			continue
		}
		if b, ok := brought.keeps(c); ok {
			b.files++
			continue
		}
		if _, ok := roots.under(c); !ok {
			if _, ref := refs.full[c.Full]; !ref && outsideCount != nil {
				*outsideCount++
			}
			continue
		}
		if !f.mtime.Before(cutoff) {
			continue
		}
		inScope = append(inScope, plannedOrphan{path: f.path, canon: c, size: f.size})
	}

	files, err := pl.match(inScope, refs, roots)
	if err != nil {
		return nil, err
	}
	files = links.keepLinked(files, refs, pl.canon)
	return &orphanPlan{files: files, refs: refs, location: loc, links: links, roots: roots.roots, outside: outsideCount, others: otherSet, brought: brought}, nil
}

// match returns the listed files that refs does not reference. A listed
// file whose path a reference names under another scheme or authority is
// an error, kept or an orphan as the prefix-mismatch mode says; an orphan
// not under one of the listed roots is an error.
func (pl orphanPlanner) match(listed []plannedOrphan, refs *orphanRefs, roots *rootSet) ([]plannedOrphan, error) {
	var out []plannedOrphan
	for _, f := range listed {
		if _, ok := refs.full[f.canon.Full]; ok {
			continue
		}
		other, ok := refs.byKey[f.canon.Key]
		if !ok && f.canon.Key != f.canon.Full {
			other, ok = refs.full[f.canon.Key]
		}
		if ok {
			switch pl.mismatch {
			case table.PrefixMismatchIgnore:
				continue
			case table.PrefixMismatchDelete:
			default:
				return nil, fmt.Errorf("prefix mismatch: listed %s and referenced %s are the same path under another scheme or authority "+
					"(map them with equal-schemes or equal-authorities, or set prefix-mismatch-mode to ignore or delete)", f.path, other)
			}
		}
		if _, ok := roots.under(f.canon); !ok {
			return nil, fmt.Errorf("planned orphan %s is not under a folder orphan cleanup lists", f.path)
		}
		out = append(out, f)
	}
	return out, nil
}

// guard is the last check before anything is deleted, independent of how
// the plan matched paths: the cleanup aborts whole, naming both paths, if a
// planned orphan is the current metadata file, has the base name of any
// referenced file, or is a metadata-shaped file (metadataShaped) in a
// metadata folder whose name, compression spelling aside, is that of the
// current metadata file or a metadata log entry. Iceberg file names carry
// UUIDs, so a real orphan never shares a referenced file's base name.
func (p *orphanPlan) guard() error {
	r := p.refs
	for _, o := range p.files {
		if t, ok := p.others.under(o.canon); ok {
			return fmt.Errorf("%w: planned orphan %s lies under %s, the root of another table", errOrphanGuard, o.path, t.raw)
		}
		if t, ok := p.brought.keeps(o.canon); ok {
			return fmt.Errorf("%w: planned orphan %s is referenced by table %s", errOrphanGuard, o.path, t.table)
		}
		if o.canon.Full == r.current.Full {
			return fmt.Errorf("%w: planned orphan %s is the current metadata file %s", errOrphanGuard, o.path, r.currentRaw)
		}
		base := path.Base(o.canon.Full)
		if ref, ok := r.base[base]; ok {
			return fmt.Errorf("%w: planned orphan %s has the base name of referenced file %s", errOrphanGuard, o.path, ref)
		}
		if !metadataShaped(base) {
			continue
		}
		dir := o.canon.Dir().Full
		inMeta := slices.ContainsFunc(r.metaDirs, func(m location.Canonical) bool { return m.Full == dir })
		if ref, ok := r.logged[metadataBase(base)]; ok && inMeta {
			return fmt.Errorf("%w: planned orphan %s is a metadata file named by the metadata log entry %s", errOrphanGuard, o.path, ref)
		}
	}
	return nil
}

// metadataShaped reports whether base is the name of a file Iceberg keeps
// in the metadata folder: a metadata.json (plain or gzip, in either
// spelling), version-hint.text, a manifest list (snap-*.avro) or a manifest
// (*-m<N>.avro).
func metadataShaped(base string) bool {
	switch {
	case base == "version-hint.text",
		strings.HasSuffix(base, ".metadata.json"),
		strings.HasSuffix(base, ".metadata.json.gz"),
		strings.HasPrefix(base, "snap-") && strings.HasSuffix(base, ".avro"):
		return true
	case strings.HasSuffix(base, ".avro"):
		i := strings.LastIndex(base, "-m")
		return i >= 0 && strings.Trim(base[i+2:len(base)-len(".avro")], "0123456789") == ""
	}
	return false
}

// metadataBase names a metadata.json without its compression spelling:
// v3.gz.metadata.json and v3.metadata.json.gz are v3.metadata.json.
func metadataBase(base string) string {
	if b, ok := strings.CutSuffix(base, ".gz.metadata.json"); ok {
		return b + ".metadata.json"
	}
	if b, ok := strings.CutSuffix(base, ".metadata.json.gz"); ok {
		return b + ".metadata.json"
	}
	return base
}

// execute deletes exactly the planned files, by their listed spelling,
// and returns those deleted. A file already gone counts as deleted. On the
// local FileIO it refuses, right before each Remove, a path that is a
// symbolic link (removeLocal): the listing never plans a link, but a file
// may have been replaced by one since.
func (p *orphanPlan) execute(ctx context.Context, fsys iceio.IO) ([]string, error) {
	paths := make([]string, len(p.files))
	for i, f := range p.files {
		paths[i] = f.path
	}
	if localIO(fsys) {
		if p.links == nil {
			p.links = &linkLog{}
		}
		return removeLocal(ctx, fsys, paths, p.links)
	}
	if b, ok := fsys.(iceio.BulkRemovableIO); ok {
		return b.DeleteFiles(ctx, paths)
	}
	var deleted []string
	var errs []error
	for _, f := range paths {
		if err := ctx.Err(); err != nil {
			return deleted, errors.Join(append(errs, err)...)
		}
		if err := fsys.Remove(f); err != nil && !errors.Is(err, stdfs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, f)
	}
	return deleted, errors.Join(errs...)
}

// subset returns the plan restricted to the listed paths in keep.
func (p *orphanPlan) subset(keep []string) *orphanPlan {
	set := make(map[string]bool, len(keep))
	for _, k := range keep {
		set[k] = true
	}
	out := *p
	out.files = slices.DeleteFunc(slices.Clone(p.files), func(f plannedOrphan) bool { return !set[f.path] })
	return &out
}

// summary is the suffix of the type's reason: the files left alone outside
// the table's paths, and the skipped links.
func (p *orphanPlan) summary() string {
	out := ""
	if p.outside != nil && *p.outside > 0 {
		out = fmt.Sprintf("; %d files under the location outside the table's paths, left alone", *p.outside)
	}
	if n, files := p.others.count(); n > 0 {
		tables := "other tables"
		if n == 1 {
			tables = "another table"
		}
		out += fmt.Sprintf("; %d files of %s under the table's folders, left alone", files, tables)
	}
	if n := p.brought.count(); n > 0 {
		out += fmt.Sprintf("; %d files other tables reference, left alone", n)
	}
	return out + p.links.summary()
}

// detail is the plan as the type's Detail reports it, paths spelled the way
// the table location spells them.
func (p *orphanPlan) detail(olderThan time.Duration, scope string) *OrphanPlan {
	d := &OrphanPlan{OlderThan: olderThan.String(), Scope: scope, ListedRoots: []string{}, OutsideTablePaths: p.outside,
		Files: []OrphanFile{}, SkippedLinks: p.links.report(p.location)}
	for _, r := range p.roots {
		d.ListedRoots = append(d.ListedRoots, asLocation(r.raw, p.location))
	}
	slices.Sort(d.ListedRoots)
	for _, t := range p.others.list() {
		d.OtherTables = append(d.OtherTables, OtherTable{Root: asLocation(t.raw, p.location), Mark: asLocation(t.mark, p.location), Why: t.why, Files: t.files})
	}
	d.ReferencedByOtherTables = p.brought.report()
	for _, f := range p.files {
		d.Files = append(d.Files, OrphanFile{Path: displayPath(f, p.location), SizeBytes: f.size})
		d.TotalBytes += f.size
	}
	return d
}

// displayPath spells a listed path for the report: a URI as listed; a
// local path absolute, as a file:// URL when the location is a file: URI
// (iceberg-go's local FileIO lists plain OS paths under a file:// location).
func displayPath(f plannedOrphan, loc string) string {
	if strings.Contains(f.path, "://") {
		return f.path
	}
	if location.Scheme(loc) == "file" {
		return "file://" + f.canon.Full
	}
	return f.canon.Full
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
