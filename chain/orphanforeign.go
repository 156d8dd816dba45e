package chain

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"

	iceio "github.com/apache/iceberg-go/io"
	"golang.org/x/sync/errgroup"

	"github.com/tms-dev/tms/internal/location"
)

// Other tables under a table's folders.
//
// Even the table's own folders may hold another table: a table created
// with a LOCATION inside this table's data folder, a folder link to
// another table's folder, a table registered (register_table) on this
// table's own metadata, which then writes its metadata next to this
// table's. Their files are not this table's references, so listing alone
// plans them as orphans. Orphan cleanup therefore looks at what it listed
// for the marks of an Iceberg table's metadata (a metadata.json in any
// compression spelling, version-hint.text) in folders that are not this
// table's:
//
//   - a marked folder named metadata makes its parent another table's
//     root, any other marked folder (a custom write.metadata.path) is
//     itself the root; nothing below such a root is planned, and the
//     detail names it (other_tables). A marked folder is this table's own
//     when this table references a metadata file in it, or when its
//     metadata.json carries this table's table-uuid (a metadata folder the
//     log no longer names);
//   - this table's own metadata folders may hold metadata.json files the
//     log does not name (failed commits, entries trimmed from the log);
//     each is read for its table-uuid, and one of another table means a
//     table shares this table's folders, whose files cannot be told from
//     this table's orphans without reading that table: the cleanup is
//     skipped, naming the file.
//
// It works on what was listed, so a directory walk and a flat object-store
// listing find the same roots. A table whose metadata lies elsewhere and
// only its data under this table's folders carries no mark here; the
// ledger's registered locations are the guard for that.

// otherTable is the root of another table found under the listed folders.
type otherTable struct {
	root location.Canonical
	raw  string
	// mark is the metadata file that marked it (its listed spelling), and
	// why says what made it another table's.
	mark, why string
	files     int
}

// OtherTable is one entry of OrphanPlan.OtherTables.
type OtherTable struct {
	Root  string `json:"root"`
	Mark  string `json:"mark,omitempty"`
	Why   string `json:"why"`
	Files int    `json:"files"`
}

// isTableMark reports whether base is the name of a file only an Iceberg
// table's metadata folder holds: a metadata.json, plain or gzip in either
// spelling, or version-hint.text.
func isTableMark(base string) bool {
	return base == "version-hint.text" || isMetadataJSON(base)
}

// isMetadataJSON reports whether base names a table metadata file.
func isMetadataJSON(base string) bool {
	return strings.HasSuffix(base, ".metadata.json") || strings.HasSuffix(base, ".metadata.json.gz")
}

// sharedFolderError is returned by otherTables when another table writes
// into this table's own metadata folder.
type sharedFolderError struct{ file, uuid, table, location string }

func (e sharedFolderError) Error() string {
	if e.table != "" {
		return fmt.Sprintf("table %s is registered at this table's location %s: its files cannot be told from this table's orphans", e.table, e.location)
	}
	return fmt.Sprintf("metadata file %s in this table's metadata folder belongs to another table (table-uuid %s): "+
		"a table shares this table's folders (register_table on its metadata), and its files cannot be told from this table's orphans",
		e.file, e.uuid)
}

// otherTables returns the roots of other tables among the listed files,
// or a sharedFolderError. ownMeta are this table's metadata folders and
// uuid its table-uuid.
func otherTables(ctx context.Context, fsys iceio.IO, listed []listedFile, refs *orphanRefs, ownMeta []location.Canonical, uuid string, c location.Normaliser) ([]*otherTable, error) {
	type folder struct {
		dir   location.Canonical
		marks []string // listed spellings of the marks in it, sorted
		ours  bool     // it holds a metadata file this table references
	}
	folders := map[string]*folder{}
	for _, f := range listed {
		// The listed spelling's last element is the canonical one's (Canon
		// decodes a file: URI's escapes, which a mark's name never holds);
		// only marks are canonicalised.
		if !isTableMark(f.path[strings.LastIndexByte(f.path, '/')+1:]) {
			continue
		}
		cp := c.Canon(f.path)
		dir := cp.Dir()
		fo := folders[dir.Full]
		if fo == nil {
			fo = &folder{dir: dir}
			folders[dir.Full] = fo
		}
		if _, ok := refs.full[cp.Full]; ok {
			fo.ours = true
			continue
		}
		fo.marks = append(fo.marks, f.path)
	}
	own := func(d location.Canonical) bool {
		return slices.ContainsFunc(ownMeta, func(m location.Canonical) bool { return m.Full == d.Full })
	}

	// The table-uuids to read: every unreferenced metadata.json in this
	// table's own metadata folders, and one per other marked folder.
	var reads []string
	var candidates []*folder
	for _, fo := range folders {
		if own(fo.dir) {
			for _, m := range fo.marks {
				if isMetadataJSON(path.Base(m)) {
					reads = append(reads, m)
				}
			}
			continue
		}
		if fo.ours || len(fo.marks) == 0 {
			continue
		}
		slices.Sort(fo.marks)
		candidates = append(candidates, fo)
		if m := firstMetadataJSON(fo.marks); m != "" {
			reads = append(reads, m)
		}
	}
	uuids, err := readTableUUIDs(ctx, fsys, reads)
	if err != nil {
		return nil, err
	}
	for _, fo := range folders {
		if !own(fo.dir) {
			continue
		}
		for _, m := range fo.marks {
			if u, ok := uuids[m]; ok && !strings.EqualFold(u, uuid) {
				return nil, sharedFolderError{file: m, uuid: u}
			}
		}
	}

	var out []*otherTable
	for _, fo := range candidates {
		m := firstMetadataJSON(fo.marks)
		why := ""
		switch u, ok := uuids[m]; {
		case m == "":
			m = fo.marks[0]
			why = "a metadata folder with version-hint.text and no metadata file this table references"
		case !ok:
			why = "a metadata file whose table-uuid cannot be read"
		case strings.EqualFold(u, uuid):
			continue // this table's own metadata folder, no longer in its log
		default:
			why = "a metadata file of table-uuid " + u
		}
		root, raw := fo.dir, parentSpelling(m)
		if path.Base(fo.dir.Full) == "metadata" {
			root = fo.dir.Dir()
			raw = parentSpelling(raw)
		}
		out = append(out, &otherTable{root: root, raw: raw, mark: m, why: why})
	}
	slices.SortFunc(out, func(a, b *otherTable) int { return strings.Compare(a.root.Full, b.root.Full) })
	// A root inside another found root is covered by it.
	var kept []*otherTable
	for _, t := range out {
		if slices.ContainsFunc(kept, func(k *otherTable) bool { return t.root.Under(k.root) || t.root.Full == k.root.Full }) {
			continue
		}
		kept = append(kept, t)
	}
	return kept, nil
}

// parentSpelling drops the last element of a listed folder spelling,
// keeping its scheme and authority as listed.
func parentSpelling(p string) string {
	if i := strings.LastIndexByte(strings.TrimSuffix(p, "/"), '/'); i > 0 {
		return p[:i]
	}
	return p
}

// firstMetadataJSON returns the first of the sorted marks that is a
// metadata.json, or "".
func firstMetadataJSON(marks []string) string {
	for _, m := range marks {
		if isMetadataJSON(path.Base(m)) {
			return m
		}
	}
	return ""
}

// readTableUUIDs reads the table-uuid of each metadata file, eight at a
// time. A file that cannot be read, parsed or has no table-uuid is left
// out of the map (the caller treats it as another table's); only a
// cancelled context is an error.
func readTableUUIDs(ctx context.Context, fsys iceio.IO, files []string) (map[string]string, error) {
	out := map[string]string{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, f := range files {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			u, err := readTableUUID(fsys, f)
			if err != nil || u == "" {
				return nil
			}
			mu.Lock()
			out[f] = u
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// readTableUUID reads the top-level table-uuid of a metadata file, gzip or
// not (by its magic bytes, whatever its name says), stopping at the key:
// writers put it near the top, before the snapshots.
func readTableUUID(fsys iceio.IO, name string) (string, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 32<<10)
	var r io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return "", err
		}
		defer zr.Close()
		r = zr
	}
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", fmt.Errorf("%s: not a JSON object", name)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", err
		}
		if t == "table-uuid" {
			var u string
			if err := dec.Decode(&u); err != nil {
				return "", err
			}
			return u, nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", err
		}
	}
	return "", nil
}

// otherSet finds the other table a canonical path lies under (folderOf).
type otherSet struct {
	byDir map[string]*otherTable
	all   []*otherTable
}

// newOtherSet keeps the first of the tables found at one root.
func newOtherSet(ts []*otherTable) *otherSet {
	s := &otherSet{byDir: map[string]*otherTable{}}
	for _, t := range ts {
		d := strings.TrimSuffix(t.root.Full, "/")
		if _, ok := s.byDir[d]; ok {
			continue
		}
		s.byDir[d] = t
		s.all = append(s.all, t)
	}
	return s
}

// under returns the other table whose root c lies below.
func (s *otherSet) under(c location.Canonical) (*otherTable, bool) {
	if s == nil {
		return nil, false
	}
	return folderOf(s.byDir, c)
}

func (s *otherSet) list() []*otherTable {
	if s == nil {
		return nil
	}
	return s.all
}

// count returns how many other tables were found and how many listed
// files lie below them.
func (s *otherSet) count() (tables, files int) {
	for _, t := range s.list() {
		tables++
		files += t.files
	}
	return tables, files
}

// registeredTables returns the registered tables (Hooks.OtherTables) whose
// location lies under the table location loc or under a listed root, as
// other tables' roots. One whose location is this table's own is a table
// on this table's files: a sharedFolderError.
func registeredTables(reg []Neighbour, loc string, roots []orphanRoot, c location.Normaliser) ([]*otherTable, error) {
	lc := c.Canon(loc)
	var out []*otherTable
	for _, n := range reg {
		if n.Location == "" {
			continue
		}
		nc := c.Canon(strings.TrimSuffix(n.Location, "/"))
		if nc.Full == lc.Full {
			return nil, sharedFolderError{table: n.Name, location: n.Location}
		}
		inside := nc.Under(lc)
		for _, r := range roots {
			inside = inside || nc.Under(r.canon) || nc.Full == r.canon.Full
		}
		if !inside {
			continue
		}
		out = append(out, &otherTable{root: nc, raw: strings.TrimSuffix(n.Location, "/"), why: "table " + n.Name + " is registered at this location"})
	}
	return out, nil
}
