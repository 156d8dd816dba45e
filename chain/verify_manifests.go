package chain

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// ManifestRewriteDetail is the TypeReport.Detail of a manifest rewrite
// that committed.
type ManifestRewriteDetail struct {
	RewrittenManifests int `json:"rewritten_manifests"`
	AddedManifests     int `json:"added_manifests"`
	// Verified is the pre-commit check that the rewrite kept every live
	// file with its metadata (of the last attempt).
	Verified ManifestVerification `json:"verified"`
	// Rebases lists the times the rewrite was planned again on a head that
	// had moved (see Rebase).
	Rebases []Rebase `json:"rebases,omitempty"`
}

// ManifestVerification is what the manifest-rewrite verifier compared.
type ManifestVerification struct {
	// LiveFiles is the number of live data and delete files, the same
	// before and after.
	LiveFiles int   `json:"live_files"`
	Records   int64 `json:"records"`
	ElapsedUs int64 `json:"elapsed_us"`
}

// liveEntry is what a live manifest entry says about its file; a manifest
// rewrite must keep all of it. The data sequence number matters most: an
// entry that got a newer one would escape the equality deletes that apply
// to it, and its deleted rows would come back.
type liveEntry struct {
	content  iceberg.ManifestEntryContent
	count    int64
	specID   int32
	part     string
	dataSeq  int64
	fileSeq  int64
	eqFields string
}

// verifyManifestRewrite checks that the snapshot after a manifest rewrite
// has exactly the live files of before, each with the same content, record
// count, spec, partition and sequence numbers. It reads both snapshots'
// manifests.
func verifyManifestRewrite(ctx context.Context, fs iceio.IO, before, after *table.Snapshot) (v ManifestVerification, err error) {
	start := time.Now()
	defer func() { v.ElapsedUs = time.Since(start).Microseconds() }()
	was, err := liveEntries(ctx, fs, before)
	if err != nil {
		return v, err
	}
	now, err := liveEntries(ctx, fs, after)
	if err != nil {
		return v, err
	}
	for path, e := range was {
		n, ok := now[path]
		if !ok {
			return v, fmt.Errorf("%w: manifest rewrite dropped live file %s", errVerify, path)
		}
		if n != e {
			return v, fmt.Errorf("%w: manifest rewrite changed the entry of %s: %+v, was %+v", errVerify, path, n, e)
		}
		v.Records += e.count
	}
	for path := range now {
		if _, ok := was[path]; !ok {
			return v, fmt.Errorf("%w: manifest rewrite added live file %s", errVerify, path)
		}
	}
	v.LiveFiles = len(was)
	return v, nil
}

func liveEntries(ctx context.Context, fs iceio.IO, snap *table.Snapshot) (map[string]liveEntry, error) {
	out := map[string]liveEntry{}
	if snap == nil {
		return out, nil
	}
	err := eachLiveEntry(ctx, fs, snap, func(e iceberg.ManifestEntry) error {
		df := e.DataFile()
		fileSeq := int64(-1)
		if p := e.FileSequenceNum(); p != nil {
			fileSeq = *p
		}
		le := liveEntry{content: df.ContentType(), count: df.Count(), specID: df.SpecID(),
			part: fmt.Sprint(df.Partition()), dataSeq: e.SequenceNum(), fileSeq: fileSeq,
			eqFields: fmt.Sprint(df.EqualityFieldIDs())}
		// Deletion vectors of many data files share one Puffin file:
		// each is its own entry, keyed by the data file it names.
		key := deleteKey(df)
		if prev, dup := out[key]; dup {
			return fmt.Errorf("%w: file %s is live twice (%v and %v)", errVerify, df.FilePath(), prev.content, le.content)
		}
		out[key] = le
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
