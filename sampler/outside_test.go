package sampler_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/sampler"
)

// addAt commits data files at the given paths without writing them, as
// add_files registers files that live elsewhere.
func (b bundle) addAt(t *testing.T, tbl *table.Table, paths ...string) *table.Table {
	t.Helper()
	files := make([]iceberg.DataFile, len(paths))
	for i, p := range paths {
		bld, err := iceberg.NewDataFileBuilder(tbl.Spec(), iceberg.EntryContentData, p, iceberg.ParquetFile, nil, nil, nil, 10, 100)
		require.NoError(t, err)
		files[i] = bld.Build()
	}
	tx := tbl.NewTransaction()
	require.NoError(t, tx.AddDataFiles(b.ctx, files, nil))
	tbl, err := tx.Commit(b.ctx)
	require.NoError(t, err)
	return tbl
}

func TestSampleOutsideFolders(t *testing.T) {
	t.Parallel()
	b := setup(t)

	plain := b.appendJSON(t, b.create(t, "plain", nil), `[{"id": 1, "region": "eu"}]`)
	res, err := sampler.Sample(b.ctx, plain, 0, sampler.Options{})
	require.NoError(t, err)
	require.Nil(t, res.OutsideFolders, "a table whose files all lie under its location")

	tbl := b.create(t, "brought", nil)
	loc := localPath(tbl.Location())
	other := filepath.Join(b.dir, "other")
	tbl = b.addAt(t, tbl,
		other+"/data/a.parquet",
		other+"/data/deep/b.parquet",    // below a folder already named
		other+"-x/c.parquet",            // a sibling spelled with the same prefix
		"file://"+loc+"/data/d.parquet", // the location in another spelling: inside
		tbl.Location()+"/data/e.parquet",
	)
	res, err = sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
	require.NoError(t, err)
	require.Equal(t, []string{other + "-x", other + "/data"}, res.OutsideFolders)
}

func TestSampleOutsideFoldersCollapse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tbl := b.create(t, "many", nil)
	base := filepath.Join(b.dir, "export")
	var paths []string
	for i := range sampler.MaxOutsideFolders + 1 {
		paths = append(paths, fmt.Sprintf("%s/p=%d/q=%d/f.parquet", base, i%3, i))
	}
	tbl = b.addAt(t, tbl, paths...)
	res, err := sampler.Sample(b.ctx, tbl, 0, sampler.Options{})
	require.NoError(t, err)
	require.Equal(t, []string{base + "/p=0", base + "/p=1", base + "/p=2"}, res.OutsideFolders,
		"more folders than the limit are named by their parents")
}
