package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/checksum"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/seaweedtest"
	"github.com/tms-dev/tms/testdata"
)

// The foreign data layouts (every foreign recipe but the local path ones)
// built on object storage behind SeaweedFS's SigV4 REST catalog
// (testdata.BuildForeignOn), then maintained by the real binary with the
// credentials only in TMS_CATALOG_PROP_* variables: the checksum of the
// table as built is that of the rows its builder wrote, the forced chain
// (compaction of every file, a manifest rewrite, expiry of all but the
// current snapshot) is done on every layout and keeps those rows, and
// orphan cleanup deletes exactly the planted orphans (aged through the
// filer) while the kept hidden files and every live file, aged just as
// much, stay. This mirrors chain's TestChainOnForeignLayouts, where every
// type is done on every recipe: no layout is refused or skipped on S3. The
// one difference of the build is the kept hidden file, a _SUCCESS marker
// instead of a .crc sidecar, which SeaweedFS's table bucket refuses (see
// testdata.BuildForeignOn). The secret appears in no argv, output or
// ledger.
func TestForeignLayoutsOnS3(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	s := seaweedtest.Start(t)
	public, secretEnv := s.CatalogArgs(), s.SecretEnv()
	pdir := t.TempDir()
	policies := map[string]string{
		"compaction.json": `{"type": "compaction", "content": {"minDataFileMse": 0, "rewriteOptions": {"min-input-files": 1}}}`,
		"manifests.json":  `{"type": "manifest-rewrite", "content": {"minManifestNumber": 1, "maxAvgManifestSizeBytes": 1073741824}}`,
		"expiry.json":     `{"type": "snapshot-expiry", "content": {"older-than": "0s", "retain-last": 1}}`,
	}
	var policyArgs []string
	for _, name := range []string{"compaction.json", "manifests.json", "expiry.json"} {
		p := filepath.Join(pdir, name)
		require.NoError(t, os.WriteFile(p, []byte(policies[name]), 0o600))
		policyArgs = append(policyArgs, "--policy", p)
	}

	var names []string
	for _, r := range testdata.ForeignRecipes() {
		if !r.LocalOnly {
			names = append(names, r.Name)
		}
	}
	require.ElementsMatch(t, []string{
		"foreign.migrated", "foreign.name-mapped", "foreign.evolved", "foreign.defaults", "foreign.cross-partition-eq-deletes",
		"foreign.uuid-fixed", "foreign.decimal-partitions",
	}, names, "the data layouts")

	// One server, the layouts one after the other, each in a fresh
	// namespace.
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			f, err := testdata.BuildForeignOn(ctx, name, testdata.ForeignTarget{
				CatalogName:  seaweedtest.CatalogName,
				CatalogProps: s.Props(),
				Namespace:    seaweedtest.Ident("foreign")[0],
				SetModTime: func(when time.Time, locations ...string) error {
					s.SetModTime(t, when, locations...)
					return nil
				},
			})
			require.NoError(t, err)
			t.Cleanup(func() {
				for _, b := range f.Expected {
					b.Release()
				}
			})
			_, tbl, err := f.LoadTable(ctx)
			require.NoError(t, err)
			loc := strings.TrimSuffix(tbl.Location(), "/") + "/"
			require.True(t, strings.HasPrefix(loc, "s3://"+seaweedtest.Bucket+"/"), "table location %s", loc)
			require.GreaterOrEqual(t, len(f.Orphans), 2)
			require.NotEmpty(t, f.Kept)
			for _, p := range slices.Concat(f.Orphans, f.Kept) {
				require.True(t, strings.HasPrefix(p, loc), "planted file %s is a location under the table's", p)
			}
			want, err := checksum.Batches(tbl.Schema(), f.Expected)
			require.NoError(t, err)

			tableName := catalogs.IdentString(f.Ident)
			ledgerFile := filepath.Join(t.TempDir(), "replay.db")
			var outputs []string
			runner := func(args ...string) result {
				args = append(append(args, "--table", tableName), public...)
				require.NotContains(t, strings.Join(args, " "), s.SecretKey, "no secret on argv")
				r := execRunner(t, secretEnv, args...)
				outputs = append(outputs, r.stdout, r.stderr)
				return r
			}
			sum := func() checksum.Result {
				t.Helper()
				r := runner("checksum", "--json")
				require.Equal(t, cli.ExitOK, r.code, r.stderr)
				var res checksum.Result
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
				return res
			}
			require.Equal(t, want, sum(), "the binary's checksum of the table as built is that of the rows its builder wrote")

			r := runner(append([]string{"replay", "--types", "compaction,manifest-rewrite,snapshot-expiry",
				"--ledger", "sqlite://" + ledgerFile, "--json"}, policyArgs...)...)
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			var got replayJSON
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
			require.Len(t, got.Types, 3)
			for _, ty := range got.Types {
				t.Logf("%s: %s: %s", ty.Type, ty.Outcome, ty.Reason)
				require.Equal(t, "done", ty.Outcome, "%s: %s", ty.Type, ty.Reason)
			}
			require.EqualValues(t, 0, got.Types[0].MetricsAfter["delete-file-number"], "compaction applied every delete")
			require.EqualValues(t, 1, got.Types[2].MetricsAfter["snapshot-number"])
			require.Equal(t, want, sum(), "same rows after the chain")

			// Every file the table references now is made as old as the
			// planted ones, so that only the references keep it.
			_, after, err := f.LoadTable(ctx)
			require.NoError(t, err, "the table loads through the catalog after the chain")
			fsys, err := after.FS(ctx)
			require.NoError(t, err)
			live := liveLocations(t, after, fsys)
			s.SetModTime(t, time.Now().Add(-30*24*time.Hour), live...)
			listed := listLocations(t, fsys, after.Location())
			for _, p := range slices.Concat(f.Orphans, f.Kept, live) {
				require.True(t, listed[p], "%s is listed before orphan cleanup", p)
			}

			r = runner("replay", "--types", "orphan-cleanup", "--ledger", "sqlite://"+ledgerFile, "--json")
			require.Equal(t, cli.ExitOK, r.code, r.stderr)
			var oc struct {
				Types []struct {
					Outcome string `json:"outcome"`
					Reason  string `json:"reason"`
					Detail  struct {
						Files []struct {
							Path string `json:"path"`
						} `json:"files"`
					} `json:"detail"`
				} `json:"types"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &oc), r.stdout)
			require.Len(t, oc.Types, 1)
			require.Equal(t, "done", oc.Types[0].Outcome, oc.Types[0].Reason)
			var planned []string
			for _, o := range oc.Types[0].Detail.Files {
				planned = append(planned, o.Path)
			}
			require.ElementsMatch(t, f.Orphans, planned, "orphan cleanup plans exactly the planted orphans")
			left := listLocations(t, fsys, after.Location())
			var deleted []string
			for p := range listed {
				if !left[p] {
					deleted = append(deleted, p)
				}
			}
			require.ElementsMatch(t, f.Orphans, deleted, "orphan cleanup deletes exactly the planted orphans")
			for _, p := range slices.Concat(f.Kept, live) {
				require.True(t, left[p], "%s is kept", p)
				file, err := fsys.Open(p)
				require.NoError(t, err, "%s opens", p)
				require.NoError(t, file.Close())
			}
			require.Equal(t, want, sum(), "same rows after orphan cleanup")

			ledgerBytes, err := os.ReadFile(ledgerFile)
			require.NoError(t, err)
			for _, out := range append(outputs, string(ledgerBytes)) {
				require.NotContains(t, out, s.SecretKey, "the secret never reaches output or the ledger")
			}
		})
	}
}

// liveLocations returns the locations of every file tbl's current snapshot
// references: its metadata file, manifest list, manifests, data and delete
// files.
func liveLocations(t *testing.T, tbl *table.Table, fsys iceio.IO) []string {
	t.Helper()
	snap := tbl.CurrentSnapshot()
	require.NotNil(t, snap)
	out := []string{tbl.MetadataLocation(), snap.ManifestList}
	manifests, err := snap.Manifests(fsys)
	require.NoError(t, err)
	for _, m := range manifests {
		out = append(out, m.FilePath())
		for e, err := range m.Entries(fsys, true) {
			require.NoError(t, err)
			out = append(out, e.DataFile().FilePath())
		}
	}
	return out
}

// listLocations lists every file under location through fsys.
func listLocations(t *testing.T, fsys iceio.IO, location string) map[string]bool {
	t.Helper()
	lister, ok := fsys.(iceio.ListableIO)
	require.True(t, ok, "file IO %T cannot list", fsys)
	out := map[string]bool{}
	require.NoError(t, lister.WalkDir(location, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out[p] = true
		}
		return err
	}))
	return out
}
