package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// This file is SQLite's side of sqlStore's seam (see sqlstore.go).

// sqlitePlaceholder renders placeholder i as ?i.
func sqlitePlaceholder(i int) string { return "?" + strconv.Itoa(i) }

// sqliteBackend is the sqlBackend of a sqliteStore: reads on its read pool,
// writes through its writeTx.
type sqliteBackend struct {
	sqliteDialect
	s *sqliteStore
}

// read returns the read-only pool.
func (b sqliteBackend) read() dbQ { return sqliteQ{b.s.r} }

// write runs fn in one BEGIN IMMEDIATE transaction on the writer (writeTx).
func (b sqliteBackend) write(ctx context.Context, fn func(q dbQ) error) error { return b.inTx(ctx, fn) }

// inTx runs fn in one BEGIN IMMEDIATE transaction on the writer (writeTx).
func (b sqliteBackend) inTx(ctx context.Context, fn func(q dbQ) error) error {
	return b.s.writeTx(ctx, func(tx *sql.Tx) error { return fn(sqliteQ{tx}) })
}

// fenced is fencedThen with nothing to run after the UPDATE.
func (b sqliteBackend) fenced(ctx context.Context, op string, id, fence int64, cond, set string, args ...any) error {
	return b.s.fencedThen(ctx, op, id, fence, cond, nil, set, args...)
}

// sqliteDialect is SQLite's sqlDialect.
type sqliteDialect struct{}

// param renders ?i.
func (sqliteDialect) param(i int) string { return sqlitePlaceholder(i) }

// typed renders ?i: SQLite has no placeholder types to declare.
func (sqliteDialect) typed(i int, _ string) string { return sqlitePlaceholder(i) }

// forUpdate is empty: the write transaction already excludes every other
// writer.
func (sqliteDialect) forUpdate() string { return "" }

// noPullUp is empty: SQLite runs a sublink per row anyway.
func (sqliteDialect) noPullUp() string { return "" }

// timeArg is sqliteTime(t).
func (sqliteDialect) timeArg(t time.Time) any { return sqliteTime(t) }

// isUnique matches SQLITE_CONSTRAINT_UNIQUE naming k.sqliteColumns (SQLite
// reports "UNIQUE constraint failed: table.column").
func (sqliteDialect) isUnique(err error, k uniqueIndex) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE && strings.Contains(se.Error(), k.sqliteColumns)
}

// isForeignKey matches SQLITE_CONSTRAINT_FOREIGNKEY.
func (sqliteDialect) isForeignKey(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// wrap is sqliteError.
func (sqliteDialect) wrap(op string, err error) error { return sqliteError(op, err) }

// stmts returns sqliteStmts.
func (sqliteDialect) stmts() *dialectStmts { return &sqliteStmts }

// sqliteStmts are SQLite's own statements: no DISTINCT ON, and JSON
// through json_each and json_extract.
var sqliteStmts = dialectStmts{
	latestJobs: `
		SELECT ` + jobCols + ` FROM table_maintenance_job
		WHERE id IN (SELECT max(id) FROM table_maintenance_job GROUP BY table_id)
		ORDER BY id DESC LIMIT ?1`,
	jobStatsOutcomes: `SELECT json_extract(e.value, '$.type'), json_extract(e.value, '$.outcome'), count(*)
		FROM table_maintenance_job j, json_each(j.outcomes) e
		WHERE j.finished_at IS NOT NULL AND json_type(j.outcomes) = 'array'
			AND json_extract(e.value, '$.type') IS NOT NULL AND json_extract(e.value, '$.outcome') IS NOT NULL
		GROUP BY 1, 2`,
}

// sqliteQ is the dbQ of the read pool or a write transaction.
type sqliteQ struct{ db sqliteQuerier }

// queryRow runs QueryRowContext.
func (q sqliteQ) queryRow(ctx context.Context, text string, args ...any) scanner {
	return q.db.QueryRowContext(ctx, text, args...)
}

// query runs QueryContext and hands each row to each.
func (q sqliteQ) query(ctx context.Context, each func(row scanner) error, text string, args ...any) error {
	rows, err := q.db.QueryContext(ctx, text, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return eachRow(rows, each)
}

// exec runs ExecContext and returns its result's row count.
func (q sqliteQ) exec(ctx context.Context, text string, args ...any) (int64, error) {
	res, err := q.db.ExecContext(ctx, text, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
