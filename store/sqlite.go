package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tms-dev/tms/migrations"
)

// sqliteTimeLayout is how the SQLite backend stores times: UTC text of a
// fixed width, so text order is time order and MAX() works.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// sqliteBusyTimeoutMS is how long a connection waits for another writer
// (another process on the same file) before giving up.
const sqliteBusyTimeoutMS = 10_000

// sqliteReaders bounds the read pool. WAL lets readers run beside the writer.
const sqliteReaders = 4

// sqliteStore is the SQLite backend. It keeps two pools on the file: a
// writer pool of exactly one connection, whose transactions all begin with
// BEGIN IMMEDIATE (the driver's _txlock=immediate), and a read-only pool.
// Writers in this process therefore queue in database/sql instead of failing
// with SQLITE_BUSY, and writers in other processes wait up to the busy
// timeout for the file's write lock instead of failing when a deferred
// transaction tries to upgrade. Every connection gets its PRAGMAs (WAL,
// busy_timeout, foreign_keys) from the DSN, so none can miss them.
type sqliteStore struct {
	w, r *sql.DB
	path string
	log  *zap.Logger
	now  func() time.Time
	// sqlStore holds the operations written once for both backends
	// (sqlstore.go), here over the two pools.
	sqlStore
}

var _ backend = (*sqliteStore)(nil)

// validateSQLitePath accepts a plain file path. Query parameters are
// refused because TMS fixes the connection settings itself, and in-memory
// databases because every pooled connection would see its own.
func validateSQLitePath(path string) error {
	switch {
	case path == "":
		return fmt.Errorf("%w: sqlite URL needs a file path, e.g. sqlite://./tms.db", ErrInvalidArgument)
	case strings.ContainsAny(path, "?#"):
		return fmt.Errorf("%w: sqlite path %q must not contain '?' or '#'; connection settings are fixed by TMS", ErrInvalidArgument, path)
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return fmt.Errorf("%w: sqlite path %q is not a plain file path; TMS needs a file that several connections share", ErrInvalidArgument, path)
	}
	return nil
}

func openSQLite(ctx context.Context, path string, log *zap.Logger, now func() time.Time, mustExist bool) (*sqliteStore, error) {
	if err := validateSQLitePath(path); err != nil {
		return nil, err
	}
	if mustExist {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: database file %s does not exist (version 0), binary expects %d: run `tms-coordinator migrate --db 'sqlite://%s'`",
				ErrSchemaBehind, path, migrations.Latest(), path)
		}
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", sqliteBusyTimeoutMS)
	w, err := sql.Open("sqlite", path+"?"+common+"&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// The first connection creates the file if needed and switches it to
	// WAL before any reader opens it.
	if err := pingSQLite(ctx, w); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", path+"?"+common+"&_query_only=1")
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(sqliteReaders)
	r.SetMaxIdleConns(sqliteReaders)
	s := &sqliteStore{w: w, r: r, path: path, log: log, now: now}
	s.sqlStore = sqlStore{b: sqliteBackend{s: s}, clock: now}
	return s, nil
}

// pingSQLite opens the writer's connection. Switching a new file to WAL
// takes an exclusive lock, and SQLite answers SQLITE_BUSY at once, without
// the busy handler, when another process is switching or opening the same
// file at that moment: retried for up to the busy timeout.
func pingSQLite(ctx context.Context, w *sql.DB) error {
	deadline := time.Now().Add(sqliteBusyTimeoutMS * time.Millisecond)
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		err := w.PingContext(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

// Backend returns "sqlite".
func (s *sqliteStore) Backend() string { return BackendSQLite }

// Close closes both pools.
func (s *sqliteStore) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// writeTx runs fn in one BEGIN IMMEDIATE transaction on the writer.
func (s *sqliteStore) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func sqliteTime(t time.Time) string { return t.UTC().Format(sqliteTimeLayout) }

func parseSQLiteTime(s string) (time.Time, error) {
	t, err := time.Parse(sqliteTimeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: bad time %q in sqlite database: %w", s, err)
	}
	return t, nil
}

func parseNullSQLiteTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	return parseSQLiteTime(s.String)
}

// CreateJob inserts a pending job row; the partial unique index turns a
// second in-flight row into ErrInFlight.
func (s *sqliteStore) CreateJob(ctx context.Context, nj NewJob) (Job, error) {
	var j Job
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		j, err = sqliteInsertJob(ctx, tx, nj, s.now())
		return err
	})
	return j, err
}

// sqliteInsertJob is insertJob in tx. It serves both CreateJob and the
// scheduler's TxWriter.
func sqliteInsertJob(ctx context.Context, tx *sql.Tx, nj NewJob, now time.Time) (Job, error) {
	return insertJob(ctx, sqliteDialect{}, sqliteQ{tx}, nj, now)
}

// fencedThen runs one fenced UPDATE of job id inside a write transaction
// (sqlBackend.fenced, which see) and, when the UPDATE matched the row, then
// in the same transaction. If the UPDATE matched no row, the same
// transaction looks the row up to tell ErrNotFound from ErrStaleFence; the
// fence itself is checked by the UPDATE.
func (s *sqliteStore) fencedThen(ctx context.Context, op string, id, fence int64, cond string, then func(*sql.Tx) error, set string, args ...any) error {
	var fenceErr error
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE table_maintenance_job SET `+set+`
			WHERE id = ?1 AND fence = ?2 AND finished_at IS NULL `+cond,
			append([]any{id, fence}, args...)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			if err == nil && then != nil {
				err = then(tx)
			}
			return err
		}
		var (
			current  int64
			finished bool
		)
		err = tx.QueryRowContext(ctx, `SELECT fence, finished_at IS NOT NULL FROM table_maintenance_job WHERE id = ?1`, id).
			Scan(&current, &finished)
		if errors.Is(err, sql.ErrNoRows) {
			fenceErr = fenceError(op, id, fence, false, 0, false)
			return nil
		}
		if err != nil {
			return err
		}
		fenceErr = fenceError(op, id, fence, true, current, finished)
		return nil
	})
	if err != nil {
		return sqliteError(op, err)
	}
	return fenceErr
}

// FinishJob closes the row.
func (s *sqliteStore) FinishJob(ctx context.Context, id, fence int64, f Finish) error {
	if err := validateFinish(f); err != nil {
		return err
	}
	at := sqliteTime(orNow(f.At, s.now))
	// The row's table is free once it is finished: the tasks waiting for
	// it are made due in the same transaction (nodes find them by polling).
	wake := func(tx *sql.Tx) error { return sqliteWakeWaiting(ctx, tx, id, at) }
	return s.fencedThen(ctx, "finish job", id, fence, "", wake,
		`status = ?3, after_snapshot_id = ?4, error = nullif(?5, ''), finished_at = ?6, outcomes = ?7`,
		string(f.Status), f.AfterSnapshotID, f.Error, at, nullJSON(f.Outcomes))
}

// sqliteWakeWaiting makes the tasks waiting for the table of job row id
// due at at, in the transaction that finished the row (nodes find them by
// polling: SQLite has no NOTIFY).
func sqliteWakeWaiting(ctx context.Context, tx *sql.Tx, id int64, at string) error {
	_, err := tx.ExecContext(ctx, `
		UPDATE scheduled_tasks SET execution_time = min(execution_time, ?2), wait_for = NULL
		WHERE wait_for = '`+tableWaitPrefix+`' || (SELECT table_id FROM table_maintenance_job WHERE id = ?1) AND picked = 0`,
		id, at)
	return err
}

// sqliteError maps constraint failures that mean a bad argument (CHECK) to
// ErrInvalidArgument and wraps the rest with the operation's name.
func sqliteError(op string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_CHECK {
		return fmt.Errorf("%w: %s: %w", ErrInvalidArgument, op, err)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}
