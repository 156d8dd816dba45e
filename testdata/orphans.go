package testdata

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/apache/iceberg-go/table"
)

// OrphansFile is the sidecar, in the build directory, that lists every
// planted orphan file of every table built there (JSON, see OrphanFile).
const OrphansFile = "orphans.json"

// OrphanAge is how far in the past the mtime of an "old" planted orphan is
// set: well beyond the 72 h below which orphan cleanup must never delete.
const OrphanAge = 5 * 24 * time.Hour

// OrphanFile is one planted file that no snapshot, manifest list, manifest
// or metadata log references.
type OrphanFile struct {
	// Table is the recipe (table) name the file was planted next to.
	Table string `json:"table"`
	// Path is the absolute OS path.
	Path string `json:"path"`
	// Location is the file:// URL, as Iceberg metadata would spell it.
	Location string `json:"location"`
	// ModTime is the mtime the file was given.
	ModTime time.Time `json:"mtime"`
	// Old reports ModTime is OrphanAge before the build, i.e. older than 72 h.
	Old bool `json:"old"`
}

// orphanKind plants one kind of stray file: its path relative to the table
// location and its content. hex is a deterministic random token.
type orphanKind struct {
	rel     func(hex string, n int) string
	content []byte
}

var (
	parquetBytes = []byte("PAR1\x15\x00\x15\x00orphan-not-a-real-footer\x00\x00\x00\x00PAR1")
	avroBytes    = []byte("Obj\x01orphan-not-a-real-avro")
)

// orphanKinds cover what a failed or crashed writer leaves behind: data files
// with writer-style names (flat and in a partition folder), manifests and
// manifest lists, temp files and names no writer would choose.
var orphanKinds = []orphanKind{
	{func(h string, n int) string { return fmt.Sprintf("data/%05d-0-%s-00001.parquet", n, h) }, parquetBytes},
	{func(h string, n int) string {
		return fmt.Sprintf("data/ts_day=2023-12-31/%05d-1-%s-00001.parquet", n, h)
	}, parquetBytes},
	{func(h string, n int) string { return fmt.Sprintf("metadata/%s-m0.avro", h) }, avroBytes},
	{func(h string, n int) string { return fmt.Sprintf("metadata/snap-%d-1-%s.avro", 1_000_000+n, h) }, avroBytes},
	{func(h string, _ int) string { return "metadata/" + h + ".metadata.json.tmp" }, []byte("{")},
	{func(h string, _ int) string { return "data/stray-" + h }, []byte("not iceberg")},
}

// plantOrphans writes r.Orphans×scale unreferenced files under tbl's data/ and
// metadata/ folders; even-numbered files get mtime now-OrphanAge, odd ones
// now, so every kind exists both old and fresh.
func plantOrphans(tbl *table.Table, r Recipe, scale int, now time.Time) ([]OrphanFile, error) {
	n := r.Orphans * scale
	if n == 0 {
		return nil, nil
	}
	root, err := localPath(tbl.Location())
	if err != nil {
		return nil, err
	}
	rng := seed(r.Name, 3)
	out := make([]OrphanFile, 0, n)
	for i := range n {
		kind := orphanKinds[(i/2)%len(orphanKinds)]
		hex := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
		rel := kind.rel(hex, i)
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("plant orphan: %w", err)
		}
		if err := os.WriteFile(path, kind.content, 0o644); err != nil {
			return nil, fmt.Errorf("plant orphan: %w", err)
		}
		old := i%2 == 0
		mtime := now.Truncate(time.Second)
		if old {
			mtime = mtime.Add(-OrphanAge)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			return nil, fmt.Errorf("plant orphan: %w", err)
		}
		out = append(out, OrphanFile{
			Table: r.Name, Path: path, Location: "file://" + filepath.ToSlash(path), ModTime: mtime, Old: old,
		})
	}
	return out, nil
}

// orphanSidecar is the JSON layout of OrphansFile.
type orphanSidecar struct {
	Files []OrphanFile `json:"files"`
}

// ReadOrphans returns the planted orphan files recorded in dir's
// OrphansFile; no file means no orphans.
func ReadOrphans(dir string) ([]OrphanFile, error) {
	b, err := os.ReadFile(filepath.Join(dir, OrphansFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var sc orphanSidecar
	if err := json.Unmarshal(b, &sc); err != nil {
		return nil, fmt.Errorf("%s: %w", OrphansFile, err)
	}
	return sc.Files, nil
}

// recordOrphans rewrites dir's OrphansFile: entries of tables built now are
// replaced by their new orphans, entries of other tables are kept.
func recordOrphans(dir string, built []TableReport) error {
	prev, err := ReadOrphans(dir)
	if err != nil {
		return fmt.Errorf("testdata: %w", err)
	}
	rebuilt := map[string]bool{}
	for _, t := range built {
		rebuilt[t.Name] = true
	}
	files := slices.DeleteFunc(prev, func(o OrphanFile) bool { return rebuilt[o.Table] })
	for _, t := range built {
		files = append(files, t.Orphans...)
	}
	if len(files) == 0 && len(prev) == 0 {
		return nil
	}
	b, err := json.MarshalIndent(orphanSidecar{Files: files}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, OrphansFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("testdata: write %s: %w", OrphansFile, err)
	}
	return nil
}
