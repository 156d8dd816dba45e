package store

import (
	"context"
	"database/sql"
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
	return w.s.recordCommitEvent(ctx, sqliteQ{w.tx}, ev)
}
