package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Expander is the one-statement pick of a cursor-driven fan-out task (a
// policy-expand): both backends implement it, and Store embeds it.
type Expander interface {
	// CompleteExpand enqueues one batch of e and completes the claim in
	// one atomic step, guarded by claim.Version (a stale claim changes
	// nothing and returns ErrStaleFence). The row is rescheduled to m.Now
	// when the batch left more tables (next cursor not zero) and to m.Done
	// when it finished the instant; an upsert's earlier rerun time wins as
	// in CompleteTask. Its task_data becomes m.Data, a JSON object, with
	// its "cursor" member set to the next cursor. On PostgreSQL this is one
	// statement: no BEGIN or COMMIT round trips of their own.
	CompleteExpand(ctx context.Context, claim Task, e PolicyEnqueue, m ExpandMove) (created int, next int64, err error)
}

// ExpandMove says where CompleteExpand moves the completed row.
type ExpandMove struct {
	// Now is the completion's time and the next pick's when tables remain.
	Now time.Time
	// Done is the next pick's time when the batch ended the instant.
	Done time.Time
	// Data is the row's new task_data, a JSON object; the store sets its
	// "cursor" member.
	Data []byte
}

func validateExpandMove(m ExpandMove) (map[string]json.RawMessage, error) {
	if m.Now.IsZero() || m.Done.IsZero() {
		return nil, fmt.Errorf("%w: expand move needs its now and done times", ErrInvalidArgument)
	}
	obj := map[string]json.RawMessage{}
	if len(m.Data) > 0 {
		if err := json.Unmarshal(m.Data, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("%w: expand task data must be a JSON object", ErrInvalidArgument)
		}
	}
	return obj, nil
}

// pgCompleteExpandSQL is pgEnqueuePolicySQL's batch plus the guarded
// reschedule of the claimed row; the inserts only happen when the guard
// matched. Placeholders 1–9 as in pgEnqueuePolicySQL (8 = 9 = now), then
// 10 claim name, 11 instance, 12 version, 13 done time, 14 data.
var pgCompleteExpandSQL = `
		WITH ` + pgPolicyBatchCTEs + `,
		nx AS (SELECT CASE
				WHEN (SELECT count(*) FROM t) = $3 THEN (SELECT max(id) FROM t)
				WHEN (SELECT count(*) FROM w) < $4 THEN 0
				ELSE (SELECT coalesce(max(id), 0) FROM w) END AS cursor),
		u AS (
			UPDATE scheduled_tasks SET picked = false, picked_by = NULL, last_heartbeat = NULL, rerun_at = NULL,
				execution_time = least(rerun_at, CASE WHEN nx.cursor = 0 THEN $13::timestamptz ELSE $9::timestamptz END),
				task_data = convert_to(jsonb_set($14::jsonb, '{cursor}', to_jsonb(nx.cursor))::text, 'UTF8'),
				last_success = $9, consecutive_failures = 0
			FROM nx
			WHERE task_name = $10 AND task_instance = $11 AND version = $12 AND picked
			RETURNING nx.cursor
		),
		` + pgPolicyInsertCTEs("EXISTS (SELECT 1 FROM u)") + `
		SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM ins), coalesce((SELECT cursor FROM u), 0),
			(SELECT count(*) FROM n)`

// CompleteExpand runs the batch and the completion as one statement.
func (s *postgresStore) CompleteExpand(ctx context.Context, claim Task, e PolicyEnqueue, m ExpandMove) (int, int64, error) {
	if err := validatePolicyEnqueue(e); err != nil {
		return 0, 0, err
	}
	obj, err := validateExpandMove(m)
	if err != nil {
		return 0, 0, err
	}
	data, _ := json.Marshal(obj)
	var (
		held, made int
		next       int64
	)
	err = s.pool.QueryRow(ctx, pgCompleteExpandSQL, e.PolicyID, e.After, e.Limit, TablesScanWindow(e.Limit),
		e.TaskName, e.InstancePrefix, e.InstanceSuffix, utc(e.At), utc(m.Now),
		claim.Name, claim.Instance, claim.Version, utc(m.Done), string(data)).
		Scan(&held, &made, &next, new(int64))
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, pgError("complete expand", err)
	}
	if held == 0 {
		return 0, 0, staleClaim("complete expand", claim)
	}
	return made, next, nil
}

// CompleteExpand enqueues, then completes, in one write transaction.
func (s *sqliteStore) CompleteExpand(ctx context.Context, claim Task, e PolicyEnqueue, m ExpandMove) (int, int64, error) {
	if err := validatePolicyEnqueue(e); err != nil {
		return 0, 0, err
	}
	obj, err := validateExpandMove(m)
	if err != nil {
		return 0, 0, err
	}
	var (
		made  int
		next  int64
		stale error
	)
	err = s.writeTx(ctx, func(tx *sql.Tx) error {
		w := &sqliteTxWriter{tx: tx, s: s, claim: claim.TaskKey}
		if made, next, err = w.EnqueueTablesForPolicy(ctx, e); err != nil {
			return err
		}
		obj["cursor"], _ = json.Marshal(next)
		data, _ := json.Marshal(obj)
		c := Completion{Action: CompleteReschedule, Next: m.Done, Data: data, Now: m.Now}
		if next != 0 {
			c.Next = m.Now
		}
		stale = sqliteComplete(ctx, tx, claim, c, m.Now)
		return stale
	})
	if stale != nil && errors.Is(stale, ErrStaleFence) {
		return 0, 0, stale
	}
	if err != nil {
		return 0, 0, sqliteTaskError("complete expand", err)
	}
	return made, next, nil
}
