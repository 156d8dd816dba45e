package secretref_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/secretref"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(path, []byte("s3cret\r\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "empty"), []byte("\n"), 0o600))
	t.Setenv("TMS_TEST_TOKEN", "from-env")

	v, err := secretref.Resolve("file:" + path)
	require.NoError(t, err)
	require.Equal(t, "s3cret", v)
	v, err = secretref.Resolve("env:TMS_TEST_TOKEN")
	require.NoError(t, err)
	require.Equal(t, "from-env", v)

	for ref, want := range map[string]string{
		"s3cret":                              "must be a reference, env:NAME or file:PATH",
		"env:TMS_TEST_TOKEN_UNSET":            "environment variable TMS_TEST_TOKEN_UNSET is not set",
		"file:" + filepath.Join(dir, "x"):     "no such file",
		"file:" + filepath.Join(dir, "empty"): "is empty",
	} {
		_, err := secretref.Resolve(ref)
		require.ErrorContains(t, err, want, ref)
		require.NotContains(t, err.Error(), "s3cret", "a secret never appears in an error")
	}
}

func TestCheck(t *testing.T) {
	require.NoError(t, secretref.Check("env:TMS_TEST_NEVER_SET"), "a reference is checked, not read")
	require.NoError(t, secretref.Check("file:/nonexistent"))
	_, want := secretref.Resolve("s3cret")
	require.EqualError(t, secretref.Check("s3cret"), want.Error())
}
