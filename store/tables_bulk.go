package store

import (
	"context"
	"database/sql"
	"fmt"
)

// maxRegisterBatch bounds one RegisterTables call.
const maxRegisterBatch = 10_000

func validateRefs(refs []TableRef) error {
	if len(refs) > maxRegisterBatch {
		return fmt.Errorf("%w: register at most %d tables per call, got %d", ErrInvalidArgument, maxRegisterBatch, len(refs))
	}
	for _, r := range refs {
		if err := validateTableRef(r); err != nil {
			return err
		}
	}
	return nil
}

// RegisterTables registers many table incarnations in one transaction, as
// RegisterTable does one: idempotent, a new uuid makes a new row. It
// returns how many rows were new. Discovery of a large catalog and the
// benchmarks use it.
func (s *postgresStore) RegisterTables(ctx context.Context, refs []TableRef) (int, error) {
	if err := validateRefs(refs); err != nil {
		return 0, err
	}
	cols := make([][]string, 4)
	for _, r := range refs {
		cols[0], cols[1] = append(cols[0], r.Catalog), append(cols[1], r.Namespace)
		cols[2], cols[3] = append(cols[2], r.Name), append(cols[3], r.UUID)
	}
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO maintained_table (catalog, namespace, name, table_uuid)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
		ON CONFLICT (catalog, namespace, name, table_uuid) DO NOTHING`, cols[0], cols[1], cols[2], cols[3])
	if err != nil {
		return 0, pgError("register tables", err)
	}
	return int(tag.RowsAffected()), nil
}

// RegisterTables registers many table incarnations in one transaction.
func (s *sqliteStore) RegisterTables(ctx context.Context, refs []TableRef) (int, error) {
	if err := validateRefs(refs); err != nil {
		return 0, err
	}
	n := 0
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `
			INSERT INTO maintained_table (catalog, namespace, name, table_uuid, created_at)
			VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (catalog, namespace, name, table_uuid) DO NOTHING`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		now := sqliteTime(s.now())
		for _, r := range refs {
			res, err := stmt.ExecContext(ctx, r.Catalog, r.Namespace, r.Name, r.UUID, now)
			if err != nil {
				return err
			}
			k, _ := res.RowsAffected()
			n += int(k)
		}
		return nil
	})
	if err != nil {
		return 0, sqliteError("register tables", err)
	}
	return n, nil
}
