package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// This file is the seam between the store operations written once for both
// backends (the methods of sqlStore, e.g. policy_ops.go, ledger_ops.go) and
// the backends. What differs between PostgreSQL and SQLite sits behind
// sqlBackend (sqlstore_postgres.go, sqlstore_sqlite.go): where SQL runs, how
// a write transaction is opened, how a fenced write is checked, and, in its
// sqlDialect, how a placeholder, a cast, a row lock and a time argument are
// spelled, how driver errors read, and the few statements whose text
// differs. The logic around it (validation, resolution, version bumps,
// batching, error classification) lives in sqlStore.

// sqlStore holds the operations written once for both backends. Both
// postgresStore and sqliteStore embed one built over their own sqlBackend,
// so its exported methods are theirs.
type sqlStore struct {
	b sqlBackend
	// clock is the store's clock (the backend's now).
	clock func() time.Time
}

// sqlBackend is what a backend supplies to sqlStore: its connections and
// its dialect.
type sqlBackend interface {
	sqlDialect
	// read returns where reads outside a write transaction run:
	// PostgreSQL's pool, SQLite's read-only pool.
	read() dbQ
	// write runs fn's statements where writes outside an explicit
	// transaction run: on PostgreSQL's pool, each statement its own
	// transaction (no BEGIN/COMMIT round trips); on SQLite in one BEGIN
	// IMMEDIATE transaction on the writer, the only connection that may
	// write. fn's error is returned as it is.
	write(ctx context.Context, fn func(q dbQ) error) error
	// inTx runs fn in one write transaction, committed when fn returns nil
	// and rolled back otherwise: a pgx transaction on PostgreSQL, a BEGIN
	// IMMEDIATE transaction on the single writer connection on SQLite.
	inTx(ctx context.Context, fn func(q dbQ) error) error
	// fenced runs one fenced UPDATE of job id: SET set WHERE the row is
	// id, its fence is fence, it is not finished and cond ("AND …", may be
	// empty) holds. set's own arguments args start at placeholder 3 (1 is
	// the id, 2 the fence). A row the UPDATE did not match is classified by
	// fenceError: ErrNotFound, or ErrStaleFence, also for a row whose fence
	// matches but that fails cond. Driver errors are wrapped as op.
	// PostgreSQL does the UPDATE and the lookup in one statement, SQLite in
	// one write transaction.
	fenced(ctx context.Context, op string, id, fence int64, cond, set string, args ...any) error
}

// sqlDialect is how a backend spells SQL and reads its driver's errors. It
// holds no connection, so the statement builders and the helpers that the
// scheduler's transactions share (insertJob) can take it alone.
type sqlDialect interface {
	// param renders placeholder i: $i or ?i.
	param(i int) string
	// typed renders placeholder i as a value of SQL type typ, where
	// PostgreSQL cannot infer a placeholder's type from the statement
	// ($i::typ); SQLite needs no cast (?i).
	typed(i int, typ string) string
	// forUpdate ends a SELECT in a write transaction whose rows must stay
	// locked until the transaction ends: " FOR UPDATE" on PostgreSQL,
	// nothing on SQLite, whose write transactions hold the database's write
	// lock from BEGIN IMMEDIATE on.
	forUpdate() string
	// noPullUp ends a sublink (an EXISTS subquery) that the planner must
	// run per row instead of turning it into a join: " OFFSET 0" on
	// PostgreSQL, which does not pull up a sublink with an OFFSET; nothing
	// on SQLite, which plans sublinks per row anyway and rejects OFFSET
	// without LIMIT.
	noPullUp() string
	// timeArg is t as a query argument: a time.Time for PostgreSQL's
	// timestamptz, text in sqliteTimeLayout for SQLite.
	timeArg(t time.Time) any
	// jsonNumber renders the number at key of the JSON object expr, NULL
	// when it is absent or not a number (table_health_*.go).
	jsonNumber(expr, key string) string
	// isUnique reports whether err is a violation of the unique index k.
	isUnique(err error, k uniqueIndex) bool
	// isForeignKey reports whether err is a foreign key violation.
	isForeignKey(err error) bool
	// wrap maps a driver error of operation op to the store's errors
	// (pgError, sqliteError).
	wrap(op string, err error) error
	// stmts returns the statements whose text differs between the
	// backends by more than the spellings above.
	stmts() *dialectStmts
}

// dialectStmts are the statements a backend writes in its own SQL, where
// the other's functions or clauses do not exist or plan worse. Each
// backend's set is a variable beside its dialect.
type dialectStmts struct {
	// latestJobs selects jobCols of the newest row of each table, newest
	// first, at most placeholder 1 rows.
	latestJobs string
	// jobStatsOutcomes counts the finished rows' per-type outcomes: one
	// (type, outcome, count) row per pair found in the outcomes arrays.
	jobStatsOutcomes string
}

// dbQ runs SQL text, written with the backend's placeholders, on a pool or
// in a transaction.
type dbQ interface {
	// queryRow runs a query returning at most one row. Scanning a result
	// without a row fails with an error matching sql.ErrNoRows (pgx's
	// ErrNoRows matches it too).
	queryRow(ctx context.Context, text string, args ...any) scanner
	// query runs a query and calls each for every row, stopping at the
	// first error.
	query(ctx context.Context, each func(row scanner) error, text string, args ...any) error
	// exec runs a statement and returns how many rows it changed.
	exec(ctx context.Context, text string, args ...any) (rowsAffected int64, err error)
}

// scanner is one result row: pgx.Row, pgx.Rows, *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// uniqueIndex names a unique index the way each backend reports its
// violation: PostgreSQL by the index's name, SQLite by its columns.
type uniqueIndex struct {
	pgName        string
	sqliteColumns string
}

// fail returns err unchanged when it is one of the store's own errors (an
// operation's logic returned it from inside a transaction) and otherwise
// maps the driver error with the backend's wrap.
func (s *sqlStore) fail(op string, err error) error {
	for _, sentinel := range []error{ErrNotFound, ErrConflict, ErrInvalidArgument} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	return s.b.wrap(op, err)
}

// eachRow hands every row of rows (pgx.Rows or *sql.Rows) to each,
// stopping at the first error; the caller closes rows.
func eachRow(rows interface {
	scanner
	Next() bool
	Err() error
}, each func(row scanner) error) error {
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// collect runs a query on q and scans every row with scan. No rows is an
// empty, non-nil slice.
func collect[T any](ctx context.Context, q dbQ, scan func(scanner) (T, error), text string, args ...any) ([]T, error) {
	out := []T{}
	err := q.query(ctx, func(row scanner) error {
		v, err := scan(row)
		if err != nil {
			return err
		}
		out = append(out, v)
		return nil
	}, text, args...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// dbTime is the scan target of a timestamp column of either backend (see
// scanTime): PostgreSQL's timestamptz arrives as a time.Time, SQLite's text
// in sqliteTimeLayout; NULL is the zero time. The result is in UTC.
type dbTime time.Time

// scanTime returns the scan target that stores a timestamp column in t.
func scanTime(t *time.Time) *dbTime { return (*dbTime)(t) }

// Scan implements sql.Scanner, which pgx honours too.
func (d *dbTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d = dbTime{}
	case time.Time:
		*d = dbTime(v.UTC())
	case string:
		t, err := parseSQLiteTime(v)
		if err != nil {
			return err
		}
		*d = dbTime(t)
	default:
		return fmt.Errorf("store: cannot scan %T as a time", src)
	}
	return nil
}

// tableCols are the columns of maintained_table that scanTable reads.
const tableCols = `id, catalog, namespace, name, table_uuid, created_at`

// scanTable reads tableCols.
func scanTable(row scanner) (Table, error) {
	var t Table
	if err := row.Scan(&t.ID, &t.Catalog, &t.Namespace, &t.Name, &t.UUID, scanTime(&t.CreatedAt)); err != nil {
		return Table{}, err
	}
	return t, nil
}

// jobCols are the columns of table_maintenance_job that scanJob reads.
const jobCols = `id, coalesce(job_id, ''), table_id, policy_id, types, "trigger", status, fence,
	before_snapshot_id, after_snapshot_id, coalesce(error, ''), spec, outcomes, created_at, started_at, finished_at,
	coalesce(node, ''), coalesce(submitter, '')`

// scanJob reads jobCols. A NULL spec or outcomes stays nil.
func scanJob(row scanner) (Job, error) {
	var (
		j              Job
		types          string
		spec, outcomes []byte
	)
	err := row.Scan(&j.ID, &j.JobID, &j.TableID, &j.PolicyID, &types, &j.Trigger, &j.Status, &j.Fence,
		&j.BeforeSnapshotID, &j.AfterSnapshotID, &j.Error, &spec, &outcomes,
		scanTime(&j.CreatedAt), scanTime(&j.StartedAt), scanTime(&j.FinishedAt), &j.Node, &j.Submitter)
	if err != nil {
		return Job{}, err
	}
	j.Types = splitTypes(types)
	if spec != nil {
		j.Spec = json.RawMessage(spec)
	}
	if outcomes != nil {
		j.Outcomes = json.RawMessage(outcomes)
	}
	return j, nil
}

// scanMetrics reads table_id, policy_id, snapshot_id, metrics_value,
// recorded_at of table_snapshot_metrics.
func scanMetrics(row scanner) (SnapshotMetrics, error) {
	var (
		m     SnapshotMetrics
		value []byte
	)
	if err := row.Scan(&m.TableID, &m.PolicyID, &m.SnapshotID, &value, scanTime(&m.RecordedAt)); err != nil {
		return SnapshotMetrics{}, err
	}
	m.Value = json.RawMessage(value)
	return m, nil
}
