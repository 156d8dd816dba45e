package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdfs "io/fs"
	"slices"
	"strings"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/io/gocloud/blobfs"
	"gocloud.dev/blob"
)

// listFiles calls fn for every file under loc with its size and
// modification time. On an object store addressed as scheme://bucket/key
// (s3, s3a, s3n, gs) it lists the keys under loc flat, a page of up to
// 1,000 objects a request, where a directory walk makes one request per
// folder (per partition); directory-marker objects (keys ending in "/")
// are not files. Elsewhere it walks the directories, skipping the folders
// below loc that hiddenDir names hidden; the caller filters the files of
// hidden folders by their relative paths (hiddenFilter.hiddenRel) either
// way, so both see the same files.
//
// A symbolic link is never passed to fn, so it is never deleted: on the
// local FileIO the walk follows a link to a folder, once per folder, and
// skips every other link (localWalk); another FileIO's walk skips every
// link. The skipped ones go to links (which may be nil).
func listFiles(ctx context.Context, lister iceio.ListableIO, loc string, hiddenDir func(name string) bool, links *linkLog, fn func(path string, size int64, mtime time.Time)) error {
	if links == nil {
		links = &linkLog{}
	}
	if bfs, ok := blobIO(lister); ok {
		// Split as iceberg-go's blob FileIO does: the key is the raw text
		// after the bucket, never URL-unescaped.
		scheme, rest, _ := strings.Cut(loc, "://")
		bucket, key, _ := strings.Cut(rest, "/")
		if bucket != "" && !strings.ContainsAny(bucket, "?#") && slices.Contains([]string{"s3", "s3a", "s3n", "gs"}, scheme) {
			base := scheme + "://" + bucket + "/"
			prefix := strings.TrimSuffix(key, "/") + "/"
			if prefix == "/" { // a table at the bucket's root
				prefix = ""
			}
			it := bfs.Bucket.List(&blob.ListOptions{Prefix: prefix})
			for {
				obj, err := it.Next(ctx)
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return fmt.Errorf("list %s: %w", loc, err)
				}
				if obj.IsDir || strings.HasSuffix(obj.Key, "/") {
					continue
				}
				fn(base+obj.Key, obj.Size, obj.ModTime)
			}
		}
	}
	if localIO(lister) {
		root, err := localRoot(lister, loc)
		if err != nil {
			return err
		}
		w := localWalk{ctx: ctx, hidden: hiddenDir, fn: fn, log: links}
		return w.run(root)
	}
	return lister.WalkDir(loc, func(p string, d stdfs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.Type()&stdfs.ModeSymlink != 0 {
			links.skip(p, "", linkUnfollowed)
			return nil
		}
		if d.IsDir() {
			if strings.TrimSuffix(p, "/") != strings.TrimSuffix(loc, "/") && hiddenDir(d.Name()) {
				return stdfs.SkipDir // nothing below a hidden folder is listed
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fn(p, info.Size(), info.ModTime())
		return nil
	})
}

// blobIO returns the gocloud FileIO under fsys, through the chain's own
// wrappers.
func blobIO(fsys iceio.IO) (*blobfs.FileIO, bool) {
	for {
		switch v := fsys.(type) {
		case *blobfs.FileIO:
			return v, true
		case recordingIO:
			fsys = v.IO
		default:
			return nil, false
		}
	}
}
