package store_test

import (
	"testing"

	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/storetest"
)

func TestLedgerQueriesPostgres(t *testing.T) {
	t.Parallel()
	storetest.ExerciseLedgerQueries(t, func(t *testing.T) store.Store { return openMigrated(t, pgSchemaURL(t)) })
}

func TestLedgerQueriesSQLite(t *testing.T) {
	t.Parallel()
	storetest.ExerciseLedgerQueries(t, func(t *testing.T) store.Store { return openMigrated(t, sqliteURL(t)) })
}
