package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// This file is the SQLite side of Policies (see policy.go). Every mutation
// runs in one BEGIN IMMEDIATE transaction on the single writer connection,
// so mutations of all processes apply one after the other; reads use the
// read pool.

func sqlitePlaceholder(i int) string { return "?" + strconv.Itoa(i) }

func scanSQLitePolicy(row scanner, extra ...any) (Policy, error) {
	var (
		p                         Policy
		created, updated, content string
		deleted                   sql.NullString
		err                       error
	)
	dest := append([]any{&p.ID, &p.Name, &p.Comment, &p.Type, &p.Enabled, &p.Version,
		&created, &updated, &deleted, &content}, extra...)
	if err = row.Scan(dest...); err != nil {
		return Policy{}, err
	}
	p.Content = json.RawMessage(content)
	if p.CreatedAt, err = parseSQLiteTime(created); err != nil {
		return Policy{}, err
	}
	if p.UpdatedAt, err = parseSQLiteTime(updated); err != nil {
		return Policy{}, err
	}
	if p.DeletedAt, err = parseNullSQLiteTime(deleted); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// sqliteAttachmentDest returns scan targets for attachmentCols and a
// function that finishes a after the scan.
func sqliteAttachmentDest(a *Attachment) ([]any, func() error) {
	var created string
	return []any{&a.PolicyID, &a.PolicyName, &a.PolicyType, &a.Object.Level,
			&a.Object.Catalog, &a.Object.Namespace, &a.Object.Table, &created},
		func() error {
			var err error
			a.CreatedAt, err = parseSQLiteTime(created)
			return err
		}
}

func scanSQLiteAttachment(row scanner) (Attachment, error) {
	var a Attachment
	dest, finish := sqliteAttachmentDest(&a)
	if err := row.Scan(dest...); err != nil {
		return Attachment{}, err
	}
	return a, finish()
}

func scanSQLiteTableRow(row scanner) (Table, error) {
	var (
		t       Table
		created string
		err     error
	)
	if err = row.Scan(&t.ID, &t.Catalog, &t.Namespace, &t.Name, &t.UUID, &created); err != nil {
		return Table{}, err
	}
	t.CreatedAt, err = parseSQLiteTime(created)
	return t, err
}

// collectSQLite scans every row with scan.
func collectSQLite[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// sqlitePolicyError passes the store's own errors through and maps the rest.
func sqlitePolicyError(op string, err error) error {
	for _, sentinel := range []error{ErrNotFound, ErrConflict, ErrInvalidArgument} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	return sqliteError(op, err)
}

// sqliteFindPolicy looks up the live policy called name inside a write
// transaction (which already holds the file's write lock).
func sqliteFindPolicy(ctx context.Context, tx *sql.Tx, name string) (id int64, typ string, enabled bool, err error) {
	err = tx.QueryRowContext(ctx, `SELECT id, policy_type, enabled FROM policy WHERE name = ?1 AND deleted_at IS NULL`, name).
		Scan(&id, &typ, &enabled)
	if errors.Is(err, sql.ErrNoRows) {
		err = policyNotFound(name)
	}
	return id, typ, enabled, err
}

func sqlitePolicyByID(ctx context.Context, db sqliteQuerier, id int64) (Policy, error) {
	p, err := scanSQLitePolicy(db.QueryRowContext(ctx, `SELECT `+policyCols+` FROM `+policyFrom+` WHERE p.id = ?1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Policy{}, notFound("policy", id)
	}
	return p, err
}

// CreatePolicy inserts the policy and its version 1 in one transaction.
func (s *sqliteStore) CreatePolicy(ctx context.Context, np NewPolicy) (Policy, error) {
	if err := validateNewPolicy(np); err != nil {
		return Policy{}, err
	}
	now := sqliteTime(utc(s.now()))
	var p Policy
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var id int64
		err := tx.QueryRowContext(ctx, `
			INSERT INTO policy (name, comment, policy_type, enabled, current_version, created_at, updated_at)
			VALUES (?1, ?2, ?3, ?4, 1, ?5, ?5) RETURNING id`,
			np.Name, np.Comment, np.Type, np.Enabled, now).Scan(&id)
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE && strings.Contains(se.Error(), "policy.name") {
			return policyNameTaken(np.Name)
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO policy_version (policy_id, version, content, created_at) VALUES (?1, 1, ?2, ?3)`,
			id, string(np.Content), now); err != nil {
			return err
		}
		p, err = sqlitePolicyByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return Policy{}, sqlitePolicyError("create policy", err)
	}
	return p, nil
}

// AlterPolicy adds a version and/or replaces the comment.
func (s *sqliteStore) AlterPolicy(ctx context.Context, name string, c PolicyChange) (Policy, error) {
	if err := validatePolicyChange(name, c); err != nil {
		return Policy{}, err
	}
	now := sqliteTime(utc(s.now()))
	var p Policy
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		id, _, _, err := sqliteFindPolicy(ctx, tx, name)
		if err != nil {
			return err
		}
		if c.Content != nil {
			var version int
			if err := tx.QueryRowContext(ctx, `UPDATE policy SET current_version = current_version + 1, updated_at = ?2
				WHERE id = ?1 RETURNING current_version`, id, now).Scan(&version); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO policy_version (policy_id, version, content, created_at) VALUES (?1, ?2, ?3, ?4)`,
				id, version, string(c.Content), now); err != nil {
				return err
			}
		}
		if c.Comment != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE policy SET comment = ?2, updated_at = ?3 WHERE id = ?1`, id, *c.Comment, now); err != nil {
				return err
			}
		}
		p, err = sqlitePolicyByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return Policy{}, sqlitePolicyError("alter policy", err)
	}
	return p, nil
}

// SetPolicyEnabled flips enabled if it differs.
func (s *sqliteStore) SetPolicyEnabled(ctx context.Context, name string, enabled bool) (Policy, bool, error) {
	if err := validatePolicyName(name); err != nil {
		return Policy{}, false, err
	}
	var (
		p       Policy
		changed bool
	)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		id, _, was, err := sqliteFindPolicy(ctx, tx, name)
		if err != nil {
			return err
		}
		if changed = was != enabled; changed {
			if _, err := tx.ExecContext(ctx, `UPDATE policy SET enabled = ?2, updated_at = ?3 WHERE id = ?1`,
				id, enabled, sqliteTime(utc(s.now()))); err != nil {
				return err
			}
		}
		p, err = sqlitePolicyByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return Policy{}, false, sqlitePolicyError("set policy enabled", err)
	}
	return p, changed, nil
}

// DeletePolicy marks the policy deleted and removes its attachments.
func (s *sqliteStore) DeletePolicy(ctx context.Context, name string) (Policy, error) {
	if err := validatePolicyName(name); err != nil {
		return Policy{}, err
	}
	now := sqliteTime(utc(s.now()))
	var p Policy
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		id, _, _, err := sqliteFindPolicy(ctx, tx, name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM policy_attachment WHERE policy_id = ?1`, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE policy SET deleted_at = ?2, updated_at = ?2 WHERE id = ?1`, id, now); err != nil {
			return err
		}
		p, err = sqlitePolicyByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return Policy{}, sqlitePolicyError("delete policy", err)
	}
	return p, nil
}

// GetPolicy returns the live policy called name.
func (s *sqliteStore) GetPolicy(ctx context.Context, name string) (Policy, error) {
	p, err := scanSQLitePolicy(s.r.QueryRowContext(ctx, `SELECT `+policyCols+` FROM `+policyFrom+` WHERE p.name = ?1 AND p.deleted_at IS NULL`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Policy{}, policyNotFound(name)
	}
	if err != nil {
		return Policy{}, sqliteError("get policy", err)
	}
	return p, nil
}

// GetPolicyByID returns policy id, deleted or not.
func (s *sqliteStore) GetPolicyByID(ctx context.Context, id int64) (Policy, error) {
	p, err := sqlitePolicyByID(ctx, s.r, id)
	if err != nil {
		return Policy{}, sqlitePolicyError("get policy", err)
	}
	return p, nil
}

// GetPolicyVersion returns one version of a policy.
func (s *sqliteStore) GetPolicyVersion(ctx context.Context, id int64, version int) (PolicyVersion, error) {
	v := PolicyVersion{PolicyID: id, Version: version}
	var content, created string
	err := s.r.QueryRowContext(ctx, `SELECT content, created_at FROM policy_version WHERE policy_id = ?1 AND version = ?2`, id, version).
		Scan(&content, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return PolicyVersion{}, fmt.Errorf("%w: policy %d version %d", ErrNotFound, id, version)
	}
	if err != nil {
		return PolicyVersion{}, sqliteError("get policy version", err)
	}
	v.Content = json.RawMessage(content)
	if v.CreatedAt, err = parseSQLiteTime(created); err != nil {
		return PolicyVersion{}, err
	}
	return v, nil
}

// ListPolicies returns the live policies by name.
func (s *sqliteStore) ListPolicies(ctx context.Context) ([]Policy, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+policyCols+` FROM `+policyFrom+` WHERE p.deleted_at IS NULL ORDER BY p.name`)
	ps, err := collectSQLite(rows, err, func(r scanner) (Policy, error) { return scanSQLitePolicy(r) })
	if err != nil {
		return nil, sqliteError("list policies", err)
	}
	return ps, nil
}

// Attach inserts the attachment unless it exists.
func (s *sqliteStore) Attach(ctx context.Context, name string, obj PolicyObject) (Attachment, bool, error) {
	if err := validatePolicyName(name); err != nil {
		return Attachment{}, false, err
	}
	if err := validatePolicyObject(obj); err != nil {
		return Attachment{}, false, err
	}
	var (
		a       Attachment
		created bool
	)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		id, typ, _, err := sqliteFindPolicy(ctx, tx, name)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `
			INSERT INTO policy_attachment (policy_id, policy_type, object_level, catalog, namespace, table_name, created_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
			ON CONFLICT DO NOTHING`,
			id, typ, string(obj.Level), obj.Catalog, obj.Namespace, obj.Table, sqliteTime(utc(s.now())))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		created = n == 1
		a, err = scanSQLiteAttachment(tx.QueryRowContext(ctx, `
			SELECT `+attachmentCols+` FROM policy_attachment a JOIN policy p ON p.id = a.policy_id
			WHERE a.policy_type = ?1 AND a.catalog = ?2 AND a.namespace = ?3 AND a.table_name = ?4`,
			typ, obj.Catalog, obj.Namespace, obj.Table))
		if err != nil {
			return err
		}
		if a.PolicyID != id {
			return attachmentTaken(obj, typ, a.PolicyName)
		}
		return nil
	})
	if err != nil {
		return Attachment{}, false, sqlitePolicyError("attach policy", err)
	}
	return a, created, nil
}

// Detach deletes the attachment.
func (s *sqliteStore) Detach(ctx context.Context, name string, obj PolicyObject) (Attachment, error) {
	if err := validatePolicyName(name); err != nil {
		return Attachment{}, err
	}
	if err := validatePolicyObject(obj); err != nil {
		return Attachment{}, err
	}
	var a Attachment
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		id, _, _, err := sqliteFindPolicy(ctx, tx, name)
		if err != nil {
			return err
		}
		a, err = scanSQLiteAttachment(tx.QueryRowContext(ctx, `
			SELECT `+attachmentCols+` FROM policy_attachment a JOIN policy p ON p.id = a.policy_id
			WHERE a.policy_id = ?1 AND a.catalog = ?2 AND a.namespace = ?3 AND a.table_name = ?4`,
			id, obj.Catalog, obj.Namespace, obj.Table))
		if errors.Is(err, sql.ErrNoRows) {
			return notAttached(name, obj)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM policy_attachment
			WHERE policy_id = ?1 AND catalog = ?2 AND namespace = ?3 AND table_name = ?4`,
			id, obj.Catalog, obj.Namespace, obj.Table)
		return err
	})
	if err != nil {
		return Attachment{}, sqlitePolicyError("detach policy", err)
	}
	return a, nil
}

// ListAttachments returns a policy's attachments by object name.
func (s *sqliteStore) ListAttachments(ctx context.Context, policyID int64) ([]Attachment, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT `+attachmentCols+` FROM policy_attachment a JOIN policy p ON p.id = a.policy_id
		WHERE a.policy_id = ?1 AND p.deleted_at IS NULL
		ORDER BY a.catalog, a.namespace, a.table_name`, policyID)
	as, err := collectSQLite(rows, err, scanSQLiteAttachment)
	if err != nil {
		return nil, sqliteError("list attachments", err)
	}
	return as, nil
}

// EffectivePolicies resolves the nearest attachment per policy type.
func (s *sqliteStore) EffectivePolicies(ctx context.Context, catalog, namespace, table string) ([]EffectivePolicy, error) {
	rows, err := s.r.QueryContext(ctx, effectivePoliciesSQL(sqlitePlaceholder), catalog, namespace, table)
	eps, err := collectSQLite(rows, err, func(r scanner) (EffectivePolicy, error) {
		var e EffectivePolicy
		dest, finish := sqliteAttachmentDest(&e.Attachment)
		p, err := scanSQLitePolicy(r, dest...)
		if err != nil {
			return EffectivePolicy{}, err
		}
		e.Policy = p
		return e, finish()
	})
	if err != nil {
		return nil, sqliteError("effective policies", err)
	}
	return nearestPerType(eps), nil
}

// TablesForPolicy returns one batch of the tables a policy governs.
func (s *sqliteStore) TablesForPolicy(ctx context.Context, policyID, afterTableID int64, limit int) ([]Table, int64, error) {
	if err := validateTablesForPolicy(limit); err != nil {
		return nil, 0, err
	}
	ts, next, err := sqliteTablesForPolicy(ctx, s.r, policyID, afterTableID, limit)
	if err != nil {
		return nil, 0, sqliteError("tables for policy", err)
	}
	return ts, next, nil
}

// sqliteTablesForPolicy is TablesForPolicy on db (the read pool, or the
// transaction of TxWriter.EnqueueTablesForPolicy).
func sqliteTablesForPolicy(ctx context.Context, db sqliteQuerier, policyID, afterTableID int64, limit int) ([]Table, int64, error) {
	scan := TablesScanWindow(limit)
	rows, err := db.QueryContext(ctx, tablesForPolicySQL(sqlitePlaceholder), policyID, afterTableID, limit, scan)
	ts, err := collectSQLite(rows, err, scanSQLiteTableRow)
	if err != nil {
		return nil, 0, err
	}
	next, err := tablesNext(ts, limit, scan, func() (maxID int64, n int, err error) {
		err = db.QueryRowContext(ctx, tablesWindowSQL(sqlitePlaceholder), afterTableID, scan).Scan(&maxID, &n)
		return maxID, n, err
	})
	if err != nil {
		return nil, 0, err
	}
	return ts, next, nil
}
