package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// withTxAttempts bounds how often WithTx runs a transaction that
// PostgreSQL aborted as a deadlock victim or for a serialization failure.
const withTxAttempts = 5

// WithTx runs fn in one transaction that completes no claim. A transaction
// PostgreSQL aborts as a deadlock victim (a batch of upserts against the
// engine's batched completions, which lock rows in another order) or for a
// serialization failure is run again, fn included, a few times after a
// short random pause.
func (s *postgresStore) WithTx(ctx context.Context, fn func(ctx context.Context, tx TxWriter) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			return fn(ctx, &pgTxWriter{tx: tx, s: s})
		})
		var pgErr *pgconn.PgError
		if attempt == withTxAttempts || !errors.As(err, &pgErr) || (pgErr.Code != "40P01" && pgErr.Code != "40001") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(1+rand.IntN(10*attempt)) * time.Millisecond):
		}
	}
}

// RecordCommitEvent inserts the event's key unless it is there.
func (w *pgTxWriter) RecordCommitEvent(ctx context.Context, ev CommitEvent) (bool, error) {
	if err := validateCommitEvent(ev); err != nil {
		return false, err
	}
	tag, err := w.tx.Exec(ctx, `
		INSERT INTO commit_event (event_id, table_id, snapshot_id, received_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (event_id) DO NOTHING`,
		ev.EventID, ev.TableID, ev.SnapshotID, orNow(ev.ReceivedAt, w.s.now))
	if err != nil {
		return false, pgError("record commit event", err)
	}
	return tag.RowsAffected() == 1, nil
}

// PurgeCommitEvents deletes the keys received before before.
func (s *postgresStore) PurgeCommitEvents(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM commit_event WHERE received_at < $1`, utc(before))
	if err != nil {
		return 0, pgError("purge commit events", err)
	}
	return tag.RowsAffected(), nil
}
