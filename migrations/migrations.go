// Package migrations owns the numbered SQL schema migrations of the TMS
// database, one ordered set per backend (PostgreSQL and SQLite), embedded in
// the binary with go:embed.
//
// Files are named NNNN_name.sql under postgres/ and sqlite/. Both backends
// carry the same version numbers and names, numbered contiguously from 1, so a
// database's version means the same schema on either backend. The set is
// parsed and validated when the package is initialised; a malformed set is a
// programming error and panics, so no binary can start with one.
//
// This package must not open databases or run SQL: package store is the only
// package that does, and it applies these migrations (each in its own
// transaction together with its tms_schema_migration row).
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Backend names, as returned by store.Store.Backend.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// Migration is one numbered schema change for one backend.
type Migration struct {
	// Version is the migration's number, contiguous from 1.
	Version int
	// Name is the file name's part after the number, e.g. "ledger".
	Name string
	// SQL is the file's content: one or more statements, run in one transaction.
	SQL string
}

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

var byBackend = mustParseAll(files)

// All returns the migrations of backend ("postgres" or "sqlite") in version
// order. The slice is a copy; callers may keep or modify it.
func All(backend string) ([]Migration, error) {
	ms, ok := byBackend[backend]
	if !ok {
		return nil, fmt.Errorf("migrations: unknown backend %q (want %q or %q)", backend, Postgres, SQLite)
	}
	return slices.Clone(ms), nil
}

// Latest returns the highest migration version this binary knows. It is the
// same for every backend.
func Latest() int {
	return len(byBackend[Postgres])
}

func mustParseAll(fsys fs.FS) map[string][]Migration {
	all, err := parseAll(fsys)
	if err != nil {
		panic(err)
	}
	return all
}

// parseAll reads both backends' directories and checks that they describe
// the same versions under the same names.
func parseAll(fsys fs.FS) (map[string][]Migration, error) {
	all := make(map[string][]Migration, 2)
	for _, backend := range []string{Postgres, SQLite} {
		ms, err := parseDir(fsys, backend)
		if err != nil {
			return nil, err
		}
		all[backend] = ms
	}
	pg, lite := all[Postgres], all[SQLite]
	if len(pg) != len(lite) {
		return nil, fmt.Errorf("migrations: postgres has %d migrations, sqlite has %d; both need the same versions", len(pg), len(lite))
	}
	for i := range pg {
		if pg[i].Name != lite[i].Name {
			return nil, fmt.Errorf("migrations: version %d is %q on postgres but %q on sqlite", pg[i].Version, pg[i].Name, lite[i].Name)
		}
	}
	return all, nil
}

var fileName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// parseDir reads dir's NNNN_name.sql files and checks that their versions run
// 1, 2, 3 … without gaps or duplicates and that none is empty.
func parseDir(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations: read %s: %w", dir, err)
	}
	var ms []Migration
	for _, e := range entries {
		if e.IsDir() {
			return nil, fmt.Errorf("migrations: unexpected directory %s/%s", dir, e.Name())
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migrations: file %s/%s is not named NNNN_name.sql", dir, e.Name())
		}
		version, _ := strconv.Atoi(m[1]) // four digits always parse
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("migrations: read %s/%s: %w", dir, e.Name(), err)
		}
		if strings.TrimSpace(string(body)) == "" {
			return nil, fmt.Errorf("migrations: %s/%s is empty", dir, e.Name())
		}
		ms = append(ms, Migration{Version: version, Name: m[2], SQL: string(body)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("migrations: no migrations in %s", dir)
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations: %s: expected version %d, found %04d_%s.sql (versions must be contiguous from 1)", dir, i+1, m.Version, m.Name)
		}
	}
	return ms, nil
}
