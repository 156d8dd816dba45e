package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// validatePaths rejects an empty or blank path in a deletion plan.
func validatePaths(paths []string) error {
	for i, p := range paths {
		if strings.TrimSpace(p) == "" {
			return fmt.Errorf("%w: pending delete path %d is empty", ErrInvalidArgument, i)
		}
	}
	return nil
}

// PendingDeletes lists the table's plan.
func (s *sqlStore) PendingDeletes(ctx context.Context, tableID int64) ([]string, error) {
	paths, err := collect(ctx, s.b.read(), func(row scanner) (p string, err error) { return p, row.Scan(&p) },
		`SELECT path FROM pending_delete WHERE table_id = `+s.b.param(1)+` ORDER BY path`, tableID)
	if err != nil {
		return nil, s.b.wrap("pending deletes", err)
	}
	return paths, nil
}

// AddPendingDeletes records the plan in one transaction that first checks
// the fence under a share lock, so a fence bump cannot land in between.
func (s *postgresStore) AddPendingDeletes(ctx context.Context, id, fence int64, paths []string) error {
	const op = "add pending deletes"
	if err := validatePaths(paths); err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return pgError(op, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var (
		tableID, current int64
		finished         bool
	)
	err = tx.QueryRow(ctx, `SELECT table_id, fence, finished_at IS NOT NULL FROM table_maintenance_job WHERE id = $1 FOR SHARE`, id).
		Scan(&tableID, &current, &finished)
	if errors.Is(err, pgx.ErrNoRows) {
		return fenceError(op, id, fence, false, 0, false)
	}
	if err != nil {
		return pgError(op, err)
	}
	if current != fence || finished {
		return fenceError(op, id, fence, true, current, finished)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO pending_delete (table_id, path, job_id)
		SELECT $1, p, $2 FROM unnest($3::text[]) AS p
		ON CONFLICT (table_id, path) DO NOTHING`, tableID, id, paths); err != nil {
		return pgError(op, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return pgError(op, err)
	}
	return nil
}

// DonePendingDeletes removes paths from the table's plan.
func (s *postgresStore) DonePendingDeletes(ctx context.Context, tableID int64, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM pending_delete WHERE table_id = $1 AND path = ANY($2::text[])`, tableID, paths); err != nil {
		return pgError("done pending deletes", err)
	}
	return nil
}

// AddPendingDeletes records the plan in one write transaction with the
// fence check.
func (s *sqliteStore) AddPendingDeletes(ctx context.Context, id, fence int64, paths []string) error {
	const op = "add pending deletes"
	if err := validatePaths(paths); err != nil {
		return err
	}
	var fenceErr error
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var (
			tableID, current int64
			finished         bool
		)
		err := tx.QueryRowContext(ctx, `SELECT table_id, fence, finished_at IS NOT NULL FROM table_maintenance_job WHERE id = ?1`, id).
			Scan(&tableID, &current, &finished)
		if errors.Is(err, sql.ErrNoRows) {
			fenceErr = fenceError(op, id, fence, false, 0, false)
			return nil
		}
		if err != nil {
			return err
		}
		if current != fence || finished {
			fenceErr = fenceError(op, id, fence, true, current, finished)
			return nil
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO pending_delete (table_id, path, job_id) VALUES (?1, ?2, ?3) ON CONFLICT (table_id, path) DO NOTHING`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, p := range paths {
			if _, err := stmt.ExecContext(ctx, tableID, p, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return sqliteError(op, err)
	}
	return fenceErr
}

// DonePendingDeletes removes paths from the table's plan.
func (s *sqliteStore) DonePendingDeletes(ctx context.Context, tableID int64, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `DELETE FROM pending_delete WHERE table_id = ?1 AND path = ?2`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, p := range paths {
			if _, err := stmt.ExecContext(ctx, tableID, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return sqliteError("done pending deletes", err)
	}
	return nil
}
