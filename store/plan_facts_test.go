package store_test

import (
	"testing"

	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/storetest"
)

func TestPlanReadsPostgres(t *testing.T) {
	t.Parallel()
	storetest.ExercisePlanReads(t, func(t *testing.T) store.Store { return openMigrated(t, pgSchemaURL(t)) })
}

func TestPlanReadsSQLite(t *testing.T) {
	t.Parallel()
	storetest.ExercisePlanReads(t, func(t *testing.T) store.Store { return openMigrated(t, sqliteURL(t)) })
}
