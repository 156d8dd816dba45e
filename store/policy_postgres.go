package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file is the PostgreSQL side of Policies (see policy.go). Every
// mutation runs in one transaction that first locks the policy row (SELECT …
// FOR UPDATE), so concurrent alters, deletes and attaches of one policy
// apply one after the other: an attach cannot slip in beside a delete and
// leave an attachment of a deleted policy behind.

// pgPolicyNameIndex is the unique index of live policy names.
const pgPolicyNameIndex = "policy_name_live_uq"

func pgPlaceholder(i int) string { return "$" + strconv.Itoa(i) }

func scanPgPolicy(row pgx.Row, extra ...any) (Policy, error) {
	var (
		p       Policy
		deleted *time.Time
		content []byte
	)
	dest := append([]any{&p.ID, &p.Name, &p.Comment, &p.Type, &p.Enabled, &p.Version,
		&p.CreatedAt, &p.UpdatedAt, &deleted, &content}, extra...)
	if err := row.Scan(dest...); err != nil {
		return Policy{}, err
	}
	p.Content = json.RawMessage(content)
	p.CreatedAt = p.CreatedAt.UTC()
	p.UpdatedAt = p.UpdatedAt.UTC()
	if deleted != nil {
		p.DeletedAt = deleted.UTC()
	}
	return p, nil
}

func scanPgAttachment(row pgx.Row) (Attachment, error) {
	var a Attachment
	err := row.Scan(&a.PolicyID, &a.PolicyName, &a.PolicyType, &a.Object.Level,
		&a.Object.Catalog, &a.Object.Namespace, &a.Object.Table, &a.CreatedAt)
	a.CreatedAt = a.CreatedAt.UTC()
	return a, err
}

// pgPolicyError passes the store's own errors through and maps the rest.
func pgPolicyError(op string, err error) error {
	for _, sentinel := range []error{ErrNotFound, ErrConflict, ErrInvalidArgument} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	return pgError(op, err)
}

// pgLockPolicy locks the live policy called name for the rest of tx.
func pgLockPolicy(ctx context.Context, tx pgx.Tx, name string) (id int64, typ string, enabled bool, err error) {
	err = tx.QueryRow(ctx, `SELECT id, policy_type, enabled FROM policy WHERE name = $1 AND deleted_at IS NULL FOR UPDATE`, name).
		Scan(&id, &typ, &enabled)
	if errors.Is(err, pgx.ErrNoRows) {
		err = policyNotFound(name)
	}
	return id, typ, enabled, err
}

func pgPolicyByID(ctx context.Context, db pgDB, id int64) (Policy, error) {
	p, err := scanPgPolicy(db.QueryRow(ctx, `SELECT `+policyCols+` FROM `+policyFrom+` WHERE p.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Policy{}, notFound("policy", id)
	}
	return p, err
}

// CreatePolicy inserts the policy and its version 1 in one transaction.
func (s *postgresStore) CreatePolicy(ctx context.Context, np NewPolicy) (Policy, error) {
	if err := validateNewPolicy(np); err != nil {
		return Policy{}, err
	}
	now := utc(s.now())
	var p Policy
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, `
			INSERT INTO policy (name, comment, policy_type, enabled, current_version, created_at, updated_at)
			VALUES ($1, $2, $3, $4, 1, $5, $5) RETURNING id`,
			np.Name, np.Comment, np.Type, np.Enabled, now).Scan(&id)
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == pgPolicyNameIndex {
			return policyNameTaken(np.Name)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO policy_version (policy_id, version, content, created_at) VALUES ($1, 1, $2::jsonb, $3)`,
			id, string(np.Content), now); err != nil {
			return err
		}
		p, err = pgPolicyByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return Policy{}, pgPolicyError("create policy", err)
	}
	return p, nil
}

// AlterPolicy adds a version and/or replaces the comment.
func (s *postgresStore) AlterPolicy(ctx context.Context, name string, c PolicyChange) (Policy, error) {
	if err := validatePolicyChange(name, c); err != nil {
		return Policy{}, err
	}
	now := utc(s.now())
	var p Policy
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, _, _, err := pgLockPolicy(ctx, tx, name)
		if err != nil {
			return err
		}
		if c.Content != nil {
			var version int
			if err := tx.QueryRow(ctx, `UPDATE policy SET current_version = current_version + 1, updated_at = $2
				WHERE id = $1 RETURNING current_version`, id, now).Scan(&version); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO policy_version (policy_id, version, content, created_at) VALUES ($1, $2, $3::jsonb, $4)`,
				id, version, string(c.Content), now); err != nil {
				return err
			}
		}
		if c.Comment != nil {
			if _, err := tx.Exec(ctx, `UPDATE policy SET comment = $2, updated_at = $3 WHERE id = $1`, id, *c.Comment, now); err != nil {
				return err
			}
		}
		p, err = pgPolicyByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return Policy{}, pgPolicyError("alter policy", err)
	}
	return p, nil
}

// SetPolicyEnabled flips enabled if it differs.
func (s *postgresStore) SetPolicyEnabled(ctx context.Context, name string, enabled bool) (Policy, bool, error) {
	if err := validatePolicyName(name); err != nil {
		return Policy{}, false, err
	}
	var (
		p       Policy
		changed bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, _, was, err := pgLockPolicy(ctx, tx, name)
		if err != nil {
			return err
		}
		if changed = was != enabled; changed {
			if _, err := tx.Exec(ctx, `UPDATE policy SET enabled = $2, updated_at = $3 WHERE id = $1`, id, enabled, utc(s.now())); err != nil {
				return err
			}
		}
		p, err = pgPolicyByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return Policy{}, false, pgPolicyError("set policy enabled", err)
	}
	return p, changed, nil
}

// DeletePolicy marks the policy deleted and removes its attachments.
func (s *postgresStore) DeletePolicy(ctx context.Context, name string) (Policy, error) {
	if err := validatePolicyName(name); err != nil {
		return Policy{}, err
	}
	now := utc(s.now())
	var p Policy
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, _, _, err := pgLockPolicy(ctx, tx, name)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM policy_attachment WHERE policy_id = $1`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE policy SET deleted_at = $2, updated_at = $2 WHERE id = $1`, id, now); err != nil {
			return err
		}
		p, err = pgPolicyByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return Policy{}, pgPolicyError("delete policy", err)
	}
	return p, nil
}

// GetPolicy returns the live policy called name.
func (s *postgresStore) GetPolicy(ctx context.Context, name string) (Policy, error) {
	p, err := scanPgPolicy(s.pool.QueryRow(ctx, `SELECT `+policyCols+` FROM `+policyFrom+` WHERE p.name = $1 AND p.deleted_at IS NULL`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Policy{}, policyNotFound(name)
	}
	if err != nil {
		return Policy{}, pgError("get policy", err)
	}
	return p, nil
}

// GetPolicyByID returns policy id, deleted or not.
func (s *postgresStore) GetPolicyByID(ctx context.Context, id int64) (Policy, error) {
	p, err := pgPolicyByID(ctx, s.pool, id)
	if err != nil {
		return Policy{}, pgPolicyError("get policy", err)
	}
	return p, nil
}

// GetPolicyVersion returns one version of a policy.
func (s *postgresStore) GetPolicyVersion(ctx context.Context, id int64, version int) (PolicyVersion, error) {
	v := PolicyVersion{PolicyID: id, Version: version}
	var content []byte
	err := s.pool.QueryRow(ctx, `SELECT content, created_at FROM policy_version WHERE policy_id = $1 AND version = $2`, id, version).
		Scan(&content, &v.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return PolicyVersion{}, fmt.Errorf("%w: policy %d version %d", ErrNotFound, id, version)
	}
	if err != nil {
		return PolicyVersion{}, pgError("get policy version", err)
	}
	v.Content = json.RawMessage(content)
	v.CreatedAt = v.CreatedAt.UTC()
	return v, nil
}

// ListPolicies returns the live policies by name.
func (s *postgresStore) ListPolicies(ctx context.Context) ([]Policy, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+policyCols+` FROM `+policyFrom+` WHERE p.deleted_at IS NULL ORDER BY p.name`)
	if err != nil {
		return nil, pgError("list policies", err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Policy, error) { return scanPgPolicy(r) })
	if err != nil {
		return nil, pgError("list policies", err)
	}
	return ps, nil
}

// Attach inserts the attachment unless it exists.
func (s *postgresStore) Attach(ctx context.Context, name string, obj PolicyObject) (Attachment, bool, error) {
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
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, typ, _, err := pgLockPolicy(ctx, tx, name)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			INSERT INTO policy_attachment (policy_id, policy_type, object_level, catalog, namespace, table_name, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT DO NOTHING`,
			id, typ, string(obj.Level), obj.Catalog, obj.Namespace, obj.Table, utc(s.now()))
		if err != nil {
			return err
		}
		created = tag.RowsAffected() == 1
		// The row on the object for this type: ours (new or old) or another
		// policy's. A new statement sees a row a concurrent attacher just
		// committed, which the insert waited for.
		a, err = scanPgAttachment(tx.QueryRow(ctx, `
			SELECT `+attachmentCols+` FROM policy_attachment a JOIN policy p ON p.id = a.policy_id
			WHERE a.policy_type = $1 AND a.catalog = $2 AND a.namespace = $3 AND a.table_name = $4`,
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
		return Attachment{}, false, pgPolicyError("attach policy", err)
	}
	return a, created, nil
}

// Detach deletes the attachment.
func (s *postgresStore) Detach(ctx context.Context, name string, obj PolicyObject) (Attachment, error) {
	if err := validatePolicyName(name); err != nil {
		return Attachment{}, err
	}
	if err := validatePolicyObject(obj); err != nil {
		return Attachment{}, err
	}
	var a Attachment
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, _, _, err := pgLockPolicy(ctx, tx, name)
		if err != nil {
			return err
		}
		a, err = scanPgAttachment(tx.QueryRow(ctx, `
			DELETE FROM policy_attachment a USING policy p
			WHERE p.id = a.policy_id AND a.policy_id = $1 AND a.catalog = $2 AND a.namespace = $3 AND a.table_name = $4
			RETURNING `+attachmentCols, id, obj.Catalog, obj.Namespace, obj.Table))
		if errors.Is(err, pgx.ErrNoRows) {
			return notAttached(name, obj)
		}
		return err
	})
	if err != nil {
		return Attachment{}, pgPolicyError("detach policy", err)
	}
	return a, nil
}

// ListAttachments returns a policy's attachments by object name.
func (s *postgresStore) ListAttachments(ctx context.Context, policyID int64) ([]Attachment, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+attachmentCols+` FROM policy_attachment a JOIN policy p ON p.id = a.policy_id
		WHERE a.policy_id = $1 AND p.deleted_at IS NULL
		ORDER BY a.catalog, a.namespace, a.table_name`, policyID)
	if err != nil {
		return nil, pgError("list attachments", err)
	}
	as, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Attachment, error) { return scanPgAttachment(r) })
	if err != nil {
		return nil, pgError("list attachments", err)
	}
	return as, nil
}

// EffectivePolicies resolves the nearest attachment per policy type.
func (s *postgresStore) EffectivePolicies(ctx context.Context, catalog, namespace, table string) ([]EffectivePolicy, error) {
	rows, err := s.pool.Query(ctx, effectivePoliciesSQL(func(i int) string { return pgPlaceholder(i) + "::text" }), catalog, namespace, table)
	if err != nil {
		return nil, pgError("effective policies", err)
	}
	eps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (EffectivePolicy, error) {
		var e EffectivePolicy
		a := &e.Attachment
		p, err := scanPgPolicy(r, &a.PolicyID, &a.PolicyName, &a.PolicyType, &a.Object.Level,
			&a.Object.Catalog, &a.Object.Namespace, &a.Object.Table, &a.CreatedAt)
		e.Policy = p
		a.CreatedAt = a.CreatedAt.UTC()
		return e, err
	})
	if err != nil {
		return nil, pgError("effective policies", err)
	}
	return nearestPerType(eps), nil
}

// TablesForPolicy returns one batch of the tables a policy governs.
func (s *postgresStore) TablesForPolicy(ctx context.Context, policyID, afterTableID int64, limit int) ([]Table, int64, error) {
	if err := validateTablesForPolicy(limit); err != nil {
		return nil, 0, err
	}
	scan := TablesScanWindow(limit)
	rows, err := s.pool.Query(ctx, tablesForPolicySQL(pgPlaceholder), policyID, afterTableID, limit, scan)
	if err != nil {
		return nil, 0, pgError("tables for policy", err)
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) { return scanPgTable(r) })
	if err != nil {
		return nil, 0, pgError("tables for policy", err)
	}
	next, err := tablesNext(ts, limit, scan, func() (maxID int64, n int, err error) {
		err = s.pool.QueryRow(ctx, tablesWindowSQL(pgPlaceholder), afterTableID, scan).Scan(&maxID, &n)
		return maxID, n, err
	})
	if err != nil {
		return nil, 0, pgError("tables for policy", err)
	}
	return ts, next, nil
}
