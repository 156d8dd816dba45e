package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/migrations"
)

// Migrate brings the database url names up to this binary's schema and
// returns the versions it applied (empty when it was already current). Each
// migration runs in its own transaction together with its
// tms_schema_migration row, so a failure leaves the database at the last
// complete version. It is safe to run from several nodes at once: on
// PostgreSQL every migration transaction first takes an advisory lock keyed
// by the schema, on SQLite a BEGIN IMMEDIATE write lock, and the version is
// re-read under the lock, so each migration is applied exactly once. A
// database ahead of the binary is refused with ErrSchemaAhead and nothing is
// applied. log may be nil; each applied migration is logged at info level.
func Migrate(ctx context.Context, url string, log *zap.Logger) (applied []int, err error) {
	if log == nil {
		log = zap.NewNop()
	}
	b, err := openBackend(ctx, url, log, time.Now, false)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	ms, err := migrations.All(b.Backend())
	if err != nil {
		return nil, err
	}
	return b.migrate(ctx, ms)
}

// MigrationStatus returns the database's schema version and the latest one
// this binary knows, for `tms-coordinator migrate --check`. It changes
// nothing: a missing SQLite file reports version 0 and is not created.
func MigrationStatus(ctx context.Context, url string) (current, latest int, err error) {
	latest = migrations.Latest()
	if scheme, path, ok := strings.Cut(url, "://"); ok && strings.EqualFold(scheme, "sqlite") {
		if err := validateSQLitePath(path); err != nil {
			return 0, latest, err
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return 0, latest, nil
		}
	}
	b, err := openBackend(ctx, url, zap.NewNop(), time.Now, false)
	if err != nil {
		return 0, latest, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	current, err = b.schemaVersion(ctx)
	if err != nil {
		return 0, latest, fmt.Errorf("store: read schema version: %w", err)
	}
	return current, latest, nil
}

// Ping checks that the database at url answers a query. A SQLite file that
// does not exist yet counts as reachable: migrate creates it.
func Ping(ctx context.Context, url string) error {
	_, _, err := MigrationStatus(ctx, url)
	return err
}
