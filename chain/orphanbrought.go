package chain

import (
	"context"
	"fmt"
	"strings"

	"github.com/tms-dev/tms/internal/location"
)

// Files other tables reference under a table's folders.
//
// A table may reference files outside its own location: add_files
// registers files where they lie (another table's data folder, an export
// folder under a table), and write.data.path may point anywhere. Such a
// file is not this table's reference and carries no metadata mark, so
// listing alone plans it as an orphan, and deleting it breaks the table
// that reads it. The runner's sampler records, for every table it
// samples, the folders outside its location its snapshot references
// (Neighbour.Folders, from the ledger); orphan cleanup loads each other
// table one of whose folders meets a folder it lists, and keeps every file
// that table references (at any snapshot, as its own references are
// read). A table that cannot be loaded (gone from its catalog, renamed,
// in a catalog this runner has not opened) has its folders kept whole: a
// file it may reference cannot be told from an orphan.

// broughtFiles are the files under the listed folders that other tables
// reference, and the folders of other tables that could not be read.
type broughtFiles struct {
	// kept maps a canonical path to the reference that keeps it.
	kept map[string]*brought
	all  []*brought
	// unread are the folders of the tables that could not be loaded, as
	// other tables' roots: nothing below them is planned.
	unread []*otherTable
}

// brought is one other table whose references keep files here.
type brought struct {
	table   string
	folders []string
	files   int
}

// OtherReference is one entry of OrphanPlan.ReferencedByOtherTables.
type OtherReference struct {
	Table   string   `json:"table"`
	Folders []string `json:"folders"`
	Files   int      `json:"files"`
}

// broughtFiles loads the registered tables with a folder outside their
// location that meets one of roots (equal, below or above it) and
// collects their references under roots.
func (pl orphanPlanner) broughtFiles(ctx context.Context, roots *rootSet) (*broughtFiles, error) {
	out := &broughtFiles{kept: map[string]*brought{}}
	for _, n := range pl.registered {
		var meets []string
		for _, f := range n.Folders {
			fc := pl.canon.Canon(strings.TrimSuffix(f, "/"))
			for _, r := range roots.roots {
				if fc.Full == r.canon.Full || fc.Under(r.canon) || r.canon.Under(fc) {
					meets = append(meets, f)
					break
				}
			}
		}
		if len(meets) == 0 {
			continue
		}
		refs, err := pl.neighbourRefs(ctx, n)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			for _, f := range meets {
				raw := strings.TrimSuffix(f, "/")
				out.unread = append(out.unread, &otherTable{root: pl.canon.Canon(raw), raw: raw,
					why: fmt.Sprintf("table %s references files here and could not be read: %v", n.Name, err)})
			}
			continue
		}
		b := &brought{table: n.Name, folders: meets}
		out.all = append(out.all, b)
		for full := range refs.full {
			c := location.Canonical{Full: full}
			if _, ok := roots.under(c); ok {
				if _, dup := out.kept[full]; !dup {
					out.kept[full] = b
				}
			}
		}
	}
	return out, nil
}

// neighbourRefs reads the reference set of another table through its
// Load hook.
func (pl orphanPlanner) neighbourRefs(ctx context.Context, n Neighbour) (*orphanRefs, error) {
	if n.Load == nil {
		return nil, fmt.Errorf("no way to load it")
	}
	tbl, err := n.Load(ctx)
	if err != nil {
		return nil, err
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open its file IO: %w", err)
	}
	return pl.references(ctx, tbl, fsys)
}

// keeps returns the other table that references c.
func (b *broughtFiles) keeps(c location.Canonical) (*brought, bool) {
	if b == nil {
		return nil, false
	}
	t, ok := b.kept[c.Full]
	return t, ok
}

// report lists the tables that kept files, for the detail.
func (b *broughtFiles) report() []OtherReference {
	if b == nil {
		return nil
	}
	var out []OtherReference
	for _, t := range b.all {
		out = append(out, OtherReference{Table: t.table, Folders: t.folders, Files: t.files})
	}
	return out
}

// count returns how many listed files other tables' references kept.
func (b *broughtFiles) count() (files int) {
	if b == nil {
		return 0
	}
	for _, t := range b.all {
		files += t.files
	}
	return files
}
