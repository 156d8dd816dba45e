package chain

import (
	"context"
	"errors"
	"fmt"
	stdfs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/tms-dev/tms/internal/location"
)

// Symbolic links under a local table location.
//
// A table's data/ folder (or the location itself, or a partition folder)
// is often a symbolic link to a folder on another disk. iceberg-go's local
// FileIO walks with filepath.WalkDir, which reports such a link as a file:
// orphan cleanup listed the link as an unreferenced file and deleted it,
// and the table could no longer read its data. On a local FileIO orphan
// cleanup therefore walks the location itself (localWalk): it follows a
// link to a folder and lists it under the link's path, the spelling the
// metadata uses; it never lists a link, so it never deletes one; and
// execute checks once more, right before every Remove, that the path is
// not a link.

// maxSkippedLinkExamples is how many skipped links the orphan detail names;
// the count covers them all.
const maxSkippedLinkExamples = 20

// OrphanLinks are the symbolic links orphan cleanup met and did not list:
// links to files, dangling links, links to a folder that contains them or
// the table location (a cycle), links to a folder it had already listed
// (a second link to one folder), and planned paths that had become links
// by the time of deletion. None of them is deleted. Count covers them all;
// Examples names the first maxSkippedLinkExamples, so that a table with
// many links does not bloat the report.
type OrphanLinks struct {
	Count    int           `json:"count"`
	Examples []SkippedLink `json:"examples"`
}

// SkippedLink is one skipped link (or folder reached a second time through
// a link), spelled as the table location spells paths, with what the link
// points at as it is written and why it was skipped.
type SkippedLink struct {
	Path   string `json:"path"`
	Target string `json:"target,omitempty"`
	Reason string `json:"reason"`
}

// Reasons a link is skipped.
const (
	linkToFile      = "link to a file: not listed, never deleted"
	linkDangling    = "dangling link: its target does not exist; not deleted"
	linkLoop        = "link loop: the link does not resolve; not deleted"
	linkCycle       = "link to a folder that contains it or the table location (a cycle): not followed, not deleted"
	linkListedAs    = "folder already listed as "
	linkBecameLink  = "became a symbolic link after planning: not deleted"
	linkUnfollowed  = "symbolic link on a file IO whose links orphan cleanup cannot follow: not listed, never deleted"
	linkSummaryVerb = "symbolic links skipped, none deleted (see skipped_links)"
)

// linkLog is what orphan cleanup learned about links: the skipped ones for
// the detail, and for the local walk the other paths that name a listed
// file, so that a file the metadata references under any of them is kept.
type linkLog struct {
	count    int
	examples []SkippedLink
	// reached maps the real path of a folder entered through a link, and
	// of a folder reached a second time, to the paths the walk reached it
	// by. Every file below such a folder has those spellings too.
	reached map[string][]string
	// fileLinks maps the real path of the target of a link to a file to the
	// paths of the links to it: the metadata may reference the file through
	// a link.
	fileLinks map[string][]string
	// walked is set by the local walk, the only listing that follows links
	// and so the only one whose files have other spellings.
	walked bool
}

func (l *linkLog) skip(path, target, reason string) {
	l.count++
	if len(l.examples) < maxSkippedLinkExamples {
		l.examples = append(l.examples, SkippedLink{Path: path, Target: target, Reason: reason})
	}
}

func (l *linkLog) reach(real, path string) {
	if l.reached == nil {
		l.reached = map[string][]string{}
	}
	l.reached[real] = append(l.reached[real], path)
}

func (l *linkLog) fileLink(real, path string) {
	if l.fileLinks == nil {
		l.fileLinks = map[string][]string{}
	}
	l.fileLinks[real] = append(l.fileLinks[real], path)
}

// report is the skipped links as the orphan detail shows them, paths
// spelled as the location loc spells them; nil when none was skipped, so
// the detail of a table without links is unchanged.
func (l *linkLog) report(loc string) *OrphanLinks {
	if l == nil || l.count == 0 {
		return nil
	}
	out := &OrphanLinks{Count: l.count, Examples: make([]SkippedLink, len(l.examples))}
	for i, e := range l.examples {
		if abs, err := filepath.Abs(e.Path); err == nil {
			e.Path = abs
		}
		e.Path = asLocation(filepath.ToSlash(e.Path), loc)
		out.Examples[i] = e
	}
	return out
}

// summary is the suffix of the type's reason when links were skipped: an
// operator reading only the reason learns that the table has links the
// cleanup left alone.
func (l *linkLog) summary() string {
	if l == nil || l.count == 0 {
		return ""
	}
	return fmt.Sprintf("; %d %s", l.count, linkSummaryVerb)
}

// localIO reports whether fsys is iceberg-go's local FileIO, through the
// chain's own wrappers: the one FileIO whose paths can be symbolic links.
func localIO(fsys iceio.IO) bool {
	for {
		switch v := fsys.(type) {
		case iceio.LocalFS, *iceio.LocalFS:
			return true
		case recordingIO:
			fsys = v.IO
		default:
			return false
		}
	}
}

// localRoot returns the OS path the local FileIO resolves loc to. It asks
// the FileIO (the first path its WalkDir reports is the root) rather than
// parsing loc itself, so every listed path is spelled as iceberg-go's own
// walk would spell it and its Remove accepts it.
func localRoot(lister iceio.ListableIO, loc string) (string, error) {
	var root string
	err := lister.WalkDir(loc, func(p string, _ stdfs.DirEntry, _ error) error {
		root = p
		return stdfs.SkipAll
	})
	if err != nil {
		return "", err
	}
	return filepath.Clean(root), nil
}

// realPath is p with every symbolic link resolved, absolute: the identity
// of a folder for the cycle guard.
func realPath(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	return filepath.Abs(r)
}

// localWalk lists a local table location, following links to folders.
//
// A link to a folder that contains the link or the table location is a
// cycle and is not followed: following it would list the location again,
// and with it whatever else that folder holds (a link to the warehouse
// would list every other table's files as this table's orphans). Any other
// folder is listed once, under the first path that reaches it: entered
// maps the real path of every listed folder to that path, so a folder two
// links point at is listed once. Links are followed only after every plain
// folder was listed, so a folder inside the location that a link also
// points at is listed under its own path, the one writers use.
type localWalk struct {
	ctx      context.Context
	hidden   func(name string) bool
	fn       func(path string, size int64, mtime time.Time)
	log      *linkLog
	rootReal string
	entered  map[string]string
	pending  []pendingLink
}

// pendingLink is a link the walk met: its path, and the real path of the
// folder holding it.
type pendingLink struct {
	path, dirReal string
}

// run walks root, the location; the root may itself be a link to a folder.
func (w *localWalk) run(root string) error {
	w.log.walked = true
	w.entered = map[string]string{}
	info, err := os.Stat(root)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return &stdfs.PathError{Op: "list", Path: root, Err: errors.New("the table location is not a folder")}
	}
	real, err := realPath(root)
	if err != nil {
		return err
	}
	w.rootReal = real
	w.log.reach(real, root)
	if err := w.dir(root, real); err != nil {
		return err
	}
	for len(w.pending) > 0 {
		l := w.pending[0]
		w.pending = w.pending[1:]
		if err := w.link(l.path, l.dirReal); err != nil {
			return err
		}
	}
	return nil
}

// dir lists the folder at path p whose real path is real. Hidden names
// (folders, links and files) are skipped: nothing below a hidden folder or
// a hidden link to a folder is listed, as Iceberg Java's filter does; the
// caller drops hidden files by their relative paths either way. Links are
// queued for run.
func (w *localWalk) dir(p, real string) error {
	w.entered[real] = p
	ents, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		if w.hidden(name) {
			continue
		}
		cp := filepath.Join(p, name)
		switch t := e.Type(); {
		case t&stdfs.ModeSymlink != 0:
			w.pending = append(w.pending, pendingLink{cp, real})
		case t.IsDir():
			cr := filepath.Join(real, name)
			if first, ok := w.entered[cr]; ok {
				// Below a followed link: the folder was listed already.
				w.log.skip(cp, "", linkListedAs+first)
				w.log.reach(cr, cp)
				continue
			}
			if err := w.dir(cp, cr); err != nil {
				return err
			}
		default:
			info, err := e.Info()
			if err != nil {
				return err
			}
			w.fn(cp, info.Size(), info.ModTime())
		}
	}
	return nil
}

// link follows the link at p, in the folder whose real path is dirReal,
// when it points at a folder that is not a cycle and not listed yet, and
// otherwise records why not. A link that cannot be resolved (dangling, a
// loop) is skipped, not an error: it names no file the table can read.
func (w *localWalk) link(p, dirReal string) error {
	target, err := os.Readlink(p)
	if errors.Is(err, stdfs.ErrNotExist) {
		return nil // removed since the folder was read: nothing to list
	}
	if err != nil {
		return err
	}
	info, err := os.Stat(p)
	switch {
	case errors.Is(err, stdfs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		w.log.skip(p, target, linkDangling)
		return nil
	case errors.Is(err, syscall.ELOOP):
		w.log.skip(p, target, linkLoop)
		return nil
	case err != nil:
		return err
	}
	real, err := realPath(p)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		w.log.skip(p, target, linkToFile)
		w.log.fileLink(real, p)
		return nil
	}
	if within(real, dirReal) || within(real, w.rootReal) {
		w.log.skip(p, target, linkCycle)
		return nil
	}
	w.log.reach(real, p)
	if first, ok := w.entered[real]; ok {
		w.log.skip(p, target, linkListedAs+first)
		return nil
	}
	return w.dir(p, real)
}

// within reports whether the path p is the folder dir or lies below it.
func within(dir, p string) bool {
	if p == dir {
		return true
	}
	sep := string(filepath.Separator)
	return strings.HasPrefix(p, strings.TrimSuffix(dir, sep)+sep)
}

// keepLinked drops from files every planned orphan that the metadata
// references under another path naming the same file: its real path, its
// path through any other link or folder the walk reached its folder by, or
// a link to it. Deleting such a file would delete a file the table reads.
func (l *linkLog) keepLinked(files []plannedOrphan, refs *orphanRefs, c location.Normaliser) []plannedOrphan {
	if l == nil || !l.walked {
		return files
	}
	realDirs := map[string]string{}
	out := files[:0:0]
	for _, f := range files {
		dir := filepath.Dir(f.path)
		rd, ok := realDirs[dir]
		if !ok {
			r, err := realPath(dir)
			if err != nil {
				// The folder is gone or unreadable: its files cannot be
				// told apart from referenced ones, and deleting them is
				// moot or fails; keep them.
				continue
			}
			rd, realDirs[dir] = r, r
		}
		if !l.referencedElsewhere(filepath.Join(rd, filepath.Base(f.path)), refs, c) {
			out = append(out, f)
		}
	}
	return out
}

// referencedElsewhere reports whether refs names the file with real path
// real under any spelling the walk saw for it.
func (l *linkLog) referencedElsewhere(real string, refs *orphanRefs, c location.Normaliser) bool {
	is := func(p string) bool {
		_, ok := refs.full[c.Canon(filepath.ToSlash(p)).Full]
		return ok
	}
	if is(real) {
		return true
	}
	for _, p := range l.fileLinks[real] {
		if is(p) {
			return true
		}
	}
	for a := real; ; a = filepath.Dir(a) {
		for _, p := range l.reached[a] {
			if is(filepath.Join(p, real[len(a):])) {
				return true
			}
		}
		if filepath.Dir(a) == a {
			return false
		}
	}
}

// removeLocal deletes paths on the local FileIO fsys, checking right before
// each Remove that the path is not a symbolic link: a planned file replaced
// by a link since planning is skipped and recorded in log, not deleted
// (Remove would delete the link). A path already gone counts as deleted.
func removeLocal(ctx context.Context, fsys iceio.IO, paths []string, log *linkLog) ([]string, error) {
	var deleted []string
	var errs []error
	for _, f := range paths {
		if err := ctx.Err(); err != nil {
			return deleted, errors.Join(append(errs, err)...)
		}
		info, err := os.Lstat(f)
		switch {
		case errors.Is(err, stdfs.ErrNotExist):
			deleted = append(deleted, f)
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		case info.Mode()&stdfs.ModeSymlink != 0:
			target, _ := os.Readlink(f)
			log.skip(f, target, linkBecameLink)
			continue
		}
		if err := fsys.Remove(f); err != nil && !errors.Is(err, stdfs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, f)
	}
	return deleted, errors.Join(errs...)
}
