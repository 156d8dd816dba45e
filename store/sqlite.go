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
	s.sqlStore = sqlStore{b: sqliteBackend{s}, clock: now}
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

// RegisterTable inserts the incarnation or, if it exists, returns it, in one
// write transaction.
func (s *sqliteStore) RegisterTable(ctx context.Context, ref TableRef) (Table, error) {
	if err := validateTableRef(ref); err != nil {
		return Table{}, err
	}
	var t Table
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = scanTable(tx.QueryRowContext(ctx, `
			INSERT INTO maintained_table (catalog, namespace, name, table_uuid, created_at)
			VALUES (?1, ?2, ?3, ?4, ?5)
			ON CONFLICT (catalog, namespace, name, table_uuid) DO NOTHING
			RETURNING `+tableCols, ref.Catalog, ref.Namespace, ref.Name, ref.UUID, sqliteTime(s.now())))
		if errors.Is(err, sql.ErrNoRows) {
			t, err = scanTable(tx.QueryRowContext(ctx, `
				SELECT `+tableCols+` FROM maintained_table
				WHERE catalog = ?1 AND namespace = ?2 AND name = ?3 AND table_uuid = ?4`,
				ref.Catalog, ref.Namespace, ref.Name, ref.UUID))
		}
		return err
	})
	if err != nil {
		return Table{}, sqliteError("register table", err)
	}
	return t, nil
}

// FindTable returns the newest incarnation of a table name.
func (s *sqliteStore) FindTable(ctx context.Context, catalog, namespace, name string) (Table, error) {
	t, err := scanTable(s.r.QueryRowContext(ctx, `
		SELECT `+tableCols+` FROM maintained_table
		WHERE catalog = ?1 AND namespace = ?2 AND name = ?3
		ORDER BY id DESC LIMIT 1`, catalog, namespace, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Table{}, fmt.Errorf("%w: table %s.%s.%s", ErrNotFound, catalog, namespace, name)
	}
	if err != nil {
		return Table{}, sqliteError("find table", err)
	}
	return t, nil
}

// GetTable returns a table row by id.
func (s *sqliteStore) GetTable(ctx context.Context, id int64) (Table, error) {
	t, err := scanTable(s.r.QueryRowContext(ctx, `SELECT `+tableCols+` FROM maintained_table WHERE id = ?1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Table{}, notFound("table", id)
	}
	if err != nil {
		return Table{}, sqliteError("get table", err)
	}
	return t, nil
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

// sqliteInsertJob inserts a pending job row in tx, mapping the in-flight
// index and the table foreign key to ErrInFlight and ErrNotFound. It serves
// both CreateJob and the scheduler's TxWriter, so the two cannot drift.
func sqliteInsertJob(ctx context.Context, tx *sql.Tx, nj NewJob, now time.Time) (Job, error) {
	types, err := validateNewJob(nj)
	if err != nil {
		return Job{}, err
	}
	j, err := scanJob(tx.QueryRowContext(ctx, `
		INSERT INTO table_maintenance_job (job_id, table_id, policy_id, types, "trigger", status, fence, spec, created_at, node)
		VALUES (nullif(?1, ''), ?2, ?3, ?4, ?5, ?6, 1, ?7, ?8, nullif(?9, ''))
		RETURNING `+jobCols,
		nj.JobID, nj.TableID, nj.PolicyID, types, string(nj.Trigger), string(StatusPending), nullJSON(nj.Spec), sqliteTime(now), nj.Node))
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) {
			switch {
			case se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE && strings.Contains(se.Error(), "table_maintenance_job.table_id"):
				return Job{}, inFlightError(nj)
			case se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
				return Job{}, notFound("table", nj.TableID)
			}
		}
		return Job{}, sqliteError("create job", err)
	}
	return j, nil
}

// GetJob returns a job row by id.
func (s *sqliteStore) GetJob(ctx context.Context, id int64) (Job, error) {
	j, err := scanJob(s.r.QueryRowContext(ctx, `SELECT `+jobCols+` FROM table_maintenance_job WHERE id = ?1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, notFound("job", id)
	}
	if err != nil {
		return Job{}, sqliteError("get job", err)
	}
	return j, nil
}

// fenced runs one fenced UPDATE of job id inside a write transaction. set is
// the SET list; its own arguments start at ?3 (?1 is the id, ?2 the fence).
// If the UPDATE matched no row, the same transaction looks the row up to tell
// ErrNotFound from ErrStaleFence; the fence itself is checked by the UPDATE.
func (s *sqliteStore) fenced(ctx context.Context, op string, id, fence int64, set string, args ...any) error {
	return s.fencedIf(ctx, op, id, fence, "", set, args...)
}

// fencedIf is fenced with an extra condition cond ("AND …") on the row; a
// row whose fence matches but fails cond is reported as ErrStaleFence too.
func (s *sqliteStore) fencedIf(ctx context.Context, op string, id, fence int64, cond, set string, args ...any) error {
	return s.fencedThen(ctx, op, id, fence, cond, nil, set, args...)
}

// fencedThen is fencedIf that also runs then in the same transaction when
// the UPDATE matched the row.
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

// StartJob marks the job running.
func (s *sqliteStore) StartJob(ctx context.Context, id, fence int64, at time.Time) error {
	return s.fencedIf(ctx, "start job", id, fence, `AND status = 'pending'`, `status = ?3, started_at = ?4`,
		string(StatusRunning), sqliteTime(orNow(at, s.now)))
}

// SetBeforeSnapshot records the sampled snapshot.
func (s *sqliteStore) SetBeforeSnapshot(ctx context.Context, id, fence, snapshotID int64) error {
	return s.fenced(ctx, "set before snapshot", id, fence, `before_snapshot_id = ?3`, snapshotID)
}

// SetJobID records the external job id.
func (s *sqliteStore) SetJobID(ctx context.Context, id, fence int64, jobID string) error {
	return s.fenced(ctx, "set job id", id, fence, `job_id = nullif(?3, '')`, jobID)
}

// FinishJob closes the row.
func (s *sqliteStore) FinishJob(ctx context.Context, id, fence int64, f Finish) error {
	if err := validateFinish(f); err != nil {
		return err
	}
	at := sqliteTime(orNow(f.At, s.now))
	// The row's table is free once it is finished: the tasks waiting for
	// it are made due in the same transaction (nodes find them by polling).
	wake := func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			UPDATE scheduled_tasks SET execution_time = min(execution_time, ?2), wait_for = NULL
			WHERE wait_for = '`+tableWaitPrefix+`' || (SELECT table_id FROM table_maintenance_job WHERE id = ?1) AND picked = 0`,
			id, at)
		return err
	}
	return s.fencedThen(ctx, "finish job", id, fence, "", wake,
		`status = ?3, after_snapshot_id = ?4, error = nullif(?5, ''), finished_at = ?6, outcomes = ?7`,
		string(f.Status), f.AfterSnapshotID, f.Error, at, nullJSON(f.Outcomes))
}

// CheckFence reads the row's fence and finished state.
func (s *sqliteStore) CheckFence(ctx context.Context, id, fence int64) error {
	var (
		current  int64
		finished bool
	)
	err := s.r.QueryRowContext(ctx, `SELECT fence, finished_at IS NOT NULL FROM table_maintenance_job WHERE id = ?1`, id).
		Scan(&current, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return fenceError("check fence", id, fence, false, 0, false)
	}
	if err != nil {
		return sqliteError("check fence", err)
	}
	if current == fence && !finished {
		return nil
	}
	return fenceError("check fence", id, fence, true, current, finished)
}

// InFlightBaseSnapshots lists the before snapshots of the table's other
// in-flight rows.
func (s *sqliteStore) InFlightBaseSnapshots(ctx context.Context, tableID, excludeJobID int64) ([]int64, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT DISTINCT before_snapshot_id FROM table_maintenance_job
		WHERE table_id = ?1 AND id <> ?2 AND finished_at IS NULL AND before_snapshot_id IS NOT NULL
		ORDER BY before_snapshot_id`, tableID, excludeJobID)
	if err != nil {
		return nil, sqliteError("in-flight base snapshots", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, sqliteError("in-flight base snapshots", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, sqliteError("in-flight base snapshots", err)
	}
	return ids, nil
}

// BumpFence increments the row's fence.
func (s *sqliteStore) BumpFence(ctx context.Context, id int64) (int64, error) {
	var fence int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx,
			`UPDATE table_maintenance_job SET fence = fence + 1 WHERE id = ?1 RETURNING fence`, id).Scan(&fence)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound("job", id)
	}
	if err != nil {
		return 0, sqliteError("bump fence", err)
	}
	return fence, nil
}

// ListJobs returns a table's newest job rows.
func (s *sqliteStore) ListJobs(ctx context.Context, tableID int64, limit int) ([]Job, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `
		SELECT `+jobCols+` FROM table_maintenance_job
		WHERE table_id = ?1 ORDER BY id DESC LIMIT ?2`, tableID, limit)
	if err != nil {
		return nil, sqliteError("list jobs", err)
	}
	defer rows.Close()
	var jobs []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, sqliteError("list jobs", err)
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, sqliteError("list jobs", err)
	}
	return jobs, nil
}

// UpsertSnapshotMetrics inserts or replaces a metrics row.
func (s *sqliteStore) UpsertSnapshotMetrics(ctx context.Context, m SnapshotMetrics) error {
	if err := validateMetrics(m); err != nil {
		return err
	}
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			INSERT INTO table_snapshot_metrics (table_id, policy_id, snapshot_id, metrics_value, recorded_at)
			VALUES (?1, ?2, ?3, ?4, ?5)
			ON CONFLICT (table_id, policy_id, snapshot_id)
			DO UPDATE SET metrics_value = excluded.metrics_value, recorded_at = excluded.recorded_at`,
			m.TableID, m.PolicyID, m.SnapshotID, string(m.Value), sqliteTime(orNow(m.RecordedAt, s.now)))
		return err
	})
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY {
		return notFound("table", m.TableID)
	}
	if err != nil {
		return sqliteError("upsert snapshot metrics", err)
	}
	return nil
}

// ListSnapshotMetrics returns a table's metrics rows, oldest first.
func (s *sqliteStore) ListSnapshotMetrics(ctx context.Context, tableID int64) ([]SnapshotMetrics, error) {
	ms, err := collect(ctx, sqliteQ{s.r}, scanMetrics, `
		SELECT table_id, policy_id, snapshot_id, metrics_value, recorded_at
		FROM table_snapshot_metrics WHERE table_id = ?1
		ORDER BY recorded_at, policy_id, snapshot_id`, tableID)
	if err != nil {
		return nil, sqliteError("list snapshot metrics", err)
	}
	return ms, nil
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
