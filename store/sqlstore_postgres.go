package store

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// This file is PostgreSQL's side of sqlStore's seam (see sqlstore.go).

// pgPlaceholder renders placeholder i as $i.
func pgPlaceholder(i int) string { return "$" + strconv.Itoa(i) }

// pgBackend is the sqlBackend of a PostgreSQL pool.
type pgBackend struct{ pool *pgxpool.Pool }

// read returns the pool.
func (b pgBackend) read() dbQ { return pgQ{b.pool} }

// inTx runs fn in one transaction of the pool (pgx.BeginFunc).
func (b pgBackend) inTx(ctx context.Context, fn func(q dbQ) error) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return fn(pgQ{tx}) })
}

// param renders $i.
func (pgBackend) param(i int) string { return pgPlaceholder(i) }

// typed renders $i::typ.
func (pgBackend) typed(i int, typ string) string { return pgPlaceholder(i) + "::" + typ }

// forUpdate is the row lock of a SELECT.
func (pgBackend) forUpdate() string { return " FOR UPDATE" }

// timeArg passes t as it is; pgx binds it to timestamptz.
func (pgBackend) timeArg(t time.Time) any { return t }

// isUnique matches unique_violation (23505) on the index k.pgName.
func (pgBackend) isUnique(err error, k uniqueIndex) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == k.pgName
}

// wrap is pgError.
func (pgBackend) wrap(op string, err error) error { return pgError(op, err) }

// pgQ is the dbQ of a pool or a transaction.
type pgQ struct{ db pgDB }

// queryRow runs QueryRow.
func (q pgQ) queryRow(ctx context.Context, text string, args ...any) scanner {
	return q.db.QueryRow(ctx, text, args...)
}

// query runs Query and hands each row to each.
func (q pgQ) query(ctx context.Context, each func(row scanner) error, text string, args ...any) error {
	rows, err := q.db.Query(ctx, text, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// exec runs Exec and returns its command tag's row count.
func (q pgQ) exec(ctx context.Context, text string, args ...any) (int64, error) {
	tag, err := q.db.Exec(ctx, text, args...)
	return tag.RowsAffected(), err
}
