package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdfs "io/fs"
	"sync"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// recorder remembers every file a maintenance attempt creates through the
// table's FileIO (data files, manifests, manifest lists), so that an attempt
// that does not commit can delete exactly what it wrote, and nothing else.
type recorder struct {
	mu      sync.Mutex
	created []string
	seen    map[string]bool
}

func (r *recorder) add(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]bool{}
	}
	if !r.seen[name] {
		r.seen[name] = true
		r.created = append(r.created, name)
	}
}

// take returns the recorded files and forgets them: called after a commit
// (the files are now the table's) or after they were cleaned up.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.created
	r.created, r.seen = nil, nil
	return out
}

// recordingIO wraps a FileIO and records every Create and WriteFile. It
// forwards the optional interfaces iceberg-go looks for (ReadFileIO,
// WriteFileIO, ListableIO, BulkRemovableIO, StatIO), falling back to the
// plain IO where the wrapped one lacks them.
type recordingIO struct {
	iceio.IO
	rec *recorder
}

var (
	_ iceio.ReadFileIO      = recordingIO{}
	_ iceio.WriteFileIO     = recordingIO{}
	_ iceio.ListableIO      = recordingIO{}
	_ iceio.BulkRemovableIO = recordingIO{}
	_ iceio.StatIO          = recordingIO{}
)

func (r recordingIO) Create(name string) (iceio.FileWriter, error) {
	w, ok := r.IO.(iceio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("file IO %T is read-only", r.IO)
	}
	r.rec.add(name) // before: a failed Create may still leave a file
	return w.Create(name)
}

func (r recordingIO) WriteFile(name string, p []byte) error {
	w, ok := r.IO.(iceio.WriteFileIO)
	if !ok {
		return fmt.Errorf("file IO %T is read-only", r.IO)
	}
	r.rec.add(name)
	return w.WriteFile(name, p)
}

func (r recordingIO) ReadFile(name string) ([]byte, error) {
	if rf, ok := r.IO.(iceio.ReadFileIO); ok {
		return rf.ReadFile(name)
	}
	f, err := r.IO.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func (r recordingIO) WalkDir(root string, fn stdfs.WalkDirFunc) error {
	if l, ok := r.IO.(iceio.ListableIO); ok {
		return l.WalkDir(root, fn)
	}
	return fmt.Errorf("file IO %T cannot list directories", r.IO)
}

func (r recordingIO) DeleteFiles(ctx context.Context, paths []string) ([]string, error) {
	if b, ok := r.IO.(iceio.BulkRemovableIO); ok {
		return b.DeleteFiles(ctx, paths)
	}
	var deleted []string
	var errs []error
	for _, p := range paths {
		if err := r.IO.Remove(p); err != nil && !errors.Is(err, stdfs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, p)
	}
	return deleted, errors.Join(errs...)
}

func (r recordingIO) Stat(name string) (stdfs.FileInfo, error) {
	if s, ok := r.IO.(iceio.StatIO); ok {
		return s.Stat(name)
	}
	f, err := r.IO.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// recordingTable returns a copy of tbl whose FileIO records created files in
// rec. The copy commits through cat like the original.
func recordingTable(tbl *table.Table, cat table.CatalogIO, rec *recorder) *table.Table {
	fsF := func(ctx context.Context) (iceio.IO, error) {
		fs, err := tbl.FS(ctx)
		if err != nil {
			return nil, err
		}
		return recordingIO{IO: fs, rec: rec}, nil
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), fsF, cat)
}
