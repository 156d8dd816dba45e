package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/testdata"
)

// run runs tms-runner in-process with args and returns exit code, stdout and
// stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run("tms-runner", commands(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTestdataSampleChecksum(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	code, out, stderr := run(t, "testdata", "--out", dir, "--recipe", "tms.small_files", "--recipe", "tms.deletes")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, out, "tms.small_files")
	require.Contains(t, out, "tms.deletes")

	code, out, stderr = run(t, "sample", "--warehouse-dir", dir, "--table", "tms.small_files", "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	var got sampleOutput
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, "tms.small_files", got.Table)
	require.NotZero(t, got.SnapshotID)
	require.EqualValues(t, 200, got.Metrics.DataFileNumber)
	require.EqualValues(t, 200, got.Metrics.SmallFileNumber)
	require.EqualValues(t, 200_000, got.Metrics.RecordCount)
	require.EqualValues(t, 0, got.Metrics.DeleteFileNumber)

	// The raw JSON keys are the contract other tools read.
	var raw struct {
		Metrics map[string]any `json:"metrics"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	for _, k := range []string{"file-number", "data-file-number", "position-delete-file-number",
		"equality-delete-file-number", "delete-file-number", "small-file-number", "data-file-mse",
		"avg-file-size", "total-file-size", "record-count", "manifest-number", "avg-manifest-size",
		"snapshot-number", "oldest-snapshot-age-ms", "partition-number"} {
		require.Contains(t, raw.Metrics, k)
	}

	// --rows-per-append reshapes every chosen recipe: 5 appends of 3 rows.
	small := t.TempDir()
	code, _, stderr = run(t, "testdata", "--out", small, "--recipe", "tms.orphans", "--rows-per-append", "3")
	require.Equal(t, cli.ExitOK, code, stderr)
	code, out, stderr = run(t, "sample", "--warehouse-dir", small, "--table", "tms.orphans", "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.EqualValues(t, 5, got.Metrics.DataFileNumber)
	require.EqualValues(t, 15, got.Metrics.RecordCount)

	code, out, stderr = run(t, "sample", "--warehouse-dir", dir, "--all")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, out, "data-file-mse")
	require.Contains(t, out, "tms.deletes")

	code, out, stderr = run(t, "checksum", "--warehouse-dir", dir, "--table", "tms.small_files", "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	var sum struct {
		Rows     int64  `json:"rows"`
		Checksum string `json:"checksum"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	require.EqualValues(t, 200_000, sum.Rows)
	require.NotEmpty(t, sum.Checksum)

	// The same recipe built elsewhere reads the same rows (deletes applied).
	code, out, stderr = run(t, "checksum", "--warehouse-dir", dir, "--table", "tms.deletes", "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	dir2 := testdata.BuildT(t, "tms.deletes")
	code, out2, stderr := run(t, "checksum", "--warehouse-dir", dir2, "--table", "tms.deletes", "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.JSONEq(t, out, out2)
	require.Contains(t, out, `"rows":9900`)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	dir := testdata.BuildT(t, "tms.orphans")

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown command", []string{"nope"}, cli.ExitUsage, `unknown command "nope"`},
		{"unknown flag", []string{"sample", "--nope"}, cli.ExitUsage, "unknown flag: --nope"},
		{"no table", []string{"sample", "--warehouse-dir", dir}, cli.ExitUsage, "--table is required"},
		{"no catalog", []string{"sample", "--table", "tms.orphans"}, cli.ExitUsage, "--warehouse-dir"},
		{"missing warehouse", []string{"sample", "--warehouse-dir", filepath.Join(dir, "nope"), "--table", "tms.orphans"}, cli.ExitUsage, "has no catalog.db"},
		{"bad ident", []string{"sample", "--warehouse-dir", dir, "--table", "small_files"}, cli.ExitUsage, `table "small_files"`},
		{"missing table", []string{"sample", "--warehouse-dir", dir, "--table", "tms.nope"}, cli.ExitFailure, "table tms.nope does not exist"},
		{"bad snapshot", []string{"sample", "--warehouse-dir", dir, "--table", "tms.orphans", "--snapshot-id", "42"}, cli.ExitFailure, "42"},
		{"bad catalog prop", []string{"sample", "--catalog-prop", "type", "--table", "tms.t"}, cli.ExitUsage, `catalog property "type"`},
		{"unknown recipe", []string{"testdata", "--out", t.TempDir(), "--recipe", "tms.nope"}, cli.ExitUsage, "tms.nope"},
		{"bad scale", []string{"testdata", "--out", t.TempDir(), "--scale", "0"}, cli.ExitUsage, "--scale"},
		{"bad rows per append", []string{"testdata", "--out", t.TempDir(), "--rows-per-append", "-5"}, cli.ExitUsage, "--rows-per-append"},
		{"checksum missing table", []string{"checksum", "--warehouse-dir", dir, "--table", "tms.nope"}, cli.ExitFailure, "table tms.nope does not exist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			require.Empty(t, out, "a failed command prints nothing on stdout")
			require.Contains(t, stderr, tc.want)
		})
	}
}

func TestCorruptMetadata(t *testing.T) {
	t.Parallel()
	dir := testdata.BuildT(t, "tms.orphans")
	metas, err := filepath.Glob(filepath.Join(dir, "warehouse", "tms.db", "orphans", "metadata", "*.metadata.json"))
	require.NoError(t, err)
	require.NotEmpty(t, metas)
	// The catalog points at the newest metadata file; corrupt every one.
	for _, m := range metas {
		require.NoError(t, os.WriteFile(m, []byte("{not json"), 0o644))
	}
	code, out, stderr := run(t, "sample", "--warehouse-dir", dir, "--table", "tms.orphans", "--json")
	require.Equal(t, cli.ExitFailure, code)
	require.Empty(t, out)
	require.Contains(t, stderr, "tms.orphans")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %s", stderr)

	for _, m := range metas {
		require.NoError(t, os.Remove(m))
	}
	code, _, stderr = run(t, "checksum", "--warehouse-dir", dir, "--table", "tms.orphans")
	require.Equal(t, cli.ExitFailure, code)
	require.Contains(t, stderr, "metadata")
}
