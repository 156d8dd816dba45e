package chain

import (
	"context"
	"errors"
	"fmt"
	stdfs "io/fs"
	"path"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/internal/location"
)

// cleanup deletes the files this type wrote that no commit claimed, after an
// outcome other than done. It reloads the table first and keeps every file
// that the table's metadata references (a commit that reported an error may
// still have landed), and keeps everything when the table cannot be loaded,
// because then it cannot tell. The metadata.json that the SQL catalog
// writes before its compare-and-swap is not written through the table's
// FileIO; it is found by its reference to one of our manifest lists.
func (s *stepState) cleanup(ctx context.Context) (int, error) {
	files := s.rec.take()
	if len(files) == 0 {
		return 0, nil
	}
	fresh, err := s.r.cat.LoadTable(ctx, s.r.ident)
	if err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
		return 0, fmt.Errorf("commit state unknown, kept %d written files: %w", len(files), err)
	}
	fs, err := s.tbl.FS(ctx)
	if err != nil {
		return 0, err
	}
	if ri, ok := fs.(recordingIO); ok {
		fs = ri.IO
	}
	var refs map[string]bool
	norm, err := location.New(location.Options{})
	if err != nil {
		return 0, fmt.Errorf("kept %d written files: %w", len(files), err)
	}
	// A commit that reported an error may have landed, and a catalog may
	// hand back its locations respelled (s3a:// as s3://): a written file
	// is kept when the table references it under any spelling.
	live := norm.NewSet()
	if fresh != nil {
		if refs, err = referencedFiles(ctx, fresh, fs, s.s0Snapshots); err != nil {
			return 0, fmt.Errorf("kept %d written files: %w", len(files), err)
		}
		for r := range refs {
			live.Add(r)
		}
	}
	var remove, lists []string
	for _, f := range files {
		if live.Has(f) {
			continue
		}
		remove = append(remove, f)
		if strings.HasPrefix(path.Base(f), "snap-") {
			lists = append(lists, f)
		}
	}
	if fresh != nil && len(lists) > 0 {
		remove = append(remove, strayMetadata(fresh, fs, live, lists)...)
	}
	var errs []error
	n := 0
	for _, f := range remove {
		if err := fs.Remove(f); err != nil && !errors.Is(err, stdfs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// referencedFiles returns every file the metadata of tbl references: the
// metadata files (current and logged), statistics, and for every snapshot
// not in skip its manifest list, manifests and their live and deleted
// entries (refIndex.refs). Cleanup skips the snapshots that existed at S0:
// they cannot reference a file written after S0.
func referencedFiles(ctx context.Context, tbl *table.Table, fs iceio.IO, skip map[int64]bool) (map[string]bool, error) {
	return newRefIndex(fs).tableRefs(ctx, tbl, skip)
}

// strayMetadata finds metadata.json files under the table's metadata folder
// that the table does not reference and that name one of lists, our
// uncommitted manifest lists: the catalog wrote them for our failed commit.
func strayMetadata(tbl *table.Table, fs iceio.IO, live *location.Set, lists []string) []string {
	l, ok := fs.(iceio.ListableIO)
	if !ok {
		return nil
	}
	var out []string
	dir := strings.TrimSuffix(tbl.Location(), "/") + "/metadata"
	_ = l.WalkDir(dir, func(p string, d stdfs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".metadata.json") || live.Has(asLocation(p, tbl.Location())) {
			return nil
		}
		f, err := fs.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		buf := make([]byte, 0, 64<<10)
		b := make([]byte, 32<<10)
		for {
			n, rerr := f.Read(b)
			buf = append(buf, b[:n]...)
			if rerr != nil || len(buf) > 64<<20 {
				break
			}
		}
		for _, ml := range lists {
			if strings.Contains(string(buf), ml) {
				out = append(out, p)
				break
			}
		}
		return nil
	})
	return out
}
