package store_test

import (
	"testing"

	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/storetest"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) store.Store {
		s := openMigrated(t, pgSchemaURL(t))
		if s.Backend() != store.BackendPostgres {
			t.Fatalf("backend %q, want postgres", s.Backend())
		}
		return s
	})
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) store.Store {
		s := openMigrated(t, sqliteURL(t))
		if s.Backend() != store.BackendSQLite {
			t.Fatalf("backend %q, want sqlite", s.Backend())
		}
		return s
	})
}
