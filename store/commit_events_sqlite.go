package store

import (
	"context"
	"database/sql"
	"time"
)

// WithTx runs fn in one write transaction that completes no claim.
func (s *sqliteStore) WithTx(ctx context.Context, fn func(ctx context.Context, tx TxWriter) error) error {
	var fnErr error
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		fnErr = fn(ctx, &sqliteTxWriter{tx: tx, s: s})
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	return sqliteTaskError("transaction", err)
}

// RecordCommitEvent inserts the event's key unless it is there.
func (w *sqliteTxWriter) RecordCommitEvent(ctx context.Context, ev CommitEvent) (bool, error) {
	if err := validateCommitEvent(ev); err != nil {
		return false, err
	}
	var snap sql.NullInt64
	if ev.SnapshotID != nil {
		snap = sql.NullInt64{Int64: *ev.SnapshotID, Valid: true}
	}
	res, err := w.tx.ExecContext(ctx, `
		INSERT INTO commit_event (event_id, table_id, snapshot_id, received_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (event_id) DO NOTHING`,
		ev.EventID, ev.TableID, snap, sqliteTime(orNow(ev.ReceivedAt, w.s.now)))
	if err != nil {
		return false, sqliteError("record commit event", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, sqliteError("record commit event", err)
	}
	return n == 1, nil
}

// PurgeCommitEvents deletes the keys received before before.
func (s *sqliteStore) PurgeCommitEvents(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM commit_event WHERE received_at < ?1`, sqliteTime(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, sqliteError("purge commit events", err)
	}
	return n, nil
}
