package chain

import (
	"context"
	stdfs "io/fs"
	"sort"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/seaweedtest"
	"github.com/tms-dev/tms/testdata"
)

// On S3 orphan cleanup lists a table flat (blobIO finds the gocloud FileIO
// under the chain's recording wrapper) and sees exactly the files a
// directory walk sees, with the same sizes and modification times: data
// files in partition folders, metadata, a hidden marker, and a nested
// folder; directory markers are not files.
func TestListFilesFlatOnS3(t *testing.T) {
	t.Parallel()
	s := seaweedtest.Start(t)
	ctx := context.Background()
	sc := testdata.Schema()
	cf, _ := sc.FindFieldByName("category")
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{cf.ID}, FieldID: 1000, Name: "category", Transform: iceberg.IdentityTransform{}})
	_, tbl := seaweedtest.CreateTable(t, s.Catalog(t), "listing", sc, catalog.WithPartitionSpec(&spec))
	tbl, err := testdata.FillSmallFiles(ctx, tbl, 12, 20)
	require.NoError(t, err)
	raw, err := tbl.FS(ctx)
	require.NoError(t, err)
	for _, rel := range []string{"data/category=c1/_SUCCESS", "data/category=c2/nested/00000-0-x.parquet"} {
		require.NoError(t, raw.(iceio.WriteFileIO).WriteFile(tbl.Location()+"/"+rel, []byte("x")))
	}
	wrapped := recordingIO{IO: raw, rec: &recorder{}}
	_, ok := blobIO(wrapped)
	require.True(t, ok, "the gocloud FileIO is found under the recording wrapper")

	type entry struct {
		size  int64
		mtime time.Time
	}
	flat := map[string]entry{}
	require.NoError(t, listFiles(ctx, wrapped, tbl.Location(), func(string) bool { return false }, nil, func(p string, size int64, mtime time.Time) {
		flat[p] = entry{size, mtime.Truncate(time.Second)}
	}))
	walked := map[string]entry{}
	require.NoError(t, raw.(iceio.ListableIO).WalkDir(tbl.Location(), func(p string, d stdfs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		walked[p] = entry{info.Size(), info.ModTime().Truncate(time.Second)}
		return nil
	}))
	require.Equal(t, walked, flat)
	var names []string
	for p := range flat {
		names = append(names, p)
	}
	sort.Strings(names)
	require.Contains(t, names, tbl.Location()+"/data/category=c1/_SUCCESS")
	require.Contains(t, names, tbl.Location()+"/data/category=c2/nested/00000-0-x.parquet")
	require.Contains(t, names, tbl.MetadataLocation())
	require.Greater(t, len(names), 12+2, "data files, both planted files and the metadata")
}
