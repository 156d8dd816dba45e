package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file holds coordinator_node (node liveness) of both backends, part
// of Scheduler (see tasks.go).

// RegisterNode inserts or replaces the node's row.
func (s *postgresStore) RegisterNode(ctx context.Context, node string, now time.Time) error {
	now = orNow(now, s.now)
	_, err := s.pool.Exec(ctx, `
		INSERT INTO coordinator_node (node_id, started_at, last_heartbeat) VALUES ($1, $2, $2)
		ON CONFLICT (node_id) DO UPDATE SET started_at = EXCLUDED.started_at, last_heartbeat = EXCLUDED.last_heartbeat`,
		node, now)
	if err != nil {
		return pgError("register node", err)
	}
	return nil
}

// HeartbeatNode stamps the node's row.
func (s *postgresStore) HeartbeatNode(ctx context.Context, node string, now time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE coordinator_node SET last_heartbeat = $2 WHERE node_id = $1`, node, orNow(now, s.now))
	if err != nil {
		return pgError("heartbeat node", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: node %s", ErrNotFound, node)
	}
	return nil
}

// RemoveNode deletes the node's row.
func (s *postgresStore) RemoveNode(ctx context.Context, node string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM coordinator_node WHERE node_id = $1`, node); err != nil {
		return pgError("remove node", err)
	}
	return nil
}

// ListNodes returns the node rows.
func (s *postgresStore) ListNodes(ctx context.Context) ([]Node, error) {
	rows, err := s.pool.Query(ctx, `SELECT node_id, started_at, last_heartbeat, catalogs FROM coordinator_node ORDER BY node_id`)
	if err != nil {
		return nil, pgError("list nodes", err)
	}
	ns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Node, error) {
		var (
			n    Node
			cats *string
		)
		err := r.Scan(&n.ID, &n.StartedAt, &n.LastHeartbeat, &cats)
		n.StartedAt, n.LastHeartbeat, n.Catalogs = n.StartedAt.UTC(), n.LastHeartbeat.UTC(), splitCatalogs(cats)
		return n, err
	})
	if err != nil {
		return nil, pgError("list nodes", err)
	}
	return ns, nil
}

// SetNodeCatalogs records the node's catalog names.
func (s *postgresStore) SetNodeCatalogs(ctx context.Context, node string, catalogs []string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE coordinator_node SET catalogs = $2 WHERE node_id = $1`, node, joinCatalogs(catalogs))
	if err != nil {
		return pgError("set node catalogs", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: node %s", ErrNotFound, node)
	}
	return nil
}

// joinCatalogs stores names sorted, comma-separated.
func joinCatalogs(names []string) string {
	return strings.Join(slices.Sorted(slices.Values(names)), ",")
}

func splitCatalogs(s *string) []string {
	if s == nil {
		return nil
	}
	if *s == "" {
		return []string{}
	}
	return strings.Split(*s, ",")
}

// RegisterNode inserts or replaces the node's row.
func (s *sqliteStore) RegisterNode(ctx context.Context, node string, now time.Time) error {
	at := sqliteTime(orNow(now, s.now))
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO coordinator_node (node_id, started_at, last_heartbeat) VALUES (?1, ?2, ?2)
			ON CONFLICT (node_id) DO UPDATE SET started_at = excluded.started_at, last_heartbeat = excluded.last_heartbeat`,
			node, at)
		return err
	})
	return sqliteTaskError("register node", err)
}

// HeartbeatNode stamps the node's row.
func (s *sqliteStore) HeartbeatNode(ctx context.Context, node string, now time.Time) error {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE coordinator_node SET last_heartbeat = ?2 WHERE node_id = ?1`,
			node, sqliteTime(orNow(now, s.now)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return sqliteTaskError("heartbeat node", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: node %s", ErrNotFound, node)
	}
	return nil
}

// RemoveNode deletes the node's row.
func (s *sqliteStore) RemoveNode(ctx context.Context, node string) error {
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM coordinator_node WHERE node_id = ?1`, node)
		return err
	})
	return sqliteTaskError("remove node", err)
}

// ListNodes returns the node rows.
func (s *sqliteStore) ListNodes(ctx context.Context) ([]Node, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT node_id, started_at, last_heartbeat, catalogs FROM coordinator_node ORDER BY node_id`)
	if err != nil {
		return nil, sqliteTaskError("list nodes", err)
	}
	defer rows.Close()
	var ns []Node
	for rows.Next() {
		var (
			n         Node
			start, hb string
			cats      *string
		)
		if err := rows.Scan(&n.ID, &start, &hb, &cats); err != nil {
			return nil, sqliteTaskError("list nodes", err)
		}
		n.Catalogs = splitCatalogs(cats)
		if n.StartedAt, err = parseSQLiteTime(start); err != nil {
			return nil, err
		}
		if n.LastHeartbeat, err = parseSQLiteTime(hb); err != nil {
			return nil, err
		}
		ns = append(ns, n)
	}
	return ns, sqliteTaskError("list nodes", rows.Err())
}

// SetNodeCatalogs records the node's catalog names.
func (s *sqliteStore) SetNodeCatalogs(ctx context.Context, node string, catalogs []string) error {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE coordinator_node SET catalogs = ?2 WHERE node_id = ?1`, node, joinCatalogs(catalogs))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return sqliteTaskError("set node catalogs", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: node %s", ErrNotFound, node)
	}
	return nil
}
