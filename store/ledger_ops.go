package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file holds the ledger's rows written once for both backends, on
// sqlStore's seam (sqlstore.go): table incarnations, job rows and the
// runner's fenced writes, and snapshot metrics. What stays per backend is
// CreateJob (PostgreSQL lifts created_at after an insert that waited on the
// in-flight index, see pgInsertJob) and FinishJob (it wakes the tasks waiting
// for the table: with NOTIFY in one statement on PostgreSQL, in the same
// write transaction on SQLite).

// jobInFlight is the partial unique index that allows one in-flight job row
// per table; a violation of it is ErrInFlight.
var jobInFlight = uniqueIndex{pgName: "table_maintenance_job_table_inflight_uq", sqliteColumns: "table_maintenance_job.table_id"}

// RegisterTable inserts the incarnation or, if it exists, returns it. The
// insert and the fallback read are two statements on purpose: after ON
// CONFLICT waited for a concurrent inserter, only a new statement's snapshot
// sees that inserter's row (PostgreSQL runs them on the pool; SQLite in one
// write transaction).
func (s *sqlStore) RegisterTable(ctx context.Context, ref TableRef) (Table, error) {
	if err := validateTableRef(ref); err != nil {
		return Table{}, err
	}
	ph := s.b.param
	var t Table
	err := s.b.write(ctx, func(q dbQ) error {
		var err error
		t, err = scanTable(q.queryRow(ctx, `
			INSERT INTO maintained_table (catalog, namespace, name, table_uuid, created_at)
			VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`, `+ph(4)+`, `+ph(5)+`)
			ON CONFLICT (catalog, namespace, name, table_uuid) DO NOTHING
			RETURNING `+tableCols, ref.Catalog, ref.Namespace, ref.Name, ref.UUID, s.b.timeArg(utc(s.clock()))))
		if errors.Is(err, sql.ErrNoRows) {
			t, err = scanTable(q.queryRow(ctx, `
				SELECT `+tableCols+` FROM maintained_table
				WHERE catalog = `+ph(1)+` AND namespace = `+ph(2)+` AND name = `+ph(3)+` AND table_uuid = `+ph(4),
				ref.Catalog, ref.Namespace, ref.Name, ref.UUID))
		}
		return err
	})
	if err != nil {
		return Table{}, s.b.wrap("register table", err)
	}
	return t, nil
}

// FindTable returns the newest incarnation of a table name.
func (s *sqlStore) FindTable(ctx context.Context, catalog, namespace, name string) (Table, error) {
	ph := s.b.param
	t, err := scanTable(s.b.read().queryRow(ctx, `
		SELECT `+tableCols+` FROM maintained_table
		WHERE catalog = `+ph(1)+` AND namespace = `+ph(2)+` AND name = `+ph(3)+`
		ORDER BY id DESC LIMIT 1`, catalog, namespace, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Table{}, fmt.Errorf("%w: table %s.%s.%s", ErrNotFound, catalog, namespace, name)
	}
	if err != nil {
		return Table{}, s.b.wrap("find table", err)
	}
	return t, nil
}

// GetTable returns a table row by id.
func (s *sqlStore) GetTable(ctx context.Context, id int64) (Table, error) {
	t, err := scanTable(s.b.read().queryRow(ctx, `SELECT `+tableCols+` FROM maintained_table WHERE id = `+s.b.param(1), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Table{}, notFound("table", id)
	}
	if err != nil {
		return Table{}, s.b.wrap("get table", err)
	}
	return t, nil
}

// RecordTableFacts records a table row's facts; a row that already
// records them is not written again.
func (s *sqlStore) RecordTableFacts(ctx context.Context, id int64, f TableFacts) error {
	if f.Location == "" {
		return fmt.Errorf("%w: table %d: location must not be empty", ErrInvalidArgument, id)
	}
	ph := s.b.param
	err := s.b.write(ctx, func(q dbQ) error {
		var n int
		if err := q.queryRow(ctx, `SELECT count(*) FROM maintained_table WHERE id = `+ph(1), id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return notFound("table", id)
		}
		_, err := q.exec(ctx, `UPDATE maintained_table SET location = `+ph(2)+`, gc_enabled = `+ph(3)+`
			WHERE id = `+ph(1)+` AND (location IS NULL OR location <> `+ph(2)+` OR gc_enabled IS NULL OR gc_enabled <> `+ph(3)+`)`,
			id, f.Location, f.GCEnabled)
		return err
	})
	if err != nil {
		return s.fail("record table facts", err)
	}
	return nil
}

// RecordOutsideFolders records a table row's outside folders as a JSON
// array; a row that already records them is not written again.
func (s *sqlStore) RecordOutsideFolders(ctx context.Context, id int64, folders []string) error {
	if i := slices.Index(folders, ""); i >= 0 {
		return fmt.Errorf("%w: table %d: outside folder %d is empty", ErrInvalidArgument, id, i)
	}
	if folders == nil {
		folders = []string{}
	}
	enc, err := json.Marshal(folders)
	if err != nil {
		return fmt.Errorf("encode outside folders: %w", err)
	}
	ph := s.b.param
	err = s.b.write(ctx, func(q dbQ) error {
		var n int
		if err := q.queryRow(ctx, `SELECT count(*) FROM maintained_table WHERE id = `+ph(1), id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return notFound("table", id)
		}
		_, err := q.exec(ctx, `UPDATE maintained_table SET outside_folders = `+ph(2)+`
			WHERE id = `+ph(1)+` AND (outside_folders IS NULL OR outside_folders <> `+ph(2)+`)`, id, string(enc))
		return err
	})
	if err != nil {
		return s.fail("record outside folders", err)
	}
	return nil
}

// TableLocations returns the table rows with a recorded location or
// outside folders.
func (s *sqlStore) TableLocations(ctx context.Context) ([]TableLocation, error) {
	var out []TableLocation
	err := s.b.read().query(ctx, func(row scanner) error {
		var l TableLocation
		var folders string
		if err := row.Scan(&l.ID, &l.Catalog, &l.Namespace, &l.Name, &l.UUID, &l.Location, &folders); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(folders), &l.OutsideFolders); err != nil {
			return fmt.Errorf("table %d: outside_folders %q: %w", l.ID, folders, err)
		}
		if len(l.OutsideFolders) == 0 {
			l.OutsideFolders = nil
		}
		out = append(out, l)
		return nil
	}, `SELECT id, catalog, namespace, name, table_uuid, coalesce(location, ''), coalesce(outside_folders, '[]')
		FROM maintained_table WHERE location IS NOT NULL OR outside_folders IS NOT NULL ORDER BY id`)
	if err != nil {
		return nil, s.b.wrap("table locations", err)
	}
	return out, nil
}

// insertJob inserts a pending job row on q (a pool or a transaction),
// created at now, mapping the in-flight index and the table foreign key to
// ErrInFlight and ErrNotFound. The backends' CreateJob and their scheduler
// TxWriters insert through it (pgInsertJob, sqliteInsertJob), so none can
// drift.
func insertJob(ctx context.Context, d sqlDialect, q dbQ, nj NewJob, now time.Time) (Job, error) {
	types, err := validateNewJob(nj)
	if err != nil {
		return Job{}, err
	}
	ph := d.param
	j, err := scanJob(q.queryRow(ctx, `
		INSERT INTO table_maintenance_job (job_id, table_id, policy_id, types, "trigger", status, fence, spec, created_at, node)
		VALUES (nullif(`+ph(1)+`, ''), `+ph(2)+`, `+ph(3)+`, `+ph(4)+`, `+ph(5)+`, `+ph(6)+`, 1, `+d.typed(7, "jsonb")+`, `+ph(8)+`, nullif(`+ph(9)+`, ''))
		RETURNING `+jobCols,
		nj.JobID, nj.TableID, nj.PolicyID, types, string(nj.Trigger), string(StatusPending), nullJSON(nj.Spec), d.timeArg(utc(now)), nj.Node))
	switch {
	case err == nil:
		return j, nil
	case d.isUnique(err, jobInFlight):
		return Job{}, inFlightError(nj)
	case d.isForeignKey(err):
		return Job{}, notFound("table", nj.TableID)
	}
	return Job{}, d.wrap("create job", err)
}

// GetJob returns a job row by id.
func (s *sqlStore) GetJob(ctx context.Context, id int64) (Job, error) {
	j, err := scanJob(s.b.read().queryRow(ctx, `SELECT `+jobCols+` FROM table_maintenance_job WHERE id = `+s.b.param(1), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, notFound("job", id)
	}
	if err != nil {
		return Job{}, s.b.wrap("get job", err)
	}
	return j, nil
}

// StartJob marks the job running.
func (s *sqlStore) StartJob(ctx context.Context, id, fence int64, at time.Time) error {
	return s.b.fenced(ctx, "start job", id, fence, `AND status = 'pending'`,
		`status = `+s.b.param(3)+`, started_at = `+s.b.param(4),
		string(StatusRunning), s.b.timeArg(orNow(at, s.clock)))
}

// SetBeforeSnapshot records the sampled snapshot.
func (s *sqlStore) SetBeforeSnapshot(ctx context.Context, id, fence, snapshotID int64) error {
	return s.b.fenced(ctx, "set before snapshot", id, fence, "", `before_snapshot_id = `+s.b.param(3), snapshotID)
}

// SetJobID records the external job id and the submitter kind.
func (s *sqlStore) SetJobID(ctx context.Context, id, fence int64, jobID, submitter string) error {
	return s.b.fenced(ctx, "set job id", id, fence, "",
		`job_id = nullif(`+s.b.param(3)+`, ''), submitter = nullif(`+s.b.param(4)+`, '')`, jobID, submitter)
}

// CheckFence reads the row's fence and finished state.
func (s *sqlStore) CheckFence(ctx context.Context, id, fence int64) error {
	var (
		current  int64
		finished bool
	)
	err := s.b.read().queryRow(ctx, `SELECT fence, finished_at IS NOT NULL FROM table_maintenance_job WHERE id = `+s.b.param(1), id).
		Scan(&current, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return fenceError("check fence", id, fence, false, 0, false)
	}
	if err != nil {
		return s.b.wrap("check fence", err)
	}
	if current == fence && !finished {
		return nil
	}
	return fenceError("check fence", id, fence, true, current, finished)
}

// InFlightBaseSnapshots lists the before snapshots of the table's other
// in-flight rows.
func (s *sqlStore) InFlightBaseSnapshots(ctx context.Context, tableID, excludeJobID int64) ([]int64, error) {
	ids, err := collect(ctx, s.b.read(), func(row scanner) (id int64, err error) { return id, row.Scan(&id) }, `
		SELECT DISTINCT before_snapshot_id FROM table_maintenance_job
		WHERE table_id = `+s.b.param(1)+` AND id <> `+s.b.param(2)+` AND finished_at IS NULL AND before_snapshot_id IS NOT NULL
		ORDER BY before_snapshot_id`, tableID, excludeJobID)
	if err != nil {
		return nil, s.b.wrap("in-flight base snapshots", err)
	}
	return ids, nil
}

// BumpFence increments the row's fence.
func (s *sqlStore) BumpFence(ctx context.Context, id int64) (int64, error) {
	var fence int64
	err := s.b.write(ctx, func(q dbQ) error {
		return q.queryRow(ctx, `UPDATE table_maintenance_job SET fence = fence + 1 WHERE id = `+s.b.param(1)+` RETURNING fence`, id).
			Scan(&fence)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound("job", id)
	}
	if err != nil {
		return 0, s.b.wrap("bump fence", err)
	}
	return fence, nil
}

// ListJobs returns a table's newest job rows.
func (s *sqlStore) ListJobs(ctx context.Context, tableID int64, limit int) ([]Job, error) {
	if err := validateLimit(limit); err != nil {
		return nil, err
	}
	jobs, err := collect(ctx, s.b.read(), scanJob, `
		SELECT `+jobCols+` FROM table_maintenance_job
		WHERE table_id = `+s.b.param(1)+` ORDER BY id DESC LIMIT `+s.b.param(2), tableID, limit)
	if err != nil {
		return nil, s.b.wrap("list jobs", err)
	}
	return jobs, nil
}

// UpsertSnapshotMetrics inserts or replaces a metrics row, and in the same
// transaction makes the table's newest row its table_latest_metrics row
// (see latestMetricsUpsertSQL).
func (s *sqlStore) UpsertSnapshotMetrics(ctx context.Context, m SnapshotMetrics) error {
	if err := validateMetrics(m); err != nil {
		return err
	}
	ph := s.b.param
	err := s.b.inTx(ctx, func(q dbQ) error {
		_, err := q.exec(ctx, `
			INSERT INTO table_snapshot_metrics (table_id, policy_id, snapshot_id, metrics_value, recorded_at)
			VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`, `+s.b.typed(4, "jsonb")+`, `+ph(5)+`)
			ON CONFLICT (table_id, policy_id, snapshot_id)
			DO UPDATE SET metrics_value = EXCLUDED.metrics_value, recorded_at = EXCLUDED.recorded_at`,
			m.TableID, m.PolicyID, m.SnapshotID, string(m.Value), s.b.timeArg(orNow(m.RecordedAt, s.clock)))
		if err != nil {
			return err
		}
		_, err = q.exec(ctx, latestMetricsUpsertSQL(s.b), m.TableID, m.PolicyID, m.SnapshotID)
		return err
	})
	if s.b.isForeignKey(err) {
		return notFound("table", m.TableID)
	}
	if err != nil {
		return s.b.wrap("upsert snapshot metrics", err)
	}
	return nil
}

// ListSnapshotMetrics returns a table's metrics rows, oldest first.
func (s *sqlStore) ListSnapshotMetrics(ctx context.Context, tableID int64) ([]SnapshotMetrics, error) {
	ms, err := collect(ctx, s.b.read(), scanMetrics, `
		SELECT table_id, policy_id, snapshot_id, metrics_value, recorded_at
		FROM table_snapshot_metrics WHERE table_id = `+s.b.param(1)+`
		ORDER BY recorded_at, policy_id, snapshot_id`, tableID)
	if err != nil {
		return nil, s.b.wrap("list snapshot metrics", err)
	}
	return ms, nil
}
