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
	// The store's statements are short; PostgreSQL's JIT, which starts on
	// a planner cost estimate, only adds its compile time to them (the
	// console's tables page crosses jit_above_cost on a ledger of tens of
	// thousands of tables, and then pays more for compiling than for
	// running). A URL's own ?jit= wins.
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: PostgreSQL at %s: %w", pgHostPort(cfg), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: cannot connect to PostgreSQL at %s: %w", pgHostPort(cfg), err)
	}
	return &postgresStore{pool: pool, log: log, now: now, sqlStore: sqlStore{b: pgBackend{pool: pool}, clock: now}}, nil
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

// CreateJob inserts a pending job row; the partial unique index turns a
// second in-flight row into ErrInFlight.
func (s *postgresStore) CreateJob(ctx context.Context, nj NewJob) (Job, error) {
	return pgInsertJob(ctx, s.pool, nj, s.now())
}

// pgInsertJob inserts a pending job row through db (the pool, or the
// transaction of a guarded completion) with insertJob, then lifts its
// created_at past the finish of the table's previous job. The lift is
// PostgreSQL's own: only here can an insert wait on the in-flight index
// for a finish that committed after it read the clock; SQLite's inserts
// read it under the write lock, after any finish.
func pgInsertJob(ctx context.Context, db pgDB, nj NewJob, now time.Time) (Job, error) {
	j, err := insertJob(ctx, pgDialect{}, pgQ{db}, nj, now)
	if err != nil {
		return Job{}, err
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
		), `+pgWakeWaiting("$6")+`
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

// pgWakeWaiting is the tail of a WITH that finished a job row in CTE u
// (RETURNING table_id): the CTEs w and n make the tasks waiting for that
// table due at the time in parameter at, and tell the nodes (n counts the
// notifications).
func pgWakeWaiting(at string) string {
	return `w AS (
			UPDATE scheduled_tasks SET execution_time = least(execution_time, ` + at + `), wait_for = NULL
			WHERE wait_for = '` + tableWaitPrefix + `' || (SELECT table_id FROM u)::text AND NOT picked
			RETURNING task_name
		), n AS (
			SELECT pg_notify(` + pgTaskChannel + `, name) FROM (SELECT DISTINCT task_name AS name FROM w) d
		)`
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
