package store_test

import (
	"testing"

	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/storetest"
)

func TestTasksPostgres(t *testing.T) {
	t.Parallel()
	storetest.ExerciseTasks(t, func(t *testing.T) store.Store { return openMigrated(t, pgSchemaURL(t)) })
}

func TestTasksSQLite(t *testing.T) {
	t.Parallel()
	storetest.ExerciseTasks(t, func(t *testing.T) store.Store { return openMigrated(t, sqliteURL(t)) })
}
