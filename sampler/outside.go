package sampler

import (
	"cmp"
	"slices"
	"strings"

	"github.com/tms-dev/tms/internal/location"
)

// MaxOutsideFolders is the most folders Result.OutsideFolders names; a
// table that references files in more folders outside its location has
// them named by their parents, deepest first, until they fit.
const MaxOutsideFolders = 1000

// outsideFilter tells the folders of referenced files that lie outside a
// table's location: what another table's orphan cleanup must not delete
// when that location is under its folders (a file brought in with
// add_files, a write.data.path elsewhere).
type outsideFilter struct {
	prefix string // the location as spelled, with a trailing slash
	loc    location.Canonical
	canon  location.Normaliser
}

func newOutsideFilter(loc string) *outsideFilter {
	// The zero Options have Spark's scheme equivalences (s3a and s3n are
	// s3) and no authority ones; New cannot fail on them.
	canon, _ := location.New(location.Options{})
	loc = strings.TrimSuffix(loc, "/")
	return &outsideFilter{prefix: loc + "/", loc: canon.Canon(loc), canon: canon}
}

// note records the folder of p in *folders unless p is spelled under the
// location. The canonical comparison runs once per folder: a file named
// through another spelling of the location (s3a:// for s3://) is inside.
func (o *outsideFilter) note(folders *map[string]bool, p string) {
	if o == nil || strings.HasPrefix(p, o.prefix) {
		return
	}
	dir := folderOf(p)
	if dir == "" {
		return
	}
	if _, ok := (*folders)[dir]; ok {
		return
	}
	if *folders == nil {
		*folders = map[string]bool{}
	}
	c := o.canon.Canon(dir)
	(*folders)[dir] = c.Full != o.loc.Full && !c.Under(o.loc)
}

// outsideFolders returns the folders marked outside, sorted, none below
// another, at most MaxOutsideFolders.
func outsideFolders(folders map[string]bool) []string {
	var out []string
	for d, outside := range folders {
		if outside {
			out = append(out, d)
		}
	}
	return collapseFolders(out, MaxOutsideFolders)
}

// collapseFolders drops the folders below another of dirs and, while more
// than limit remain, replaces the deepest by their parents. A root (a
// bucket, "/") has no parent, so more than limit roots stay.
func collapseFolders(dirs []string, limit int) []string {
	for {
		dirs = topFolders(dirs)
		if len(dirs) <= limit {
			return dirs
		}
		deepest := 0
		for _, d := range dirs {
			deepest = max(deepest, strings.Count(d, "/"))
		}
		changed := false
		for i, d := range dirs {
			if strings.Count(d, "/") == deepest {
				if p := folderOf(d); p != "" && p != d {
					dirs[i], changed = p, true
				}
			}
		}
		if !changed {
			return dirs
		}
	}
}

// topFolders returns dirs sorted, without duplicates and without those
// below another of them.
func topFolders(dirs []string) []string {
	// Shorter first, so that a folder's ancestors are decided before it.
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
	kept := make(map[string]bool, len(dirs))
	out := dirs[:0]
	for _, d := range dirs {
		if kept[d] {
			continue
		}
		below := false
		for a := folderOf(d); a != "" && !below; {
			below = kept[a]
			next := folderOf(a)
			if next == a {
				break
			}
			a = next
		}
		if below {
			continue
		}
		kept[d] = true
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// folderOf returns the folder of the file or folder p as spelled, "" for
// a name without one. The authority of a URI is not a folder: the folder
// of s3://bucket is itself.
func folderOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	switch {
	case i < 0:
		return ""
	case i == 0:
		return "/"
	case p[i-1] == '/':
		return p
	}
	return p[:i]
}
