package chain

import (
	"context"
	"errors"
	"fmt"
	stdfs "io/fs"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/tms-dev/tms/internal/location"
	"github.com/tms-dev/tms/policy"
)

// What orphan cleanup lists.
//
// A table's location is not the table's own: Spark, Trino and iceberg-go
// let a table be created with a LOCATION inside another table's folder, a
// table may sit at the warehouse root or a bucket root with every other
// table below it, and exports land next to tables. Listing the whole
// location deleted all of those as this table's orphans. With the default
// scope, table-paths, orphan cleanup therefore lists only the folders the
// table writes to (tableRoots) and the folders under its location its
// metadata references a file in (referencedRoots); every other file under
// the location is left alone and counted, so an operator sees how much the
// cleanup did not look at. Scope location lists the whole location, as
// Iceberg Java does, for tables known to own their location; it is refused
// where that is certainly wrong (a table at a root) or cannot be right (a
// data or metadata path outside the location, which it would not list).

// Table properties naming where a table writes, beyond iceberg-go's
// WriteDataPathKey and WriteMetadataPathKey: Iceberg Java's deprecated
// object-storage and folder-storage data paths, which older writers of the
// table may have used (iceberg-go v0.7.0's LocationProvider reads only
// write.data.path, under both layouts).
const (
	objectStoragePathKey = "write.object-storage.path"
	folderStoragePathKey = "write.folder-storage.path"
)

// metadataPathWhy is the why of the default metadata root.
const metadataPathWhy = "the metadata path"

// orphanRoot is one folder orphan cleanup lists: its spelling (the one
// listed and reported) and canonical form.
type orphanRoot struct {
	raw   string
	canon location.Canonical
	// why names where the root comes from, for error messages.
	why string
}

// tableRoots returns the folders the table writes to, as iceberg-go's
// LocationProvider computes them: write.data.path or <location>/data,
// write.metadata.path or <location>/metadata, and Iceberg Java's
// write.object-storage.path and write.folder-storage.path when set.
func tableRoots(tbl *table.Table, c location.Normaliser) []orphanRoot {
	props := tbl.Properties()
	loc := strings.TrimSuffix(tbl.Location(), "/")
	var out []orphanRoot
	add := func(raw, why string) {
		raw = strings.TrimSuffix(raw, "/")
		out = append(out, orphanRoot{raw: raw, canon: c.Canon(raw), why: why})
	}
	if p := props[table.WriteDataPathKey]; p != "" {
		add(p, table.WriteDataPathKey)
	} else {
		add(loc+"/data", "the data path")
	}
	if p := props[table.WriteMetadataPathKey]; p != "" {
		add(p, table.WriteMetadataPathKey)
	} else {
		add(loc+"/metadata", metadataPathWhy)
	}
	for _, k := range []string{objectStoragePathKey, folderStoragePathKey} {
		if p := props[k]; p != "" {
			add(p, k)
		}
	}
	return out
}

// rootSet is a set of folders, nested ones dropped, that tells which of
// them a path lies under by walking the path's parents: a table with a
// folder per partition outside data/ has many roots, and a prefix test per
// root and file would be quadratic.
type rootSet struct {
	roots []orphanRoot
	byDir map[string]int
}

// newRootSet keeps, of roots, the first spelling of each folder and only
// the folders no other root contains: a metadata path under the data path,
// or a referenced folder under data/, is listed and planned once.
func newRootSet(roots []orphanRoot) *rootSet {
	s := &rootSet{byDir: map[string]int{}}
	sorted := slices.Clone(roots)
	slices.SortStableFunc(sorted, func(a, b orphanRoot) int { return len(a.canon.Full) - len(b.canon.Full) })
	for _, r := range sorted {
		if _, ok := s.byDir[strings.TrimSuffix(r.canon.Full, "/")]; ok {
			continue
		}
		if _, ok := s.under(r.canon); ok {
			continue
		}
		s.byDir[strings.TrimSuffix(r.canon.Full, "/")] = len(s.roots)
		s.roots = append(s.roots, r)
	}
	return s
}

// under returns the root a canonical path lies strictly below.
func (s *rootSet) under(c location.Canonical) (orphanRoot, bool) {
	if k, ok := folderOf(s.byDir, c); ok {
		return s.roots[k], true
	}
	return orphanRoot{}, false
}

// folderOf returns the value of the nearest folder of byDir (keyed by
// canonical folder, no trailing slash) that c lies strictly below, walking
// c's parents: one map probe per level, not a prefix test per folder.
func folderOf[V any](byDir map[string]V, c location.Canonical) (V, bool) {
	var zero V
	if len(byDir) == 0 {
		return zero, false
	}
	d := c.Full
	for {
		i := strings.LastIndexByte(d, '/')
		if i < 0 {
			return zero, false
		}
		d = d[:i]
		if v, ok := byDir[d]; ok {
			return v, true
		}
		if d == "" {
			return zero, false
		}
	}
}

// referencedRoots returns the folders under the location loc, other than
// the location itself and the folders already in known, that hold a file
// the metadata references: a writer that put data files in
// <location>/extra/ leaves its orphans there too. Each is spelled as the
// first reference in it spells it.
func referencedRoots(refs *orphanRefs, loc location.Canonical, known *rootSet, c location.Normaliser) []orphanRoot {
	var out []orphanRoot
	seen := map[string]bool{}
	for full, raw := range refs.full {
		cp := location.Canonical{Full: full}
		if !cp.Under(loc) {
			continue
		}
		if _, ok := known.under(cp); ok {
			continue
		}
		dir := full[:strings.LastIndexByte(full, '/')]
		if dir == strings.TrimSuffix(loc.Full, "/") || seen[dir] {
			continue
		}
		seen[dir] = true
		rawDir := raw
		if i := strings.LastIndexByte(raw, '/'); i > 0 {
			rawDir = raw[:i]
		}
		out = append(out, orphanRoot{raw: rawDir, canon: c.Canon(rawDir), why: "a folder the metadata references"})
	}
	slices.SortFunc(out, func(a, b orphanRoot) int { return strings.Compare(a.canon.Full, b.canon.Full) })
	return out
}

// rootKind names the root a canonical location is, or "" when it is none:
// the root of a bucket (s3://bucket), of the local filesystem, or the
// catalog's warehouse (when the caller passed it, Options.Warehouse). Every
// other table of the bucket, filesystem or warehouse lies below such a
// location, so listing the whole of it is never right. A warehouse that is
// not a location (a REST catalog's warehouse is often a name) is ignored:
// canonicalised, a name would be a relative path.
func rootKind(loc string, c location.Normaliser, warehouse string) string {
	if location.Scheme(warehouse) == "" && !strings.HasPrefix(warehouse, "/") {
		warehouse = ""
	}
	lc := c.Canon(loc)
	switch {
	case lc.Key == "/" && location.Scheme(lc.Full) != "":
		return "a bucket (" + loc + ")"
	case lc.Key == "/":
		return "the filesystem (" + loc + ")"
	case warehouse != "" && c.Canon(warehouse).Full == lc.Full:
		return "the catalog's warehouse (" + loc + ")"
	}
	return ""
}

// checkLocationScope refuses scope location where it would be wrong: for a
// table at a root, and for a table whose data or metadata path lies
// outside its location (which scope location would not list).
func checkLocationScope(loc string, roots []orphanRoot, c location.Normaliser, warehouse string) error {
	if k := rootKind(loc, c, warehouse); k != "" {
		return fmt.Errorf("scope %s is refused for a table at the root of %s: every other table and file there would be listed as this table's orphans; use scope %s",
			policy.OrphanScopeLocation, k, policy.OrphanScopeTablePaths)
	}
	lc := c.Canon(loc)
	for _, r := range roots {
		if r.canon.Full != lc.Full && !r.canon.Under(lc) {
			return fmt.Errorf("scope %s: %s %s lies outside the table location %s, which is all scope %s lists; use scope %s",
				policy.OrphanScopeLocation, r.why, r.raw, loc, policy.OrphanScopeLocation, policy.OrphanScopeTablePaths)
		}
	}
	return nil
}

// listedFile is one file a listing reported.
type listedFile struct {
	path  string
	size  int64
	mtime time.Time
}

// listRoot lists the files under root that are not hidden relative to it
// (hiddenFilter), as listFiles does. A root that does not exist (a table
// with no data yet, a metadata path never written) is empty, not an
// error; any other listing error names the root.
func listRoot(ctx context.Context, lister iceio.ListableIO, root string, c location.Normaliser, filter hiddenFilter, links *linkLog, fn func(listedFile)) error {
	rc := c.Canon(root)
	prefix := strings.TrimSuffix(rc.Full, "/") + "/"
	err := listFiles(ctx, lister, root, filter.hiddenName, links, func(p string, size int64, mtime time.Time) {
		if rel, ok := strings.CutPrefix(c.Canon(p).Full, prefix); ok && filter.hiddenRel(rel) {
			return
		}
		fn(listedFile{path: p, size: size, mtime: mtime})
	})
	if errors.Is(err, stdfs.ErrNotExist) && !rootExists(lister, root) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", root, err)
	}
	return nil
}

// rootExists reports whether the folder root exists, as the FileIO sees
// it: a listing error that is "does not exist" is only harmless when it is
// the root that is missing, not a folder below it.
func rootExists(lister iceio.ListableIO, root string) bool {
	exists := false
	_ = lister.WalkDir(root, func(_ string, _ stdfs.DirEntry, err error) error {
		exists = err == nil
		return stdfs.SkipAll
	})
	return exists
}
