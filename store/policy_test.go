package store_test

import (
	"testing"

	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/storetest"
)

func TestPoliciesPostgres(t *testing.T) {
	t.Parallel()
	storetest.ExercisePolicies(t, func(t *testing.T) store.Store { return openMigrated(t, pgSchemaURL(t)) })
}

func TestPoliciesSQLite(t *testing.T) {
	t.Parallel()
	storetest.ExercisePolicies(t, func(t *testing.T) store.Store { return openMigrated(t, sqliteURL(t)) })
}
