package testdb

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/freeport"
	"github.com/tms-dev/tms/internal/testkit"
)

// PrivatePostgres is a PostgreSQL server of its own, started by a test on a
// free port from the installed server binaries, for tests that stop and
// restart the database under a running coordinator. It uses trust auth.
type PrivatePostgres struct {
	// URL is the server's postgres database.
	URL  string
	bin  string // initdb and pg_ctl live here
	data string
	port int
	user string // run the binaries as this user ("" for the current one)
}

// StartPrivatePostgres initdbs a cluster in a temporary directory, starts it
// and stops it when the test ends. The server binaries are found under
// /usr/lib/postgresql/*/bin (newest) or through pg_config. When the test
// runs as root the cluster is owned by and run as the postgres user, as
// initdb requires.
func StartPrivatePostgres(t testing.TB) *PrivatePostgres {
	t.Helper()
	testkit.NeedsService(t, "PostgreSQL's binaries")
	bin := postgresBinDir(t)
	dir, err := os.MkdirTemp("", "tms-private-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &PrivatePostgres{bin: bin, data: filepath.Join(dir, "data"), port: freePort(t)}
	if os.Geteuid() == 0 {
		p.user = "postgres"
		require.NoError(t, os.Chmod(dir, 0o777))
	}
	p.run(t, filepath.Join(bin, "initdb"), "-D", p.data, "-A", "trust", "-U", "postgres", "--no-sync")
	p.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	p.Start(t)
	t.Cleanup(func() { p.pgctl(nil, "stop", "-m", "immediate") })
	return p
}

// Start starts the server and waits until it accepts connections.
func (p *PrivatePostgres) Start(t testing.TB) {
	t.Helper()
	require.NoError(t, p.pgctl(t, "start", "-w", "-t", "60", "-l", filepath.Join(filepath.Dir(p.data), "server.log"),
		"-o", fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off", p.port, filepath.Dir(p.data))))
}

// Stop stops the server at once (pg_ctl stop -m immediate): clients see
// their connections drop and new ones refused.
func (p *PrivatePostgres) Stop(t testing.TB) {
	t.Helper()
	require.NoError(t, p.pgctl(t, "stop", "-w", "-m", "immediate"))
}

func (p *PrivatePostgres) pgctl(t testing.TB, args ...string) error {
	cmd := p.command(filepath.Join(p.bin, "pg_ctl"), append([]string{"-D", p.data}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %v: %v\n%s", args, err, out)
	}
	return nil
}

func (p *PrivatePostgres) run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := p.command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %v:\n%s", name, args, out)
}

func (p *PrivatePostgres) command(name string, args ...string) *exec.Cmd {
	if p.user != "" {
		return exec.Command("runuser", append([]string{"-u", p.user, "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func postgresBinDir(t testing.TB) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	out, err := exec.Command("pg_config", "--bindir").Output()
	require.NoError(t, err, "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or from pg_config")
	return string(out[:len(out)-1])
}

func freePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.One()
	require.NoError(t, err)
	return port
}
