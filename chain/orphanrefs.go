package chain

import (
	"context"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/tms-dev/tms/internal/location"
)

// orphanRefs is the reference set of a table, canonical.
type orphanRefs struct {
	// full maps a canonical path to the spelling the metadata uses.
	full map[string]string
	// byKey maps the path part of a referenced URI (scheme://authority/…)
	// to its spelling, to find a listed file that differs only in scheme or
	// authority.
	byKey map[string]string
	// base maps the base name of every referenced file to its spelling.
	base map[string]string
	// current is the current metadata file.
	current    location.Canonical
	currentRaw string
	// logged maps the normalized base name (metadataBase) of the current
	// metadata file and every metadata log entry to its spelling.
	logged map[string]string
	// metaDirs are the folders metadata files live in: location/metadata
	// and the folder of every logged metadata file.
	metaDirs []location.Canonical
}

func (r *orphanRefs) add(c location.Normaliser, p string) {
	if p == "" {
		return
	}
	r.addCanon(c.Canon(p), p)
}

func (r *orphanRefs) addCanon(cp location.Canonical, p string) {
	r.full[cp.Full] = p
	if cp.Key != cp.Full {
		r.byKey[cp.Key] = p
	}
	r.base[path.Base(cp.Full)] = p
}

// references returns every file the table references: the current
// metadata file and every metadata log entry, version-hint.text (hadoop
// tables; Iceberg Java counts it whether or not it exists), statistics and
// partition-statistics files, and for every snapshot its manifest list,
// manifests and their live entries (data files, position, equality and
// deletion-vector delete files, and the data file a deletion vector
// references). DELETED entries are skipped as Iceberg Java and iceberg-go
// skip them: no snapshot can read such a file unless an older snapshot's
// manifest lists it live, and then that entry references it. Manifest lists
// and unique manifests are read GOMAXPROCS at a time, as iceberg-go does.
func (pl orphanPlanner) references(ctx context.Context, tbl *table.Table, fsys iceio.IO) (*orphanRefs, error) {
	meta := tbl.Metadata()
	r := &orphanRefs{full: map[string]string{}, byKey: map[string]string{}, base: map[string]string{}, logged: map[string]string{}}
	c := pl.canon
	logged := func(p string) {
		cp := c.Canon(p)
		r.addCanon(cp, p)
		r.logged[metadataBase(path.Base(cp.Full))] = p
		dir := cp.Dir()
		if !slices.Contains(r.metaDirs, dir) {
			r.metaDirs = append(r.metaDirs, dir)
		}
	}
	r.currentRaw = tbl.MetadataLocation()
	r.current = c.Canon(r.currentRaw)
	logged(r.currentRaw)
	for e := range meta.PreviousFiles() {
		logged(e.MetadataFile)
	}
	metaDir := strings.TrimSuffix(tbl.Location(), "/") + "/metadata"
	if md := c.Canon(metaDir); !slices.Contains(r.metaDirs, md) {
		r.metaDirs = append(r.metaDirs, md)
	}
	r.add(c, metaDir+"/version-hint.text")
	for st := range meta.Statistics() {
		r.add(c, st.StatisticsPath)
	}
	for st := range meta.PartitionStatistics() {
		r.add(c, st.StatisticsPath)
	}

	snaps := meta.Snapshots()
	workers := runtime.GOMAXPROCS(0)
	lists := make([][]iceberg.ManifestFile, len(snaps))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range snaps {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			mans, err := snaps[i].Manifests(fsys)
			if err != nil {
				return fmt.Errorf("read manifest list %s: %w", snaps[i].ManifestList, err)
			}
			lists[i] = mans
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var unique []iceberg.ManifestFile
	seen := map[string]bool{}
	for i, snap := range snaps {
		r.add(c, snap.ManifestList)
		for _, m := range lists[i] {
			if !seen[m.FilePath()] {
				seen[m.FilePath()] = true
				unique = append(unique, m)
				r.add(c, m.FilePath())
			}
		}
	}

	type entry struct {
		canon location.Canonical
		raw   string
	}
	found := make([][]entry, len(unique))
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i, m := range unique {
		g.Go(func() error {
			var out []entry
			for e, err := range m.Entries(fsys, true) {
				if err != nil {
					return fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
				}
				if err := gctx.Err(); err != nil {
					return err
				}
				df := e.DataFile()
				out = append(out, entry{c.Canon(df.FilePath()), df.FilePath()})
				if ref := df.ReferencedDataFile(); ref != nil && *ref != "" {
					out = append(out, entry{c.Canon(*ref), *ref})
				}
			}
			found[i] = out
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, out := range found {
		for _, e := range out {
			r.addCanon(e.canon, e.raw)
		}
	}
	return r, nil
}
