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
type pgBackend struct {
	pgDialect
	pool *pgxpool.Pool
}

// read returns the pool.
func (b pgBackend) read() dbQ { return pgQ{b.pool} }

// write runs fn on the pool: every statement commits on its own.
func (b pgBackend) write(_ context.Context, fn func(q dbQ) error) error { return fn(pgQ{b.pool}) }

// inTx runs fn in one transaction of the pool (pgx.BeginFunc).
func (b pgBackend) inTx(ctx context.Context, fn func(q dbQ) error) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return fn(pgQ{tx}) })
}

// fenced runs the UPDATE and the lookup that classifies a rejected write as
// one statement, hence one transaction and one round trip: the fence is
// checked by the write itself, and rows are never deleted, so the lookup
// cannot disagree with it.
func (b pgBackend) fenced(ctx context.Context, op string, id, fence int64, cond, set string, args ...any) error {
	var (
		updated, exists, finished bool
		current                   int64
	)
	err := b.pool.QueryRow(ctx, `
		WITH u AS (
			UPDATE table_maintenance_job SET `+set+`
			WHERE id = $1 AND fence = $2 AND finished_at IS NULL `+cond+`
			RETURNING 1
		)
		SELECT EXISTS (SELECT 1 FROM u), j.id IS NOT NULL, coalesce(j.fence, 0), j.finished_at IS NOT NULL
		FROM (SELECT 1) AS one
		LEFT JOIN table_maintenance_job j ON j.id = $1`,
		append([]any{id, fence}, args...)...).Scan(&updated, &exists, &current, &finished)
	if err != nil {
		return pgError(op, err)
	}
	if updated {
		return nil
	}
	return fenceError(op, id, fence, exists, current, finished)
}

// pgDialect is PostgreSQL's sqlDialect.
type pgDialect struct{}

// param renders $i.
func (pgDialect) param(i int) string { return pgPlaceholder(i) }

// typed renders $i::typ.
func (pgDialect) typed(i int, typ string) string { return pgPlaceholder(i) + "::" + typ }

// forUpdate is the row lock of a SELECT.
func (pgDialect) forUpdate() string { return " FOR UPDATE" }

// noPullUp is OFFSET 0, which keeps a sublink a per-row subplan.
func (pgDialect) noPullUp() string { return " OFFSET 0" }

// timeArg passes t as it is; pgx binds it to timestamptz.
func (pgDialect) timeArg(t time.Time) any { return t }

// isUnique matches unique_violation (23505) on the index k.pgName.
func (pgDialect) isUnique(err error, k uniqueIndex) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == k.pgName
}

// isForeignKey matches foreign_key_violation (23503).
func (pgDialect) isForeignKey(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

// wrap is pgError.
func (pgDialect) wrap(op string, err error) error { return pgError(op, err) }

// stmts returns pgStmts.
func (pgDialect) stmts() *dialectStmts { return &pgStmts }

// pgStmts are PostgreSQL's own statements: DISTINCT ON, and jsonb's
// operators and set-returning functions.
var pgStmts = dialectStmts{
	latestJobs: `
		SELECT ` + jobCols + ` FROM (
			SELECT DISTINCT ON (table_id) * FROM table_maintenance_job ORDER BY table_id, id DESC
		) j ORDER BY id DESC LIMIT $1`,
	jobStatsOutcomes: `SELECT e->>'type', e->>'outcome', count(*)
		FROM table_maintenance_job j CROSS JOIN LATERAL jsonb_array_elements(j.outcomes) e
		WHERE j.finished_at IS NOT NULL AND jsonb_typeof(j.outcomes) = 'array'
			AND e->>'type' IS NOT NULL AND e->>'outcome' IS NOT NULL
		GROUP BY 1, 2`,
}

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
	return eachRow(rows, each)
}

// exec runs Exec and returns its command tag's row count.
func (q pgQ) exec(ctx context.Context, text string, args ...any) (int64, error) {
	tag, err := q.db.Exec(ctx, text, args...)
	return tag.RowsAffected(), err
}
