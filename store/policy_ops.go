package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// This file implements Policies (see policy.go) once for both backends, on
// sqlStore's seam (sqlstore.go). Every mutation runs in one write
// transaction that first finds the live policy and locks its row
// (lockPolicy): PostgreSQL with SELECT … FOR UPDATE, SQLite by its BEGIN
// IMMEDIATE transaction on the single writer connection, which holds the
// database's write lock. Either way concurrent alters, deletes and attaches
// of one policy apply one after the other: an attach cannot slip in beside a
// delete and leave an attachment of a deleted policy behind. Reads run
// outside a transaction, on SQLite's read pool.

// policyNameLive is the unique index of live policy names.
var policyNameLive = uniqueIndex{pgName: "policy_name_live_uq", sqliteColumns: "policy.name"}

// scanPolicy reads policyCols into a Policy, and then the extra columns
// into extra.
func scanPolicy(row scanner, extra ...any) (Policy, error) {
	var (
		p       Policy
		content []byte
	)
	dest := append([]any{&p.ID, &p.Name, &p.Comment, &p.Type, &p.Enabled, &p.Version,
		scanTime(&p.CreatedAt), scanTime(&p.UpdatedAt), scanTime(&p.DeletedAt), &content}, extra...)
	if err := row.Scan(dest...); err != nil {
		return Policy{}, err
	}
	p.Content = json.RawMessage(content)
	return p, nil
}

// attachmentDest returns the scan targets of attachmentCols for a.
func attachmentDest(a *Attachment) []any {
	return []any{&a.PolicyID, &a.PolicyName, &a.PolicyType, &a.Object.Level,
		&a.Object.Catalog, &a.Object.Namespace, &a.Object.Table, scanTime(&a.CreatedAt)}
}

// scanAttachment reads attachmentCols into an Attachment.
func scanAttachment(row scanner) (Attachment, error) {
	var a Attachment
	if err := row.Scan(attachmentDest(&a)...); err != nil {
		return Attachment{}, err
	}
	return a, nil
}

// lockPolicy finds the live policy called name in the write transaction q
// and locks its row for the rest of q.
func (s *sqlStore) lockPolicy(ctx context.Context, q dbQ, name string) (id int64, typ string, enabled bool, err error) {
	err = q.queryRow(ctx, `SELECT id, policy_type, enabled FROM policy WHERE name = `+s.b.param(1)+` AND deleted_at IS NULL`+s.b.forUpdate(), name).
		Scan(&id, &typ, &enabled)
	if errors.Is(err, sql.ErrNoRows) {
		err = policyNotFound(name)
	}
	return id, typ, enabled, err
}

// policyByID reads policy id, deleted or not, on q.
func (s *sqlStore) policyByID(ctx context.Context, q dbQ, id int64) (Policy, error) {
	p, err := scanPolicy(q.queryRow(ctx, `SELECT `+policyCols+` FROM `+policyFrom+` WHERE p.id = `+s.b.param(1), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Policy{}, notFound("policy", id)
	}
	return p, err
}

// insertVersion stores version of policy id with content, created at now
// (a timeArg).
func (s *sqlStore) insertVersion(ctx context.Context, q dbQ, id int64, version int, content json.RawMessage, now any) error {
	ph := s.b.param
	_, err := q.exec(ctx, `INSERT INTO policy_version (policy_id, version, content, created_at)
		VALUES (`+ph(1)+`, `+ph(2)+`, `+s.b.typed(3, "jsonb")+`, `+ph(4)+`)`,
		id, version, string(content), now)
	return err
}

// CreatePolicy inserts the policy and its version 1 in one transaction.
func (s *sqlStore) CreatePolicy(ctx context.Context, np NewPolicy) (Policy, error) {
	if err := validateNewPolicy(np); err != nil {
		return Policy{}, err
	}
	ph, now := s.b.param, s.b.timeArg(utc(s.clock()))
	var p Policy
	err := s.b.inTx(ctx, func(q dbQ) error {
		var id int64
		err := q.queryRow(ctx, `
			INSERT INTO policy (name, comment, policy_type, enabled, current_version, created_at, updated_at)
			VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`, `+ph(4)+`, 1, `+ph(5)+`, `+ph(5)+`) RETURNING id`,
			np.Name, np.Comment, np.Type, np.Enabled, now).Scan(&id)
		if s.b.isUnique(err, policyNameLive) {
			return policyNameTaken(np.Name)
		}
		if err != nil {
			return err
		}
		if err := s.insertVersion(ctx, q, id, 1, np.Content, now); err != nil {
			return err
		}
		p, err = s.policyByID(ctx, q, id)
		return err
	})
	if err != nil {
		return Policy{}, s.fail("create policy", err)
	}
	return p, nil
}

// AlterPolicy adds a version and/or replaces the comment.
func (s *sqlStore) AlterPolicy(ctx context.Context, name string, c PolicyChange) (Policy, error) {
	if err := validatePolicyChange(name, c); err != nil {
		return Policy{}, err
	}
	ph, now := s.b.param, s.b.timeArg(utc(s.clock()))
	var p Policy
	err := s.b.inTx(ctx, func(q dbQ) error {
		id, _, _, err := s.lockPolicy(ctx, q, name)
		if err != nil {
			return err
		}
		if c.Content != nil {
			var version int
			if err := q.queryRow(ctx, `UPDATE policy SET current_version = current_version + 1, updated_at = `+ph(2)+`
				WHERE id = `+ph(1)+` RETURNING current_version`, id, now).Scan(&version); err != nil {
				return err
			}
			if err := s.insertVersion(ctx, q, id, version, c.Content, now); err != nil {
				return err
			}
		}
		if c.Comment != nil {
			if _, err := q.exec(ctx, `UPDATE policy SET comment = `+ph(2)+`, updated_at = `+ph(3)+` WHERE id = `+ph(1),
				id, *c.Comment, now); err != nil {
				return err
			}
		}
		p, err = s.policyByID(ctx, q, id)
		return err
	})
	if err != nil {
		return Policy{}, s.fail("alter policy", err)
	}
	return p, nil
}

// SetPolicyEnabled flips enabled if it differs.
func (s *sqlStore) SetPolicyEnabled(ctx context.Context, name string, enabled bool) (Policy, bool, error) {
	if err := validatePolicyName(name); err != nil {
		return Policy{}, false, err
	}
	ph := s.b.param
	var (
		p       Policy
		changed bool
	)
	err := s.b.inTx(ctx, func(q dbQ) error {
		id, _, was, err := s.lockPolicy(ctx, q, name)
		if err != nil {
			return err
		}
		if changed = was != enabled; changed {
			if _, err := q.exec(ctx, `UPDATE policy SET enabled = `+ph(2)+`, updated_at = `+ph(3)+` WHERE id = `+ph(1),
				id, enabled, s.b.timeArg(utc(s.clock()))); err != nil {
				return err
			}
		}
		p, err = s.policyByID(ctx, q, id)
		return err
	})
	if err != nil {
		return Policy{}, false, s.fail("set policy enabled", err)
	}
	return p, changed, nil
}

// DeletePolicy marks the policy deleted and removes its attachments.
func (s *sqlStore) DeletePolicy(ctx context.Context, name string) (Policy, error) {
	if err := validatePolicyName(name); err != nil {
		return Policy{}, err
	}
	ph, now := s.b.param, s.b.timeArg(utc(s.clock()))
	var p Policy
	err := s.b.inTx(ctx, func(q dbQ) error {
		id, _, _, err := s.lockPolicy(ctx, q, name)
		if err != nil {
			return err
		}
		if _, err := q.exec(ctx, `DELETE FROM policy_attachment WHERE policy_id = `+ph(1), id); err != nil {
			return err
		}
		if _, err := q.exec(ctx, `UPDATE policy SET deleted_at = `+ph(2)+`, updated_at = `+ph(2)+` WHERE id = `+ph(1), id, now); err != nil {
			return err
		}
		p, err = s.policyByID(ctx, q, id)
		return err
	})
	if err != nil {
		return Policy{}, s.fail("delete policy", err)
	}
	return p, nil
}

// GetPolicy returns the live policy called name.
func (s *sqlStore) GetPolicy(ctx context.Context, name string) (Policy, error) {
	p, err := scanPolicy(s.b.read().queryRow(ctx, `SELECT `+policyCols+` FROM `+policyFrom+`
		WHERE p.name = `+s.b.param(1)+` AND p.deleted_at IS NULL`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Policy{}, policyNotFound(name)
	}
	if err != nil {
		return Policy{}, s.b.wrap("get policy", err)
	}
	return p, nil
}

// GetPolicyByID returns policy id, deleted or not.
func (s *sqlStore) GetPolicyByID(ctx context.Context, id int64) (Policy, error) {
	p, err := s.policyByID(ctx, s.b.read(), id)
	if err != nil {
		return Policy{}, s.fail("get policy", err)
	}
	return p, nil
}

// GetPolicyVersion returns one version of a policy.
func (s *sqlStore) GetPolicyVersion(ctx context.Context, id int64, version int) (PolicyVersion, error) {
	v := PolicyVersion{PolicyID: id, Version: version}
	var content []byte
	err := s.b.read().queryRow(ctx, `SELECT content, created_at FROM policy_version
		WHERE policy_id = `+s.b.param(1)+` AND version = `+s.b.param(2), id, version).
		Scan(&content, scanTime(&v.CreatedAt))
	if errors.Is(err, sql.ErrNoRows) {
		return PolicyVersion{}, fmt.Errorf("%w: policy %d version %d", ErrNotFound, id, version)
	}
	if err != nil {
		return PolicyVersion{}, s.b.wrap("get policy version", err)
	}
	v.Content = json.RawMessage(content)
	return v, nil
}

// ListPolicies returns the live policies by name.
func (s *sqlStore) ListPolicies(ctx context.Context) ([]Policy, error) {
	ps, err := collect(ctx, s.b.read(), func(r scanner) (Policy, error) { return scanPolicy(r) },
		`SELECT `+policyCols+` FROM `+policyFrom+` WHERE p.deleted_at IS NULL ORDER BY p.name`)
	if err != nil {
		return nil, s.b.wrap("list policies", err)
	}
	return ps, nil
}

// Attach inserts the attachment unless it exists.
func (s *sqlStore) Attach(ctx context.Context, name string, obj PolicyObject) (Attachment, bool, error) {
	if err := validatePolicyName(name); err != nil {
		return Attachment{}, false, err
	}
	if err := validatePolicyObject(obj); err != nil {
		return Attachment{}, false, err
	}
	ph := s.b.param
	var (
		a       Attachment
		created bool
	)
	err := s.b.inTx(ctx, func(q dbQ) error {
		id, typ, _, err := s.lockPolicy(ctx, q, name)
		if err != nil {
			return err
		}
		n, err := q.exec(ctx, `
			INSERT INTO policy_attachment (policy_id, policy_type, object_level, catalog, namespace, table_name, created_at)
			VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`, `+ph(4)+`, `+ph(5)+`, `+ph(6)+`, `+ph(7)+`)
			ON CONFLICT DO NOTHING`,
			id, typ, string(obj.Level), obj.Catalog, obj.Namespace, obj.Table, s.b.timeArg(utc(s.clock())))
		if err != nil {
			return err
		}
		created = n == 1
		// The row on the object for this type: ours (new or old) or another
		// policy's. On PostgreSQL a new statement sees a row a concurrent
		// attacher just committed, which the insert waited for.
		a, err = scanAttachment(q.queryRow(ctx, `
			SELECT `+attachmentCols+` FROM policy_attachment a JOIN policy p ON p.id = a.policy_id
			WHERE a.policy_type = `+ph(1)+` AND a.catalog = `+ph(2)+` AND a.namespace = `+ph(3)+` AND a.table_name = `+ph(4),
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
		return Attachment{}, false, s.fail("attach policy", err)
	}
	return a, created, nil
}

// Detach reads the attachment and deletes it. The policy's row lock keeps
// the row from changing in between: every writer of a policy's attachments
// (Attach, Detach, DeletePolicy) takes it first.
func (s *sqlStore) Detach(ctx context.Context, name string, obj PolicyObject) (Attachment, error) {
	if err := validatePolicyName(name); err != nil {
		return Attachment{}, err
	}
	if err := validatePolicyObject(obj); err != nil {
		return Attachment{}, err
	}
	ph := s.b.param
	var a Attachment
	err := s.b.inTx(ctx, func(q dbQ) error {
		id, _, _, err := s.lockPolicy(ctx, q, name)
		if err != nil {
			return err
		}
		a, err = scanAttachment(q.queryRow(ctx, `
			SELECT `+attachmentCols+` FROM policy_attachment a JOIN policy p ON p.id = a.policy_id
			WHERE a.policy_id = `+ph(1)+` AND a.catalog = `+ph(2)+` AND a.namespace = `+ph(3)+` AND a.table_name = `+ph(4),
			id, obj.Catalog, obj.Namespace, obj.Table))
		if errors.Is(err, sql.ErrNoRows) {
			return notAttached(name, obj)
		}
		if err != nil {
			return err
		}
		_, err = q.exec(ctx, `DELETE FROM policy_attachment
			WHERE policy_id = `+ph(1)+` AND catalog = `+ph(2)+` AND namespace = `+ph(3)+` AND table_name = `+ph(4),
			id, obj.Catalog, obj.Namespace, obj.Table)
		return err
	})
	if err != nil {
		return Attachment{}, s.fail("detach policy", err)
	}
	return a, nil
}

// ListAttachments returns a policy's attachments by object name.
func (s *sqlStore) ListAttachments(ctx context.Context, policyID int64) ([]Attachment, error) {
	as, err := collect(ctx, s.b.read(), scanAttachment, `
		SELECT `+attachmentCols+` FROM policy_attachment a JOIN policy p ON p.id = a.policy_id
		WHERE a.policy_id = `+s.b.param(1)+` AND p.deleted_at IS NULL
		ORDER BY a.catalog, a.namespace, a.table_name`, policyID)
	if err != nil {
		return nil, s.b.wrap("list attachments", err)
	}
	return as, nil
}

// EffectivePolicies resolves the nearest attachment per policy type. The
// placeholders are cast to text: PostgreSQL cannot infer their type where
// attachmentCovers passes them to substr.
func (s *sqlStore) EffectivePolicies(ctx context.Context, catalog, namespace, table string) ([]EffectivePolicy, error) {
	text := func(i int) string { return s.b.typed(i, "text") }
	eps, err := collect(ctx, s.b.read(), func(r scanner) (EffectivePolicy, error) {
		var e EffectivePolicy
		p, err := scanPolicy(r, attachmentDest(&e.Attachment)...)
		e.Policy = p
		return e, err
	}, effectivePoliciesSQL(text), catalog, namespace, table)
	if err != nil {
		return nil, s.b.wrap("effective policies", err)
	}
	return nearestPerType(eps), nil
}

// TablesForPolicy returns one batch of the tables a policy governs.
func (s *sqlStore) TablesForPolicy(ctx context.Context, policyID, afterTableID int64, limit int) ([]Table, int64, error) {
	if err := validateTablesForPolicy(limit); err != nil {
		return nil, 0, err
	}
	ts, next, err := s.tablesForPolicy(ctx, s.b.read(), policyID, afterTableID, limit)
	if err != nil {
		return nil, 0, s.b.wrap("tables for policy", err)
	}
	return ts, next, nil
}

// tablesForPolicy is TablesForPolicy on q: the read pool, or the
// transaction of SQLite's TxWriter.EnqueueTablesForPolicy (PostgreSQL's
// runs the same query inside its insert, see pgEnqueuePolicySQL).
func (s *sqlStore) tablesForPolicy(ctx context.Context, q dbQ, policyID, afterTableID int64, limit int) ([]Table, int64, error) {
	scan := TablesScanWindow(limit)
	ts, err := collect(ctx, q, scanTable, tablesForPolicySQL(s.b), policyID, afterTableID, limit, scan)
	if err != nil {
		return nil, 0, err
	}
	next, err := tablesNext(ts, limit, scan, func() (maxID int64, n int, err error) {
		err = q.queryRow(ctx, tablesWindowSQL(s.b), afterTableID, scan).Scan(&maxID, &n)
		return maxID, n, err
	})
	if err != nil {
		return nil, 0, err
	}
	return ts, next, nil
}
