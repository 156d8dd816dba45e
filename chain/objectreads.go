package chain

import (
	"bytes"
	"context"
	"io/fs"
	"path"
	"sync"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/faithful"
)

// On object storage every read is a request. iceberg-go's scan reads a
// Parquet file by ranges: the footer, then each column chunk, several GETs
// for a file of a few kilobytes. Compaction therefore reads the small
// files of its groups (data and delete files up to
// faithful.WholeFileBytes) whole, one GET each, and keeps the read-check's
// footer read of such a file (faithful reads those whole too) for the scan
// that follows, within heldObjectBytes for the whole step: a small file
// costs one request in all. Data files are immutable: what was read is
// what the scan would read.
const heldObjectBytes = 16 << 20

// objectReads is the FileIO compaction reads a step's files through on
// object storage.
type objectReads struct {
	iceio.IO
	rf    iceio.ReadFileIO
	small map[string]bool // locations read whole

	mu   sync.Mutex
	held map[string][]byte // read by ReadFile, not yet opened
	used int64             // bytes in held
}

// readTable returns the table compaction reads groups through (the table
// itself on local storage) and its FileIO.
func (s *stepState) readTable(ctx context.Context, groups []compaction.Group) (*table.Table, iceio.IO, error) {
	fsys, err := s.tbl.FS(ctx)
	if err != nil {
		return nil, nil, err
	}
	rf, ok := fsys.(iceio.ReadFileIO)
	if catalogs.IsLocal(s.tbl.Location()) || !ok {
		return s.tbl, fsys, nil
	}
	r := &objectReads{IO: fsys, rf: rf, small: map[string]bool{}, held: map[string][]byte{}}
	for _, g := range groups {
		for _, t := range g.Tasks {
			if n := t.File.FileSizeBytes(); n > 0 && n <= faithful.WholeFileBytes {
				r.small[t.File.FilePath()] = true
			}
			for _, d := range t.DeleteFiles {
				if n := d.FileSizeBytes(); n > 0 && n <= faithful.WholeFileBytes {
					r.small[d.FilePath()] = true
				}
			}
		}
	}
	tbl := table.New(s.tbl.Identifier(), s.tbl.Metadata(), s.tbl.MetadataLocation(),
		func(context.Context) (iceio.IO, error) { return r, nil }, nil)
	return tbl, r, nil
}

// ReadFile reads name whole and, for a small file while the budget lasts,
// keeps the bytes for the Open that follows.
func (r *objectReads) ReadFile(name string) ([]byte, error) {
	r.mu.Lock()
	b, ok := r.held[name]
	r.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := r.rf.ReadFile(name)
	if err != nil || !r.small[name] {
		return b, err
	}
	r.mu.Lock()
	if _, dup := r.held[name]; !dup && r.used+int64(len(b)) <= heldObjectBytes {
		r.held[name] = b
		r.used += int64(len(b))
	}
	r.mu.Unlock()
	return b, nil
}

// Open opens name: a small file from the bytes kept for it (then released)
// or by reading it whole; any other file by ranges, as the FileIO does.
func (r *objectReads) Open(name string) (iceio.File, error) {
	if !r.small[name] {
		return r.IO.Open(name)
	}
	r.mu.Lock()
	b, ok := r.held[name]
	if ok {
		delete(r.held, name)
		r.used -= int64(len(b))
	}
	r.mu.Unlock()
	if !ok {
		var err error
		if b, err = r.rf.ReadFile(name); err != nil {
			return nil, err
		}
	}
	return &memFile{Reader: bytes.NewReader(b), name: name, size: int64(len(b))}, nil
}

// memFile is a file read whole into memory.
type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f *memFile) Stat() (fs.FileInfo, error) { return memInfo{f.name, f.size}, nil }
func (f *memFile) Close() error               { return nil }

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return path.Base(i.name) }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
