package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tms-dev/tms/store"
)

// This file gives scheduler tests an executions table: one row per task
// execution, with a unique key, written by a handler in the same transaction
// as its guarded completion (store.Scheduler.CompleteTaskWith). A task that
// ran twice shows up as a unique violation; a completion whose claim was
// stale writes no row at all.

// CreateExecutions creates the table test_executions (exec_key unique) in the
// database dbURL names.
func CreateExecutions(t testing.TB, dbURL string) {
	t.Helper()
	if strings.HasPrefix(dbURL, "sqlite://") {
		SQLiteExec(t, dbURL, `CREATE TABLE test_executions (exec_key TEXT NOT NULL PRIMARY KEY, node TEXT NOT NULL)`)
		return
	}
	PostgresExec(t, dbURL, `CREATE TABLE test_executions (exec_key text PRIMARY KEY, node text NOT NULL)`)
}

// RecordExecution inserts key, executed by node, through tx. A key that is
// already there is an error (the unique key), which rolls the completion back.
func RecordExecution(ctx context.Context, tx store.TxWriter, key, node string) error {
	switch d := tx.Driver().(type) {
	case pgx.Tx:
		_, err := d.Exec(ctx, `INSERT INTO test_executions (exec_key, node) VALUES ($1, $2)`, key, node)
		return err
	case *sql.Tx:
		_, err := d.ExecContext(ctx, `INSERT INTO test_executions (exec_key, node) VALUES (?1, ?2)`, key, node)
		return err
	default:
		return fmt.Errorf("testdb: unknown transaction type %T", d)
	}
}

// Executions returns the recorded keys and the node that ran each.
func Executions(t testing.TB, dbURL string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	if strings.HasPrefix(dbURL, "sqlite://") {
		db, err := sql.Open("sqlite", strings.TrimPrefix(dbURL, "sqlite://")+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx, `SELECT exec_key, node FROM test_executions`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var k, n string
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			out[k] = n
		}
		return out
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT exec_key, node FROM test_executions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, n string
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		out[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
