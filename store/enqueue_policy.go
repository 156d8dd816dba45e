package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// PolicyEnqueue says which rows EnqueueTablesForPolicy inserts: one task of
// kind TaskName per table TablesForPolicy(PolicyID, After, Limit) returns,
// with instance InstancePrefix + table id + InstanceSuffix, due At.
type PolicyEnqueue struct {
	PolicyID       int64
	After          int64
	Limit          int
	TaskName       string
	InstancePrefix string
	InstanceSuffix string
	At             time.Time
}

func validatePolicyEnqueue(e PolicyEnqueue) error {
	if err := validateTablesForPolicy(e.Limit); err != nil {
		return err
	}
	if strings.TrimSpace(e.TaskName) == "" {
		return fmt.Errorf("%w: enqueue task name must not be empty", ErrInvalidArgument)
	}
	if e.At.IsZero() {
		return fmt.Errorf("%w: enqueue due time must be set", ErrInvalidArgument)
	}
	return nil
}

// pgEnqueuePolicySQL selects the batch as tablesForPolicySQL does, inserts
// a task per table, notifies the task channel when rows due at once were
// new, and returns the batch size, its highest table id, the scan window's
// row count and highest id, and how many rows were new. Placeholders: 1
// policy, 2 after, 3 limit, 4 window, 5 task name, 6 prefix, 7 suffix, 8
// due time, 9 now.
func pgEnqueuePolicySQL() string {
	return `
		WITH ` + pgPolicyBatchCTEs + `,
		` + pgPolicyInsertCTEs("") + `
		SELECT (SELECT count(*) FROM t), (SELECT coalesce(max(id), 0) FROM t),
			(SELECT count(*) FROM w), (SELECT coalesce(max(id), 0) FROM w), (SELECT count(*) FROM ins),
			(SELECT count(*) FROM n)`
}

// pgPolicyBatchCTEs are t, the batch (placeholders 1 policy, 2 after, 3
// limit, 4 window), and w, the scan window it examined.
var pgPolicyBatchCTEs = `t AS (` + tablesForPolicySQL(pgDialect{}) + `),
		w AS (SELECT id FROM maintained_table WHERE id > $2 ORDER BY id LIMIT $4)`

// pgPolicyInsertCTEs are ins, a task per row of t (placeholders 5 task
// name, 6 prefix, 7 suffix, 8 due time, 9 now), only where the SQL
// condition guard holds (empty: always), and n, the notification of the
// kind when new rows are due at once.
func pgPolicyInsertCTEs(guard string) string {
	if guard != "" {
		guard = "WHERE " + guard
	}
	return `ins AS (
			INSERT INTO scheduled_tasks (task_name, task_instance, execution_time, priority)
			SELECT $5::text, $6::text || t.id::text || $7::text, $8::timestamptz, 0 FROM t ` + guard + `
			ON CONFLICT (task_name, task_instance) DO NOTHING
			RETURNING 1
		),
		n AS (SELECT pg_notify(` + pgTaskChannel + `, $5::text) WHERE EXISTS (SELECT 1 FROM ins) AND $8::timestamptz <= $9::timestamptz)`
}

// enqueueNext is TablesForPolicy's cursor rule on the counts.
func enqueueNext(n int, maxT int64, limit, windowRows int, maxW int64) int64 {
	switch {
	case n == limit:
		return maxT
	case windowRows < TablesScanWindow(limit):
		return 0
	}
	return maxW
}

// EnqueueTablesForPolicy inserts the batch's tasks in one statement.
func (w *pgTxWriter) EnqueueTablesForPolicy(ctx context.Context, e PolicyEnqueue) (created int, next int64, err error) {
	if err := validatePolicyEnqueue(e); err != nil {
		return 0, 0, err
	}
	var (
		n, rows, made int
		maxT, maxW    int64
	)
	err = w.tx.QueryRow(ctx, pgEnqueuePolicySQL(), e.PolicyID, e.After, e.Limit, TablesScanWindow(e.Limit),
		e.TaskName, e.InstancePrefix, e.InstanceSuffix, e.At, w.s.now()).
		Scan(&n, &maxT, &rows, &maxW, &made, new(int64))
	if err != nil {
		return 0, 0, pgError("enqueue tables for policy", err)
	}
	return made, enqueueNext(n, maxT, e.Limit, rows, maxW), nil
}

// EnqueueTablesForPolicy inserts the batch's tasks in one statement.
func (w *sqliteTxWriter) EnqueueTablesForPolicy(ctx context.Context, e PolicyEnqueue) (created int, next int64, err error) {
	if err := validatePolicyEnqueue(e); err != nil {
		return 0, 0, err
	}
	// SQLite has no data-modifying CTE: select, then insert.
	ts, next, err := w.s.tablesForPolicy(ctx, sqliteQ{w.tx}, e.PolicyID, e.After, e.Limit)
	if err != nil {
		return 0, 0, sqliteError("enqueue tables for policy", err)
	}
	batch := make([]NewTask, len(ts))
	for i, t := range ts {
		batch[i] = NewTask{TaskKey: TaskKey{Name: e.TaskName, Instance: fmt.Sprint(e.InstancePrefix, t.ID, e.InstanceSuffix)}, ExecutionTime: e.At}
	}
	created, err = sqliteScheduleTasks(ctx, w.tx, batch, e.At)
	if err != nil {
		return 0, 0, sqliteTaskError("enqueue tables for policy", err)
	}
	return created, next, nil
}
