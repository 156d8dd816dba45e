package store

import (
	"context"
	"database/sql"
	"fmt"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/migrations"
)

// This file holds the SQLite side of schema versioning and migration.

// schemaVersion reads the highest applied migration.
func (s *sqliteStore) schemaVersion(ctx context.Context) (int, error) {
	return sqliteSchemaVersion(ctx, s.r)
}

// sqliteQuerier is what the read pool and a transaction offer.
type sqliteQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// sqliteSchemaVersion returns 0 when the version table does not exist yet.
func sqliteSchemaVersion(ctx context.Context, q sqliteQuerier) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tms_schema_migration'`).Scan(&n); err != nil {
		return 0, sqliteError("read schema version", err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM tms_schema_migration`).Scan(&v); err != nil {
		return 0, sqliteError("read schema version", err)
	}
	return v, nil
}

// migrate applies pending migrations one BEGIN IMMEDIATE transaction each.
// The write lock is taken before the version is read, so concurrent
// migrators (another process on the same file) wait, re-read the version
// and apply each migration exactly once.
func (s *sqliteStore) migrate(ctx context.Context, ms []migrations.Migration) ([]int, error) {
	latest := len(ms)
	var applied []int
	for {
		var (
			done bool
			m    migrations.Migration
		)
		err := s.writeTx(ctx, func(tx *sql.Tx) error {
			current, err := sqliteSchemaVersion(ctx, tx)
			if err != nil {
				return err
			}
			if current > latest {
				return schemaAheadError(current, latest)
			}
			if current == latest {
				done = true
				return nil
			}
			m = ms[current] // version current+1
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("store: apply migration %04d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO tms_schema_migration (version, name, applied_at) VALUES (?1, ?2, ?3)`,
				m.Version, m.Name, sqliteTime(s.now())); err != nil {
				return fmt.Errorf("store: record migration %04d_%s: %w", m.Version, m.Name, err)
			}
			return nil
		})
		if err != nil || done {
			return applied, err
		}
		s.log.Info("applied migration", zap.String("backend", BackendSQLite), zap.Int("version", m.Version), zap.String("name", m.Name))
		applied = append(applied, m.Version)
	}
}
