package submit

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/testkit"
)

// TestLocalSubmitLedgerURLSecrets: a ledger URL goes through TMS_DB instead
// of argv when it carries a password anywhere, or cannot be parsed.
func TestLocalSubmitLedgerURLSecrets(t *testing.T) {
	t.Parallel()
	for raw, secret := range map[string]bool{
		"sqlite:///var/lib/tms/tms.db":                                   false,
		"postgres://tms@db:5432/tms?sslmode=require":                     false,
		"postgres://tms:hunter2@db:5432/tms":                             true,
		"postgres://tms@db:5432/tms?password=hunter2":                    true,
		"postgres://tms@db:5432/tms?sslmode=verify-full&sslpassword=k3y": true,
		"postgres://tms@db/tms?search_path=x&pool_max_conns=4":           false,
		"postgres://tms@db:5432/tms?%zz":                                 true,
		"postgres://tms:@db:5432/tms":                                    true, // an empty password is still a password field
		"postgres://[::1:5432/tms":                                       true,
	} {
		require.Equal(t, secret, urlHasSecret(raw), raw)
	}
}

// TestLocalSubmitFindsRunner: without a configured path the runner is taken
// from beside the executable first, then from PATH.
func TestLocalSubmitFindsRunner(t *testing.T) {
	t.Parallel()
	exeDir, pathDir := t.TempDir(), t.TempDir()
	exe := func() (string, error) { return filepath.Join(exeDir, "tms-coordinator"), nil }
	onPath := filepath.Join(pathDir, RunnerBinaryName)
	testkit.WriteExecutable(t, onPath, []byte("#!/bin/sh\n"))
	lookPath := func(name string) (string, error) {
		require.Equal(t, RunnerBinaryName, name)
		return onPath, nil
	}
	notFound := func(string) (string, error) { return "", errors.New("not found") }

	got, err := resolveRunner("", exe, lookPath)
	require.NoError(t, err)
	require.Equal(t, onPath, got, "nothing beside the executable: PATH")

	beside := filepath.Join(exeDir, RunnerBinaryName)
	testkit.WriteExecutable(t, beside, []byte("#!/bin/sh\n"))
	got, err = resolveRunner("", exe, lookPath)
	require.NoError(t, err)
	require.Equal(t, beside, got, "beside the executable wins")

	_, err = resolveRunner("", func() (string, error) { return "", errors.New("no executable") }, notFound)
	require.ErrorContains(t, err, "neither next to this executable nor on PATH")

	got, err = resolveRunner(onPath, exe, notFound)
	require.NoError(t, err)
	require.Equal(t, onPath, got, "a configured path is used as is")
}
