package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// pgConnectTimeout bounds one connection attempt when the URL sets no
// connect_timeout, so an unreachable server fails Open instead of hanging.
const pgConnectTimeout = 10 * time.Second

// pgInFlightIndex is the partial unique index that allows one in-flight job
// row per table; a violation of it is ErrInFlight.
const pgInFlightIndex = "table_maintenance_job_table_inflight_uq"

// postgresStore is the PostgreSQL backend. The URL's query parameters reach
// pgx unchanged, so search_path, pool_max_conns, sslmode … all work.
type postgresStore struct {
	pool *pgxpool.Pool
	log  *zap.Logger
	now  func() time.Time
	// sqlStore holds the operations written once for both backends
	// (sqlstore.go), here over the pool.
	sqlStore
}

var _ backend = (*postgresStore)(nil)

func openPostgres(ctx context.Context, dbURL string, log *zap.Logger, now func() time.Time) (*postgresStore, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("%w: parse PostgreSQL URL: %w", ErrInvalidArgument, err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = pgConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: PostgreSQL at %s: %w", pgHostPort(cfg), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: cannot connect to PostgreSQL at %s: %w", pgHostPort(cfg), err)
	}
	return &postgresStore{pool: pool, log: log, now: now, sqlStore: sqlStore{b: pgBackend{pool}, clock: now}}, nil
}

func pgHostPort(cfg *pgxpool.Config) string {
	return net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
}

// Backend returns "postgres".
func (s *postgresStore) Backend() string { return BackendPostgres }

// Close closes the connection pool.
func (s *postgresStore) Close() error {
	s.pool.Close()
	return nil
}

// RegisterTable inserts the incarnation or, if it exists, returns it. The
// insert and the fallback read are two statements on purpose: after ON
// CONFLICT waited for a concurrent inserter, only a new statement's snapshot
// sees that inserter's row.
func (s *postgresStore) RegisterTable(ctx context.Context, ref TableRef) (Table, error) {
	if err := validateTableRef(ref); err != nil {
		return Table{}, err
	}
	t, err := scanTable(s.pool.QueryRow(ctx, `
		INSERT INTO maintained_table (catalog, namespace, name, table_uuid, created_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (catalog, namespace, name, table_uuid) DO NOTHING
		RETURNING `+tableCols, ref.Catalog, ref.Namespace, ref.Name, ref.UUID, utc(s.now())))
	if errors.Is(err, pgx.ErrNoRows) {
		t, err = scanTable(s.pool.QueryRow(ctx, `
			SELECT `+tableCols+` FROM maintained_table
			WHERE catalog = $1 AND namespace = $2 AND name = $3 AND table_uuid = $4`,
			ref.Catalog, ref.Namespace, ref.Name, ref.UUID))
	}
	if err != nil {
		return Table{}, pgError("register table", err)
	}
	return t, nil
}

// FindTable returns the newest incarnation of a table name.
func (s *postgresStore) FindTable(ctx context.Context, catalog, namespace, name string) (Table, error) {
	t, err := scanTable(s.pool.QueryRow(ctx, `
		SELECT `+tableCols+` FROM maintained_table
		WHERE catalog = $1 AND namespace = $2 AND name = $3
		ORDER BY id DESC LIMIT 1`, catalog, namespace, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Table{}, fmt.Errorf("%w: table %s.%s.%s", ErrNotFound, catalog, namespace, name)
	}
	if err != nil {
		return Table{}, pgError("find table", err)
	}
	return t, nil
}

// GetTable returns a table row by id.
func (s *postgresStore) GetTable(ctx context.Context, id int64) (Table, error) {
	t, err := scanTable(s.pool.QueryRow(ctx, `SELECT `+tableCols+` FROM maintained_table WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Table{}, notFound("table", id)
	}
	if err != nil {
		return Table{}, pgError("get table", err)
	}
	return t, nil
}

// CreateJob inserts a pending job row; the partial unique index turns a
// second in-flight row into ErrInFlight.
func (s *postgresStore) CreateJob(ctx context.Context, nj NewJob) (Job, error) {
	return pgInsertJob(ctx, s.pool, nj, s.now())
}

// pgInsertJob inserts a pending job row through db (the pool, or the
// transaction of a guarded completion), so the two cannot drift.
func pgInsertJob(ctx context.Context, db pgDB, nj NewJob, now time.Time) (Job, error) {
	types, err := validateNewJob(nj)
	if err != nil {
		return Job{}, err
	}
	j, err := scanJob(db.QueryRow(ctx, `
		INSERT INTO table_maintenance_job (job_id, table_id, policy_id, types, "trigger", status, fence, spec, created_at, node)
		VALUES (nullif($1, ''), $2, $3, $4, $5, $6, 1, $7::jsonb, $8, nullif($9, ''))
		RETURNING `+jobCols,
		nj.JobID, nj.TableID, nj.PolicyID, types, string(nj.Trigger), string(StatusPending), nullJSON(nj.Spec), utc(now), nj.Node))
	if err != nil {
		return Job{}, pgJobInsertError(nj, err)
	}
	// An insert that waited on the index for the table's previous job to
	// finish computed created_at before that finish committed: lift it to
	// the finish, so a table's rows never overlap in created_at..finished_at
	// (this statement's snapshot sees the finish).
	var lifted time.Time
	err = db.QueryRow(ctx, `
		UPDATE table_maintenance_job j SET created_at = p.f
		FROM (SELECT max(finished_at) AS f FROM table_maintenance_job WHERE table_id = $1 AND id <> $2) p
		WHERE j.id = $2 AND p.f > j.created_at
		RETURNING j.created_at`, nj.TableID, j.ID).Scan(&lifted)
	switch {
	case err == nil:
		j.CreatedAt = lifted.UTC()
	case !errors.Is(err, pgx.ErrNoRows):
		return Job{}, pgError("create job", err)
	}
	return j, nil
}

func pgJobInsertError(nj NewJob, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505" && pgErr.ConstraintName == pgInFlightIndex:
			return inFlightError(nj)
		case pgErr.Code == "23503":
			return notFound("table", nj.TableID)
		}
	}
	return pgError("create job", err)
}

// GetJob returns a job row by id.
func (s *postgresStore) GetJob(ctx context.Context, id int64) (Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobCols+` FROM table_maintenance_job WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, notFound("job", id)
	}
	if err != nil {
		return Job{}, pgError("get job", err)
	}
	return j, nil
}

// fenced runs one fenced UPDATE of job id. set is the SET list; its own
// arguments start at $3 ($1 is the id, $2 the fence). The UPDATE and the
// lookup that classifies a rejected write are one statement, hence one
// transaction: the fence is checked by the write itself, and rows are never
// deleted, so the lookup cannot disagree with it.
func (s *postgresStore) fenced(ctx context.Context, op string, id, fence int64, set string, args ...any) error {
	return s.fencedIf(ctx, op, id, fence, "", set, args...)
}

// fencedIf is fenced with an extra condition cond ("AND …") on the row; a
// row whose fence matches but fails cond is reported as ErrStaleFence too.
func (s *postgresStore) fencedIf(ctx context.Context, op string, id, fence int64, cond, set string, args ...any) error {
	var (
		updated, exists, finished bool
		current                   int64
	)
	err := s.pool.QueryRow(ctx, `
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

// StartJob marks the job running.
func (s *postgresStore) StartJob(ctx context.Context, id, fence int64, at time.Time) error {
	return s.fencedIf(ctx, "start job", id, fence, `AND status = 'pending'`, `status = $3, started_at = $4`,
		string(StatusRunning), orNow(at, s.now))
}

// SetBeforeSnapshot records the sampled snapshot.
func (s *postgresStore) SetBeforeSnapshot(ctx context.Context, id, fence, snapshotID int64) error {
	return s.fenced(ctx, "set before snapshot", id, fence, `before_snapshot_id = $3`, snapshotID)
}

// SetJobID records the external job id.
func (s *postgresStore) SetJobID(ctx context.Context, id, fence int64, jobID string) error {
	return s.fenced(ctx, "set job id", id, fence, `job_id = nullif($3, '')`, jobID)
}

// FinishJob closes the row.
func (s *postgresStore) FinishJob(ctx context.Context, id, fence int64, f Finish) error {
	if err := validateFinish(f); err != nil {
		return err
	}
	at := orNow(f.At, s.now)
	var (
		updated, exists, finished bool
		current                   int64
	)
	// The row's table is free once it is finished: the tasks waiting for
	// it are made due (and the nodes told) in the same statement.
	err := s.pool.QueryRow(ctx, `
		WITH u AS (
			UPDATE table_maintenance_job
			SET status = $3, after_snapshot_id = $4, error = nullif($5, ''), finished_at = $6, outcomes = $7::jsonb
			WHERE id = $1 AND fence = $2 AND finished_at IS NULL
			RETURNING table_id
		), w AS (
			UPDATE scheduled_tasks SET execution_time = least(execution_time, $6), wait_for = NULL
			WHERE wait_for = '`+tableWaitPrefix+`' || (SELECT table_id FROM u)::text AND NOT picked
			RETURNING task_name
		), n AS (
			SELECT pg_notify(`+pgTaskChannel+`, name) FROM (SELECT DISTINCT task_name AS name FROM w) d
		)
		SELECT EXISTS (SELECT 1 FROM u), j.id IS NOT NULL, coalesce(j.fence, 0), j.finished_at IS NOT NULL,
			(SELECT count(*) FROM n)
		FROM (SELECT 1) AS one
		LEFT JOIN table_maintenance_job j ON j.id = $1`,
		id, fence, string(f.Status), f.AfterSnapshotID, f.Error, at, nullJSON(f.Outcomes)).
		Scan(&updated, &exists, &current, &finished, new(int64))
	if err != nil {
		return pgError("finish job", err)
	}
	if updated {
		return nil
	}
	return fenceError("finish job", id, fence, exists, current, finished)
}

// CheckFence reads the row's fence and finished state.
func (s *postgresStore) CheckFence(ctx context.Context, id, fence int64) error {
	var (
		current  int64
		finished bool
	)
	err := s.pool.QueryRow(ctx, `SELECT fence, finished_at IS NOT NULL FROM table_maintenance_job WHERE id = $1`, id).
		Scan(&current, &finished)
	if errors.Is(err, pgx.ErrNoRows) {
		return fenceError("check fence", id, fence, false, 0, false)
	}
	if err != nil {
		return pgError("check fence", err)
	}
	if current == fence && !finished {
		return nil
	}
	return fenceError("check fence", id, fence, true, current, finished)
}

// InFlightBaseSnapshots lists the before snapshots of the table's other
// in-flight rows.
func (s *postgresStore) InFlightBaseSnapshots(ctx context.Context, tableID, excludeJobID int64) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT before_snapshot_id FROM table_maintenance_job
		WHERE table_id = $1 AND id <> $2 AND finished_at IS NULL AND before_snapshot_id IS NOT NULL
		ORDER BY before_snapshot_id`, tableID, excludeJobID)
	if err != nil {
		return nil, pgError("in-flight base snapshots", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, pgError("in-flight base snapshots", err)
	}
	return ids, nil
}

// BumpFence increments the row's fence.
func (s *postgresStore) BumpFence(ctx context.Context, id int64) (int64, error) {
	var fence int64
	err := s.pool.QueryRow(ctx,
		`UPDATE table_maintenance_job SET fence = fence + 1 WHERE id = $1 RETURNING fence`, id).Scan(&fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, notFound("job", id)
	}
	if err != nil {
		return 0, pgError("bump fence", err)
	}
	return fence, nil
}

// ListJobs returns a table's newest job rows.
func (s *postgresStore) ListJobs(ctx context.Context, tableID int64, limit int) ([]Job, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT `+jobCols+` FROM table_maintenance_job
		WHERE table_id = $1 ORDER BY id DESC LIMIT $2`, tableID, limit)
	if err != nil {
		return nil, pgError("list jobs", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanJob(r) })
	if err != nil {
		return nil, pgError("list jobs", err)
	}
	return jobs, nil
}

// UpsertSnapshotMetrics inserts or replaces a metrics row.
func (s *postgresStore) UpsertSnapshotMetrics(ctx context.Context, m SnapshotMetrics) error {
	if err := validateMetrics(m); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO table_snapshot_metrics (table_id, policy_id, snapshot_id, metrics_value, recorded_at)
		VALUES ($1, $2, $3, $4::jsonb, $5)
		ON CONFLICT (table_id, policy_id, snapshot_id)
		DO UPDATE SET metrics_value = EXCLUDED.metrics_value, recorded_at = EXCLUDED.recorded_at`,
		m.TableID, m.PolicyID, m.SnapshotID, string(m.Value), orNow(m.RecordedAt, s.now))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return notFound("table", m.TableID)
	}
	if err != nil {
		return pgError("upsert snapshot metrics", err)
	}
	return nil
}

// ListSnapshotMetrics returns a table's metrics rows, oldest first.
func (s *postgresStore) ListSnapshotMetrics(ctx context.Context, tableID int64) ([]SnapshotMetrics, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT table_id, policy_id, snapshot_id, metrics_value, recorded_at
		FROM table_snapshot_metrics WHERE table_id = $1
		ORDER BY recorded_at, policy_id, snapshot_id`, tableID)
	if err != nil {
		return nil, pgError("list snapshot metrics", err)
	}
	ms, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SnapshotMetrics, error) { return scanMetrics(r) })
	if err != nil {
		return nil, pgError("list snapshot metrics", err)
	}
	return ms, nil
}

// nullJSON passes empty JSON as SQL NULL and anything else as JSON text.
func nullJSON(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	return string(v)
}

// pgError maps PostgreSQL errors that mean a bad argument (check
// violations, data exceptions such as a jsonb it cannot store) to
// ErrInvalidArgument and wraps the rest with the operation's name.
func pgError(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "23514" || strings.HasPrefix(pgErr.Code, "22")) {
		return fmt.Errorf("%w: %s: %w", ErrInvalidArgument, op, err)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}
