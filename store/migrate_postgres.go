package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/migrations"
)

// This file holds the PostgreSQL side of schema versioning and migration.

// schemaVersion reads the highest applied migration.
func (s *postgresStore) schemaVersion(ctx context.Context) (int, error) {
	return pgSchemaVersion(ctx, s.pool)
}

type pgQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pgSchemaVersion returns 0 when the version table does not exist yet. It
// looks the table up through search_path, like every other statement, and
// checks for it first: a statement naming a missing table would abort the
// surrounding transaction.
func pgSchemaVersion(ctx context.Context, q pgQuerier) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('tms_schema_migration') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, pgError("read schema version", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM tms_schema_migration`).Scan(&v); err != nil {
		return 0, pgError("read schema version", err)
	}
	return v, nil
}

// migrate applies pending migrations one transaction each. Every
// transaction first takes a transaction-scoped advisory lock keyed by the
// current schema and re-reads the version under it, so concurrent migrators
// (other nodes, other processes) apply each migration exactly once and the
// later ones find nothing to do.
func (s *postgresStore) migrate(ctx context.Context, ms []migrations.Migration) ([]int, error) {
	latest := len(ms)
	var applied []int
	for {
		var (
			done bool
			m    migrations.Migration
		)
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('tms_schema_migration:' || coalesce(current_schema(), ''), 0))`); err != nil {
				return pgError("lock schema", err)
			}
			current, err := pgSchemaVersion(ctx, tx)
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
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("store: apply migration %04d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO tms_schema_migration (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, utc(s.now())); err != nil {
				return fmt.Errorf("store: record migration %04d_%s: %w", m.Version, m.Name, err)
			}
			return nil
		})
		if err != nil || done {
			return applied, err
		}
		s.log.Info("applied migration", zap.String("backend", BackendPostgres), zap.Int("version", m.Version), zap.String("name", m.Name))
		applied = append(applied, m.Version)
	}
}
