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
// write transactions through its writeTx.
type sqliteBackend struct{ s *sqliteStore }

// read returns the read-only pool.
func (b sqliteBackend) read() dbQ { return sqliteQ{b.s.r} }

// inTx runs fn in one BEGIN IMMEDIATE transaction on the writer (writeTx).
func (b sqliteBackend) inTx(ctx context.Context, fn func(q dbQ) error) error {
	return b.s.writeTx(ctx, func(tx *sql.Tx) error { return fn(sqliteQ{tx}) })
}

// param renders ?i.
func (sqliteBackend) param(i int) string { return sqlitePlaceholder(i) }

// typed renders ?i: SQLite has no placeholder types to declare.
func (sqliteBackend) typed(i int, _ string) string { return sqlitePlaceholder(i) }

// forUpdate is empty: the write transaction already excludes every other
// writer.
func (sqliteBackend) forUpdate() string { return "" }

// timeArg is sqliteTime(t).
func (sqliteBackend) timeArg(t time.Time) any { return sqliteTime(t) }

// isUnique matches SQLITE_CONSTRAINT_UNIQUE naming k.sqliteColumns (SQLite
// reports "UNIQUE constraint failed: table.column").
func (sqliteBackend) isUnique(err error, k uniqueIndex) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE && strings.Contains(se.Error(), k.sqliteColumns)
}

// wrap is sqliteError.
func (sqliteBackend) wrap(op string, err error) error { return sqliteError(op, err) }

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
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// exec runs ExecContext and returns its result's row count.
func (q sqliteQ) exec(ctx context.Context, text string, args ...any) (int64, error) {
	res, err := q.db.ExecContext(ctx, text, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
