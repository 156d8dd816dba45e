package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file is the PostgreSQL side of Scheduler (see tasks.go).

// pgTaskChannel is the SQL expression of the NOTIFY channel for due tasks.
// LISTEN/NOTIFY channels are per database, not per schema, so the schema
// name is part of it: nodes sharing a schema wake each other, and databases
// of other schemas (other deployments, parallel tests) stay quiet.
const pgTaskChannel = `'tms_tasks_' || coalesce(current_schema(), '')`

// pgDB is what both a pool and a transaction offer.
type pgDB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const pgTaskCols = `task_name, task_instance, task_data, execution_time, picked, coalesce(picked_by, ''),
	last_success, last_failure, consecutive_failures, last_heartbeat, version, priority, rerun_at`

// scanPgTask reads pgTaskCols, after the columns lead points to.
func scanPgTask(row pgx.Row, lead ...any) (Task, error) {
	var (
		t                       Task
		succ, fail, hb, rerunAt *time.Time
	)
	err := row.Scan(append(lead, &t.Name, &t.Instance, &t.Data, &t.ExecutionTime, &t.Picked, &t.PickedBy,
		&succ, &fail, &t.ConsecutiveFailures, &hb, &t.Version, &t.Priority, &rerunAt)...)
	t.ExecutionTime = t.ExecutionTime.UTC()
	t.LastSuccess, t.LastFailure, t.LastHeartbeat, t.RerunAt = pgTime(succ), pgTime(fail), pgTime(hb), pgTime(rerunAt)
	return t, err
}

func pgTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func collectPgTasks(rows pgx.Rows, err error) ([]Task, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Task, error) { return scanPgTask(r) })
}

// ScheduleTask inserts a task unless it exists, and notifies listeners when
// it is due at once.
func (s *postgresStore) ScheduleTask(ctx context.Context, t NewTask, now time.Time) (bool, error) {
	return pgScheduleTask(ctx, s.pool, t, orNow(now, s.now))
}

func pgScheduleTask(ctx context.Context, db pgDB, t NewTask, now time.Time) (bool, error) {
	if err := validateNewTask(t); err != nil {
		return false, err
	}
	var created bool
	err := db.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO scheduled_tasks (task_name, task_instance, task_data, execution_time, priority)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (task_name, task_instance) DO NOTHING
			RETURNING execution_time
		), n AS (
			SELECT pg_notify(`+pgTaskChannel+`, $1) FROM ins WHERE execution_time <= $6
		)
		SELECT EXISTS (SELECT 1 FROM ins), (SELECT count(*) FROM n)`,
		t.Name, t.Instance, t.Data, orNow(t.ExecutionTime, func() time.Time { return now }), t.Priority, now).
		Scan(&created, new(int64))
	if err != nil {
		return false, pgError("schedule task", err)
	}
	return created, nil
}

// ScheduleTasks inserts many tasks, a few thousand rows per statement.
func (s *postgresStore) ScheduleTasks(ctx context.Context, ts []NewTask, now time.Time) (int, error) {
	return pgScheduleTasks(ctx, s.pool, ts, orNow(now, s.now))
}

func pgScheduleTasks(ctx context.Context, db pgDB, ts []NewTask, now time.Time) (int, error) {
	created := 0
	for len(ts) > 0 {
		chunk := ts[:min(len(ts), scheduleChunk)]
		ts = ts[len(chunk):]
		names, instances := make([]string, len(chunk)), make([]string, len(chunk))
		data, at, prio := make([][]byte, len(chunk)), make([]time.Time, len(chunk)), make([]int32, len(chunk))
		for i, t := range chunk {
			if err := validateNewTask(t); err != nil {
				return created, err
			}
			names[i], instances[i], data[i], prio[i] = t.Name, t.Instance, t.Data, int32(t.Priority)
			at[i] = orNow(t.ExecutionTime, func() time.Time { return now })
		}
		var n int
		err := db.QueryRow(ctx, `
			WITH ins AS (
				INSERT INTO scheduled_tasks (task_name, task_instance, task_data, execution_time, priority)
				SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::timestamptz[], $5::int[])
				ON CONFLICT (task_name, task_instance) DO NOTHING
				RETURNING task_name, execution_time
			), n AS (
				SELECT pg_notify(`+pgTaskChannel+`, name) FROM (SELECT DISTINCT task_name AS name FROM ins WHERE execution_time <= $6) d
			)
			SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM n)`,
			names, instances, data, at, prio, now).Scan(&n, new(int64))
		if err != nil {
			return created, pgError("schedule tasks", err)
		}
		created += n
	}
	return created, nil
}

// UpsertTask inserts or coalesces a task (see Scheduler.UpsertTask).
func (s *postgresStore) UpsertTask(ctx context.Context, t NewTask, now time.Time) (bool, error) {
	return pgUpsertTask(ctx, s.pool, t, orNow(now, s.now))
}

func pgUpsertTask(ctx context.Context, db pgDB, t NewTask, now time.Time) (bool, error) {
	if err := validateNewTask(t); err != nil {
		return false, err
	}
	var created bool
	err := db.QueryRow(ctx, `
		WITH up AS (
			INSERT INTO scheduled_tasks AS t (task_name, task_instance, task_data, execution_time, priority)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (task_name, task_instance) DO UPDATE SET
				task_data = EXCLUDED.task_data,
				execution_time = CASE WHEN t.picked THEN t.execution_time
					ELSE least(t.execution_time, EXCLUDED.execution_time) END,
				rerun_at = CASE WHEN t.picked THEN least(t.rerun_at, EXCLUDED.execution_time)
					ELSE t.rerun_at END
			RETURNING (xmax = 0) AS created, execution_time, picked
		), n AS (
			-- Due now: the kind's name. Due later, and this upsert set the
			-- time (a new row or an earlier time): name@unix-ms, so every
			-- node looks for it then; a burst coalescing into a row that
			-- is due earlier announces nothing more. The millisecond is
			-- rounded up: a node woken at a time rounded down (the row
			-- is stored to the microsecond) could look before the row is
			-- due, find nothing, and wait a whole poll interval.
			SELECT pg_notify(`+pgTaskChannel+`, CASE WHEN execution_time <= $6 THEN $1
				ELSE $1 || '@' || ceil(extract(epoch FROM execution_time) * 1000)::bigint::text END)
			FROM up WHERE NOT picked AND (execution_time <= $6 OR execution_time = $4)
		)
		SELECT created, (SELECT count(*) FROM n) FROM up`,
		t.Name, t.Instance, t.Data, orNow(t.ExecutionTime, func() time.Time { return now }), t.Priority, now).
		Scan(&created, new(int64))
	if err != nil {
		return false, pgError("upsert task", err)
	}
	return created, nil
}

// RescheduleTask moves an unpicked row, or sets a picked row's rerun_at.
func (s *postgresStore) RescheduleTask(ctx context.Context, key TaskKey, at time.Time, data []byte) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE scheduled_tasks SET
			execution_time = CASE WHEN picked THEN execution_time ELSE $3 END,
			rerun_at = CASE WHEN picked THEN $3 ELSE rerun_at END,
			task_data = coalesce($4, task_data)
		WHERE task_name = $1 AND task_instance = $2`, key.Name, key.Instance, utc(at), data)
	if err != nil {
		return pgError("reschedule task", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: task %s", ErrNotFound, key)
	}
	return nil
}

// CancelTask deletes a row.
func (s *postgresStore) CancelTask(ctx context.Context, key TaskKey) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM scheduled_tasks WHERE task_name = $1 AND task_instance = $2`, key.Name, key.Instance)
	if err != nil {
		return pgError("cancel task", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: task %s", ErrNotFound, key)
	}
	return nil
}

// GetTask returns one row.
func (s *postgresStore) GetTask(ctx context.Context, key TaskKey) (Task, error) {
	t, err := scanPgTask(s.pool.QueryRow(ctx, `SELECT `+pgTaskCols+` FROM scheduled_tasks
		WHERE task_name = $1 AND task_instance = $2`, key.Name, key.Instance))
	if errors.Is(err, pgx.ErrNoRows) {
		return Task{}, fmt.Errorf("%w: task %s", ErrNotFound, key)
	}
	if err != nil {
		return Task{}, pgError("get task", err)
	}
	return t, nil
}

// ListTasks returns rows of one kind, or all.
func (s *postgresStore) ListTasks(ctx context.Context, name string, limit int) ([]Task, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	ts, err := collectPgTasks(s.pool.Query(ctx, `SELECT `+pgTaskCols+` FROM scheduled_tasks
		WHERE $1 = '' OR task_name = $1 ORDER BY task_name, task_instance LIMIT $2`, name, limit))
	if err != nil {
		return nil, pgError("list tasks", err)
	}
	return ts, nil
}

// CountTasks counts rows and picked rows.
func (s *postgresStore) CountTasks(ctx context.Context) (total, picked int, err error) {
	err = s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE picked) FROM scheduled_tasks`).Scan(&total, &picked)
	if err != nil {
		return 0, 0, pgError("count tasks", err)
	}
	return total, picked, nil
}

// ClaimTasks locks and fetches due rows in one statement (see pgClaimCTE).
func (s *postgresStore) ClaimTasks(ctx context.Context, r ClaimRequest) ([]Task, error) {
	if err := validateClaimRequest(r); err != nil {
		return nil, err
	}
	ts, err := collectPgTasks(s.pool.Query(ctx, `WITH `+pgClaimCTE+` SELECT `+pgTaskCols+` FROM u`,
		r.Names, r.Node, orNow(r.Now, s.now), r.Limit))
	if err != nil {
		return nil, pgError("claim tasks", err)
	}
	return ts, nil
}

// pgClaimCTE claims rows ($1 names, $2 node, $3 now, $4 limit) and names the
// claimed rows u. The inner SELECT skips rows another claimer has locked,
// the UPDATE marks the rest picked and increments their version. The inner
// SELECT runs once per kind, each an ordered scan of the due index that
// stops after limit rows, whatever the planner's statistics say; rows locked
// there but cut by the outer LIMIT are only locked, not changed, and unlock
// at commit.
const pgClaimCTE = `c AS (
		SELECT k.task_name, k.task_instance
		FROM unnest($1::text[]) AS n(name)
		CROSS JOIN LATERAL (
			SELECT task_name, task_instance, priority, execution_time FROM scheduled_tasks
			WHERE task_name = n.name AND NOT picked AND execution_time <= $3
			ORDER BY priority DESC, execution_time
			LIMIT $4
			FOR UPDATE SKIP LOCKED
		) k
		ORDER BY k.priority DESC, k.execution_time
		LIMIT $4
	), u AS (
		UPDATE scheduled_tasks t SET picked = true, picked_by = $2, last_heartbeat = $3, version = t.version + 1
		FROM c WHERE t.task_name = c.task_name AND t.task_instance = c.task_instance
		RETURNING ` + pgTaskColsRawT + `
	)`

// pgDoneCTE deletes the claimed rows given as arrays ($base names,
// $base+1 instances, $base+2 versions), each guarded by its own version,
// names the deleted rows d, and re-inserts unpicked, due at rerun_at, those
// an upsert asked to run again (see pgComplete); $base+3 is the time of the
// success.
func pgDoneCTE(base int) string {
	return fmt.Sprintf(`d AS (
		DELETE FROM scheduled_tasks t
		USING unnest($%[1]d::text[], $%[2]d::text[], $%[3]d::bigint[]) AS x(n, i, v)
		WHERE t.task_name = x.n AND t.task_instance = x.i AND t.version = x.v AND t.picked
		RETURNING `+pgTaskColsRawT+`
	), r AS (
		INSERT INTO scheduled_tasks (task_name, task_instance, task_data, execution_time, priority, version, last_success, last_failure)
		SELECT task_name, task_instance, task_data, rerun_at, priority, version, $%[4]d, last_failure
		FROM d WHERE rerun_at IS NOT NULL
	)`, base, base+1, base+2, base+3)
}

// HeartbeatTasks refreshes the heartbeat of held claims in one statement.
func (s *postgresStore) HeartbeatTasks(ctx context.Context, node string, claims []Task, now time.Time) ([]TaskKey, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	names, instances, versions := make([]string, len(claims)), make([]string, len(claims)), make([]int64, len(claims))
	for i, c := range claims {
		names[i], instances[i], versions[i] = c.Name, c.Instance, c.Version
	}
	rows, err := s.pool.Query(ctx, `
		UPDATE scheduled_tasks t SET last_heartbeat = $2
		FROM unnest($3::text[], $4::text[], $5::bigint[]) AS c(n, i, v)
		WHERE t.task_name = c.n AND t.task_instance = c.i AND t.version = c.v AND t.picked AND t.picked_by = $1
		RETURNING t.task_name, t.task_instance`, node, orNow(now, s.now), names, instances, versions)
	if err != nil {
		return nil, pgError("heartbeat tasks", err)
	}
	held, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TaskKey, error) {
		var k TaskKey
		return k, r.Scan(&k.Name, &k.Instance)
	})
	if err != nil {
		return nil, pgError("heartbeat tasks", err)
	}
	return lostKeys(claims, held), nil
}

// RescueTasks revives rows with a stale heartbeat. Under READ COMMITTED a
// concurrent rescuer waits for the row lock and re-checks the WHERE clause
// on the row's new version, so each row is revived once.
func (s *postgresStore) RescueTasks(ctx context.Context, staleBefore time.Time) ([]Task, error) {
	ts, err := collectPgTasks(s.pool.Query(ctx, `
		UPDATE scheduled_tasks SET picked = false, picked_by = NULL, last_heartbeat = NULL, version = version + 1
		WHERE picked AND last_heartbeat < $1
		RETURNING `+pgTaskCols, utc(staleBefore)))
	if err != nil {
		return nil, pgError("rescue tasks", err)
	}
	return ts, nil
}

// CompleteTask applies a guarded completion.
func (s *postgresStore) CompleteTask(ctx context.Context, claim Task, c Completion) error {
	if err := validateCompletion(c); err != nil {
		return err
	}
	return pgComplete(ctx, s.pool, claim, c, orNow(c.Now, s.now))
}

// CompleteTasks deletes many claimed rows in one statement, re-inserting
// those an upsert asked to run again (see pgComplete).
func (s *postgresStore) CompleteTasks(ctx context.Context, claims []Task, now time.Time) ([]TaskKey, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	_, stale, err := s.CompleteAndClaim(ctx, claims, now, ClaimRequest{})
	return stale, err
}

// CompleteAndClaim deletes the done claims and claims due rows in one
// statement. Its deletes run before its claim: the claim's SKIP LOCKED scan
// may leave locks on rows it skipped (another node's, whose DELETE then
// waits for this statement), so a statement that waited for nobody after
// taking such locks cannot be part of a lock cycle.
func (s *postgresStore) CompleteAndClaim(ctx context.Context, done []Task, now time.Time, r ClaimRequest) ([]Task, []TaskKey, error) {
	if r.Limit != 0 || len(done) == 0 {
		if err := validateClaimRequest(r); err != nil {
			return nil, nil, err
		}
	}
	if len(done) == 0 {
		ts, err := s.ClaimTasks(ctx, r)
		return ts, nil, err
	}
	names, instances, versions := make([]string, len(done)), make([]string, len(done)), make([]int64, len(done))
	for i, c := range done {
		names[i], instances[i], versions[i] = c.Name, c.Instance, c.Version
	}
	now = orNow(now, s.now)
	if r.Limit == 0 {
		rows, err := s.pool.Query(ctx, `WITH `+pgDoneCTE(1)+` SELECT false, `+pgTaskCols+` FROM d`,
			names, instances, versions, now)
		return scanCompleteAndClaim(done, rows, err)
	}
	// UNION ALL runs its branches in order: d (the deletes) to its end
	// before u (the claim) starts.
	rows, err := s.pool.Query(ctx, `WITH `+pgDoneCTE(5)+`, `+pgClaimCTE+`
		SELECT false, `+pgTaskCols+` FROM d
		UNION ALL
		SELECT true, `+pgTaskCols+` FROM u`,
		r.Names, r.Node, orNow(r.Now, s.now), r.Limit, names, instances, versions, now)
	return scanCompleteAndClaim(done, rows, err)
}

// scanCompleteAndClaim reads the rows of CompleteAndClaim's statement:
// (false, deleted row) and (true, claimed row).
func scanCompleteAndClaim(done []Task, rows pgx.Rows, err error) ([]Task, []TaskKey, error) {
	if err != nil {
		return nil, nil, pgError("complete and claim tasks", err)
	}
	var (
		claimed []Task
		deleted []TaskKey
	)
	defer rows.Close()
	for rows.Next() {
		var isClaim bool
		t, err := scanPgTask(rows, &isClaim)
		if err != nil {
			return nil, nil, pgError("complete and claim tasks", err)
		}
		if isClaim {
			claimed = append(claimed, t)
		} else {
			deleted = append(deleted, t.TaskKey)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, pgError("complete and claim tasks", err)
	}
	return claimed, lostKeys(done, deleted), nil
}

// CompleteTaskWith runs the guarded completion and fn in one transaction.
func (s *postgresStore) CompleteTaskWith(ctx context.Context, claim Task, c Completion, fn func(context.Context, TxWriter) error) error {
	if err := validateCompletion(c); err != nil {
		return err
	}
	now := orNow(c.Now, s.now)
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := pgComplete(ctx, tx, claim, c, now); err != nil {
			return err
		}
		return fn(ctx, &pgTxWriter{tx: tx, s: s, claim: claim.TaskKey, c: c})
	})
}

// pgComplete is one statement. CompleteDelete deletes the row and, in the
// same statement, re-inserts it unpicked at rerun_at when an upsert asked for
// another run; under READ COMMITTED a concurrent upsert either committed
// before (the DELETE re-reads the row and sees its rerun_at) or waits and
// then coalesces into the re-inserted row.
func pgComplete(ctx context.Context, db pgDB, claim Task, c Completion, now time.Time) error {
	var (
		q    string
		args = []any{claim.Name, claim.Instance, claim.Version, now}
	)
	const guard = `task_name = $1 AND task_instance = $2 AND version = $3 AND picked`
	const unpick = `picked = false, picked_by = NULL, last_heartbeat = NULL, rerun_at = NULL`
	const noWait = `, wait_for = NULL`
	switch c.Action {
	case CompleteDelete:
		q = `WITH d AS (
				DELETE FROM scheduled_tasks WHERE ` + guard + `
				RETURNING task_name, task_instance, task_data, rerun_at, priority, version, last_failure
			), i AS (
				INSERT INTO scheduled_tasks (task_name, task_instance, task_data, execution_time, priority, version, last_success, last_failure)
				SELECT task_name, task_instance, task_data, rerun_at, priority, version, $4, last_failure
				FROM d WHERE rerun_at IS NOT NULL
			)
			SELECT count(*) FROM d`
	case CompleteReschedule:
		q = `WITH u AS (UPDATE scheduled_tasks SET ` + unpick + `, execution_time = least(rerun_at, $5),
				task_data = coalesce($6, task_data), last_success = $4, consecutive_failures = 0, wait_for = nullif($7, '')
				WHERE ` + guard + ` RETURNING 1) SELECT count(*) FROM u`
		args = append(args, utc(c.Next), c.Data, c.WaitFor)
	case CompleteFailure:
		q = `WITH u AS (UPDATE scheduled_tasks SET ` + unpick + noWait + `, execution_time = least(rerun_at, $5),
				last_failure = $4, consecutive_failures = consecutive_failures + 1
				WHERE ` + guard + ` RETURNING 1) SELECT count(*) FROM u`
		args = append(args, utc(c.Next))
	case CompleteRelease:
		q = `WITH u AS (UPDATE scheduled_tasks SET ` + unpick + noWait + `, execution_time = least(rerun_at, execution_time)
				WHERE ` + guard + ` AND $4::timestamptz IS NOT NULL RETURNING 1) SELECT count(*) FROM u`
	}
	var n int64
	if err := db.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return pgError("complete task", err)
	}
	if n == 0 {
		return staleClaim("complete task", claim)
	}
	return nil
}

// pgTxWriter is the TxWriter of CompleteTaskWith on PostgreSQL.
type pgTxWriter struct {
	tx    pgx.Tx
	s     *postgresStore
	claim TaskKey    // the row being completed
	c     Completion // how it was completed
}

func (w *pgTxWriter) CreateJob(ctx context.Context, nj NewJob) (Job, error) {
	return pgInsertJob(ctx, w.tx, nj, w.s.now())
}

func (w *pgTxWriter) ScheduleTask(ctx context.Context, t NewTask, now time.Time) (bool, error) {
	return pgScheduleTask(ctx, w.tx, t, orNow(now, w.s.now))
}

func (w *pgTxWriter) ScheduleTasks(ctx context.Context, ts []NewTask, now time.Time) (int, error) {
	return pgScheduleTasks(ctx, w.tx, ts, orNow(now, w.s.now))
}

func (w *pgTxWriter) UpsertTask(ctx context.Context, t NewTask, now time.Time) (bool, error) {
	return pgUpsertTask(ctx, w.tx, t, orNow(now, w.s.now))
}

func (w *pgTxWriter) MoveCompleted(ctx context.Context, at time.Time, data []byte) error {
	if err := validateMove(w.c, at); err != nil {
		return err
	}
	_, err := w.tx.Exec(ctx, `UPDATE scheduled_tasks SET execution_time = least(rerun_at, $3), task_data = coalesce($4, task_data)
		WHERE task_name = $1 AND task_instance = $2`, w.claim.Name, w.claim.Instance, utc(at), data)
	if err != nil {
		return pgError("move completed task", err)
	}
	return nil
}

func (w *pgTxWriter) Driver() any { return w.tx }

// ListenTasks listens on the schema's task channel through a connection of
// its own, outside the pool, so it never takes a worker's connection.
func (s *postgresStore) ListenTasks(ctx context.Context, ready func(), fn func(name string, at time.Time)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return pgError("listen for tasks", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var channel string
	if err := conn.QueryRow(ctx, `SELECT `+pgTaskChannel).Scan(&channel); err != nil {
		return pgError("listen for tasks", err)
	}
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		return pgError("listen for tasks", err)
	}
	if ready != nil {
		ready()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return pgError("listen for tasks", err)
		}
		fn(parseTaskNotification(n.Payload))
	}
}

// parseTaskNotification splits a task channel payload, "name" or
// "name@unix-ms" (see pgUpsertTask).
func parseTaskNotification(payload string) (string, time.Time) {
	name, ms, ok := strings.Cut(payload, "@")
	if !ok {
		return payload, time.Time{}
	}
	v, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return payload, time.Time{}
	}
	return name, time.UnixMilli(v)
}

// ResetPostgresSchema drops schema (with everything in it) on the server
// dbURL names, creates it empty and returns dbURL with search_path set to
// it. It is for benchmarks and scratch runs that need a database of their
// own beside others on one server; never point it at a schema holding data.
func ResetPostgresSchema(ctx context.Context, dbURL, schema string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || !strings.HasPrefix(u.Scheme, "postgres") {
		return "", fmt.Errorf("%w: %q is not a postgres:// URL", ErrInvalidArgument, redact(dbURL))
	}
	if schema == "" {
		return "", fmt.Errorf("%w: schema name must not be empty", ErrInvalidArgument)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", pgError("connect", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+ident+` CASCADE`); err != nil {
		return "", pgError("drop schema", err)
	}
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+ident); err != nil {
		return "", pgError("create schema", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// pgTaskColsRawT are the columns of scheduled_tasks qualified by the alias
// t, for RETURNING clauses that pgTaskCols then reads.
const pgTaskColsRawT = `t.task_name, t.task_instance, t.task_data, t.execution_time, t.picked, t.picked_by,
	t.last_success, t.last_failure, t.consecutive_failures, t.last_heartbeat, t.version, t.priority, t.rerun_at`

// lostKeys returns the keys of claims that are not in held.
func lostKeys(claims []Task, held []TaskKey) []TaskKey {
	ok := make(map[TaskKey]bool, len(held))
	for _, k := range held {
		ok[k] = true
	}
	var lost []TaskKey
	for _, c := range claims {
		if !ok[c.TaskKey] {
			lost = append(lost, c.TaskKey)
		}
	}
	return lost
}
