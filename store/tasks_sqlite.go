package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// This file is the SQLite side of Scheduler (see tasks.go). Every write runs
// in a BEGIN IMMEDIATE transaction on the single writer connection, so the
// file's write lock serialises claimers of all processes; a claim's UPDATE
// re-checks picked under that lock, which is the compare-and-swap that lets
// exactly one claimer win a row.

const sqliteTaskCols = `task_name, task_instance, task_data, execution_time, picked, coalesce(picked_by, ''),
	last_success, last_failure, consecutive_failures, last_heartbeat, version, priority, rerun_at`

func scanSQLiteTask(row scanner) (Task, error) {
	var (
		t                       Task
		exec                    string
		succ, fail, hb, rerunAt sql.NullString
		err                     error
	)
	if err = row.Scan(&t.Name, &t.Instance, &t.Data, &exec, &t.Picked, &t.PickedBy,
		&succ, &fail, &t.ConsecutiveFailures, &hb, &t.Version, &t.Priority, &rerunAt); err != nil {
		return Task{}, err
	}
	if t.ExecutionTime, err = parseSQLiteTime(exec); err != nil {
		return Task{}, err
	}
	for _, f := range []struct {
		dst *time.Time
		src sql.NullString
	}{{&t.LastSuccess, succ}, {&t.LastFailure, fail}, {&t.LastHeartbeat, hb}, {&t.RerunAt, rerunAt}} {
		if *f.dst, err = parseNullSQLiteTime(f.src); err != nil {
			return Task{}, err
		}
	}
	return t, nil
}

func collectSQLiteTasks(rows *sql.Rows, err error) ([]Task, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ts []Task
	for rows.Next() {
		t, err := scanSQLiteTask(rows)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, rows.Err()
}

// sqliteNullTime stores a zero time as NULL.
func sqliteNullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return sqliteTime(t)
}

// ScheduleTask inserts a task unless it exists.
func (s *sqliteStore) ScheduleTask(ctx context.Context, t NewTask, now time.Time) (bool, error) {
	var created bool
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		created, err = sqliteScheduleTask(ctx, tx, t, orNow(now, s.now))
		return err
	})
	return created, sqliteTaskError("schedule task", err)
}

func sqliteScheduleTask(ctx context.Context, tx *sql.Tx, t NewTask, now time.Time) (bool, error) {
	if err := validateNewTask(t); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, `
		INSERT INTO scheduled_tasks (task_name, task_instance, task_data, execution_time, priority)
		VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (task_name, task_instance) DO NOTHING`,
		t.Name, t.Instance, t.Data, sqliteTime(orNow(t.ExecutionTime, func() time.Time { return now })), t.Priority)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ScheduleTasks inserts many tasks in one transaction.
func (s *sqliteStore) ScheduleTasks(ctx context.Context, ts []NewTask, now time.Time) (int, error) {
	now = orNow(now, s.now)
	created := 0
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		created, err = sqliteScheduleTasks(ctx, tx, ts, now)
		return err
	})
	if err != nil {
		return 0, sqliteTaskError("schedule tasks", err)
	}
	return created, nil
}

func sqliteScheduleTasks(ctx context.Context, tx *sql.Tx, ts []NewTask, now time.Time) (int, error) {
	created := 0
	for _, t := range ts {
		ok, err := sqliteScheduleTask(ctx, tx, t, now)
		if err != nil {
			return created, err
		}
		if ok {
			created++
		}
	}
	return created, nil
}

// UpsertTask inserts or coalesces a task (see Scheduler.UpsertTask).
func (s *sqliteStore) UpsertTask(ctx context.Context, t NewTask, now time.Time) (bool, error) {
	var created bool
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		created, err = sqliteUpsertTask(ctx, tx, t, orNow(now, s.now))
		return err
	})
	return created, sqliteTaskError("upsert task", err)
}

func sqliteUpsertTask(ctx context.Context, tx *sql.Tx, t NewTask, now time.Time) (bool, error) {
	if err := validateNewTask(t); err != nil {
		return false, err
	}
	at := sqliteTime(orNow(t.ExecutionTime, func() time.Time { return now }))
	var existed bool
	err := tx.QueryRowContext(ctx, `SELECT count(*) > 0 FROM scheduled_tasks WHERE task_name = ?1 AND task_instance = ?2`,
		t.Name, t.Instance).Scan(&existed)
	if err != nil {
		return false, err
	}
	// Times are fixed-width text, so min() of two of them is the earlier.
	_, err = tx.ExecContext(ctx, `
		INSERT INTO scheduled_tasks (task_name, task_instance, task_data, execution_time, priority)
		VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (task_name, task_instance) DO UPDATE SET
			task_data = excluded.task_data,
			execution_time = CASE WHEN picked THEN execution_time ELSE min(execution_time, excluded.execution_time) END,
			rerun_at = CASE WHEN picked THEN min(coalesce(rerun_at, excluded.execution_time), excluded.execution_time)
				ELSE rerun_at END`,
		t.Name, t.Instance, t.Data, at, t.Priority)
	return !existed, err
}

// RescheduleTask moves an unpicked row, or sets a picked row's rerun_at.
func (s *sqliteStore) RescheduleTask(ctx context.Context, key TaskKey, at time.Time, data []byte) error {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE scheduled_tasks SET
				execution_time = CASE WHEN picked THEN execution_time ELSE ?3 END,
				rerun_at = CASE WHEN picked THEN ?3 ELSE rerun_at END,
				task_data = coalesce(?4, task_data)
			WHERE task_name = ?1 AND task_instance = ?2`, key.Name, key.Instance, sqliteTime(at), data)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return sqliteTaskError("reschedule task", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: task %s", ErrNotFound, key)
	}
	return nil
}

// CancelTask deletes a row.
func (s *sqliteStore) CancelTask(ctx context.Context, key TaskKey) error {
	var n int64
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM scheduled_tasks WHERE task_name = ?1 AND task_instance = ?2`, key.Name, key.Instance)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return sqliteTaskError("cancel task", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: task %s", ErrNotFound, key)
	}
	return nil
}

// GetTask returns one row.
func (s *sqliteStore) GetTask(ctx context.Context, key TaskKey) (Task, error) {
	t, err := scanSQLiteTask(s.r.QueryRowContext(ctx, `SELECT `+sqliteTaskCols+` FROM scheduled_tasks
		WHERE task_name = ?1 AND task_instance = ?2`, key.Name, key.Instance))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, fmt.Errorf("%w: task %s", ErrNotFound, key)
	}
	return t, sqliteTaskError("get task", err)
}

// ListTasks returns rows of one kind, or all.
func (s *sqliteStore) ListTasks(ctx context.Context, name string, limit int) ([]Task, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	ts, err := collectSQLiteTasks(s.r.QueryContext(ctx, `SELECT `+sqliteTaskCols+` FROM scheduled_tasks
		WHERE ?1 = '' OR task_name = ?1 ORDER BY task_name, task_instance LIMIT ?2`, name, limit))
	return ts, sqliteTaskError("list tasks", err)
}

// CountTasks counts rows and picked rows.
func (s *sqliteStore) CountTasks(ctx context.Context) (total, picked int, err error) {
	err = s.r.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(picked), 0) FROM scheduled_tasks`).Scan(&total, &picked)
	return total, picked, sqliteTaskError("count tasks", err)
}

// ClaimTasks picks due rows in one UPDATE under the write lock (see
// sqliteClaim).
func (s *sqliteStore) ClaimTasks(ctx context.Context, r ClaimRequest) ([]Task, error) {
	ts, _, err := s.CompleteAndClaim(ctx, nil, time.Time{}, r)
	return ts, err
}

// sqliteClaim picks due rows in one UPDATE; run under the write lock, its
// re-check of picked = 0 is the compare-and-swap against a concurrent
// claimer.
func (s *sqliteStore) sqliteClaim(ctx context.Context, tx *sql.Tx, r ClaimRequest, names string) ([]Task, error) {
	return collectSQLiteTasks(tx.QueryContext(ctx, `
		UPDATE scheduled_tasks SET picked = 1, picked_by = ?2, last_heartbeat = ?3, version = version + 1
		WHERE picked = 0 AND (task_name, task_instance) IN (
			SELECT task_name, task_instance FROM scheduled_tasks
			WHERE picked = 0 AND execution_time <= ?3 AND task_name IN (SELECT value FROM json_each(?1))
			ORDER BY priority DESC, execution_time
			LIMIT ?4)
		RETURNING `+sqliteTaskCols, names, r.Node, sqliteTime(orNow(r.Now, s.now)), r.Limit))
}

// HeartbeatTasks refreshes the heartbeat of held claims in one transaction.
func (s *sqliteStore) HeartbeatTasks(ctx context.Context, node string, claims []Task, now time.Time) ([]TaskKey, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	var held []TaskKey
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		held = held[:0]
		for _, c := range claims {
			res, err := tx.ExecContext(ctx, `UPDATE scheduled_tasks SET last_heartbeat = ?5
				WHERE task_name = ?1 AND task_instance = ?2 AND version = ?3 AND picked = 1 AND picked_by = ?4`,
				c.Name, c.Instance, c.Version, node, sqliteTime(orNow(now, s.now)))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				held = append(held, c.TaskKey)
			}
		}
		return nil
	})
	if err != nil {
		return nil, sqliteTaskError("heartbeat tasks", err)
	}
	return lostKeys(claims, held), nil
}

// RescueTasks revives rows with a stale heartbeat.
func (s *sqliteStore) RescueTasks(ctx context.Context, staleBefore time.Time) ([]Task, error) {
	var ts []Task
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		ts, err = collectSQLiteTasks(tx.QueryContext(ctx, `
			UPDATE scheduled_tasks SET picked = 0, picked_by = NULL, last_heartbeat = NULL, version = version + 1
			WHERE picked = 1 AND last_heartbeat < ?1
			RETURNING `+sqliteTaskCols, sqliteTime(staleBefore)))
		return err
	})
	return ts, sqliteTaskError("rescue tasks", err)
}

// CompleteTask applies a guarded completion.
func (s *sqliteStore) CompleteTask(ctx context.Context, claim Task, c Completion) error {
	return s.CompleteTaskWith(ctx, claim, c, nil)
}

// CompleteTasks deletes many claimed rows in one transaction.
func (s *sqliteStore) CompleteTasks(ctx context.Context, claims []Task, now time.Time) ([]TaskKey, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	_, stale, err := s.CompleteAndClaim(ctx, claims, now, ClaimRequest{})
	return stale, err
}

// CompleteAndClaim deletes the done claims, then claims, in one write
// transaction.
func (s *sqliteStore) CompleteAndClaim(ctx context.Context, done []Task, now time.Time, r ClaimRequest) ([]Task, []TaskKey, error) {
	var names []byte
	if r.Limit != 0 || len(done) == 0 {
		if err := validateClaimRequest(r); err != nil {
			return nil, nil, err
		}
		var err error
		if names, err = json.Marshal(r.Names); err != nil {
			return nil, nil, err
		}
	}
	var (
		claimed []Task
		stale   []TaskKey
	)
	at := orNow(now, s.now)
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		claimed, stale = nil, nil
		for _, c := range done {
			err := sqliteComplete(ctx, tx, c, Completion{Action: CompleteDelete}, at)
			if errors.Is(err, ErrStaleFence) {
				stale = append(stale, c.TaskKey)
				continue
			}
			if err != nil {
				return err
			}
		}
		if r.Limit == 0 {
			return nil
		}
		var err error
		claimed, err = s.sqliteClaim(ctx, tx, r, string(names))
		return err
	})
	if err != nil {
		op := "complete and claim tasks"
		switch {
		case len(done) == 0:
			op = "claim tasks"
		case r.Limit == 0:
			op = "complete tasks"
		}
		return nil, nil, sqliteTaskError(op, err)
	}
	return claimed, stale, nil
}

// CompleteTaskWith runs the guarded completion and fn in one transaction.
func (s *sqliteStore) CompleteTaskWith(ctx context.Context, claim Task, c Completion, fn func(context.Context, TxWriter) error) error {
	if err := validateCompletion(c); err != nil {
		return err
	}
	now := orNow(c.Now, s.now)
	var stale, fnErr error
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		if stale = sqliteComplete(ctx, tx, claim, c, now); stale != nil {
			return stale
		}
		if fn != nil {
			if fnErr = fn(ctx, &sqliteTxWriter{tx: tx, s: s, claim: claim.TaskKey, c: c}); fnErr != nil {
				return fnErr
			}
		}
		return nil
	})
	switch {
	case fnErr != nil:
		return fnErr
	case stale != nil && errors.Is(stale, ErrStaleFence):
		return stale
	}
	return sqliteTaskError("complete task", err)
}

// sqliteComplete reads the claimed row under the write lock, then deletes
// or updates it; a version that moved on is ErrStaleFence.
func sqliteComplete(ctx context.Context, tx *sql.Tx, claim Task, c Completion, now time.Time) error {
	var rerun sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT rerun_at FROM scheduled_tasks
		WHERE task_name = ?1 AND task_instance = ?2 AND version = ?3 AND picked = 1`,
		claim.Name, claim.Instance, claim.Version).Scan(&rerun)
	if errors.Is(err, sql.ErrNoRows) {
		return staleClaim("complete task", claim)
	}
	if err != nil {
		return err
	}
	rerunAt, err := parseNullSQLiteTime(rerun)
	if err != nil {
		return err
	}
	const unpick = `picked = 0, picked_by = NULL, last_heartbeat = NULL, rerun_at = NULL`
	const noWait = `, wait_for = NULL`
	const where = ` WHERE task_name = ?1 AND task_instance = ?2`
	args := []any{claim.Name, claim.Instance, sqliteTime(now)}
	var q string
	switch {
	case c.Action == CompleteDelete && rerunAt.IsZero():
		q = `DELETE FROM scheduled_tasks` + where + ` AND ?3 IS NOT NULL`
	case c.Action == CompleteDelete:
		q = `UPDATE scheduled_tasks SET ` + unpick + noWait + `, execution_time = ?4, last_success = ?3` + where
		args = append(args, sqliteTime(rerunAt))
	case c.Action == CompleteReschedule:
		q = `UPDATE scheduled_tasks SET ` + unpick + `, execution_time = ?4, task_data = coalesce(?5, task_data),
			last_success = ?3, consecutive_failures = 0, wait_for = nullif(?6, '')` + where
		args = append(args, sqliteTime(earlier(rerunAt, utc(c.Next))), c.Data, c.WaitFor)
	case c.Action == CompleteFailure:
		q = `UPDATE scheduled_tasks SET ` + unpick + noWait + `, execution_time = ?4, last_failure = ?3,
			consecutive_failures = consecutive_failures + 1` + where
		args = append(args, sqliteTime(earlier(rerunAt, utc(c.Next))))
	default: // CompleteRelease
		q = `UPDATE scheduled_tasks SET ` + unpick + noWait + `, execution_time = coalesce(min(rerun_at, execution_time), execution_time)` +
			where + ` AND ?3 IS NOT NULL`
	}
	_, err = tx.ExecContext(ctx, q, args...)
	return err
}

// sqliteTxWriter is the TxWriter of CompleteTaskWith on SQLite.
type sqliteTxWriter struct {
	tx    *sql.Tx
	s     *sqliteStore
	claim TaskKey    // the row being completed
	c     Completion // how it was completed
}

func (w *sqliteTxWriter) CreateJob(ctx context.Context, nj NewJob) (Job, error) {
	return sqliteInsertJob(ctx, w.tx, nj, w.s.now())
}

func (w *sqliteTxWriter) ScheduleTask(ctx context.Context, t NewTask, now time.Time) (bool, error) {
	ok, err := sqliteScheduleTask(ctx, w.tx, t, orNow(now, w.s.now))
	return ok, sqliteTaskError("schedule task", err)
}

func (w *sqliteTxWriter) ScheduleTasks(ctx context.Context, ts []NewTask, now time.Time) (int, error) {
	n, err := sqliteScheduleTasks(ctx, w.tx, ts, orNow(now, w.s.now))
	return n, sqliteTaskError("schedule tasks", err)
}

func (w *sqliteTxWriter) UpsertTask(ctx context.Context, t NewTask, now time.Time) (bool, error) {
	ok, err := sqliteUpsertTask(ctx, w.tx, t, orNow(now, w.s.now))
	return ok, sqliteTaskError("upsert task", err)
}

func (w *sqliteTxWriter) MoveCompleted(ctx context.Context, at time.Time, data []byte) error {
	if err := validateMove(w.c, at); err != nil {
		return err
	}
	_, err := w.tx.ExecContext(ctx, `UPDATE scheduled_tasks SET execution_time = coalesce(min(rerun_at, ?3), ?3), task_data = coalesce(?4, task_data)
		WHERE task_name = ?1 AND task_instance = ?2`, w.claim.Name, w.claim.Instance, sqliteTime(at), data)
	return sqliteTaskError("move completed task", err)
}

func (w *sqliteTxWriter) Driver() any { return w.tx }

// ListenTasks is not supported: SQLite has no cross-process notification.
func (s *sqliteStore) ListenTasks(context.Context, func(), func(string, time.Time)) error {
	return fmt.Errorf("%w: sqlite has no LISTEN/NOTIFY; nodes poll", ErrNotSupported)
}

// sqliteTaskError is sqliteError that passes nil and the store's own
// sentinel errors through unchanged.
func sqliteTaskError(op string, err error) error {
	if err == nil || errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrStaleFence) || errors.Is(err, ErrNotFound) {
		return err
	}
	return sqliteError(op, err)
}
