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
	return w.s.recordCommitEvent(ctx, pgQ{w.tx}, ev)
}
