package store

import (
	"context"
	"fmt"

	"github.com/tms-dev/tms/migrations"
)

// SchemaCurrent reports whether s answers and its schema is the one this
// binary expects: nil if so, an error wrapping ErrSchemaBehind or
// ErrSchemaAhead if the versions differ, any other error if the database
// did not answer (or s is closed). It runs one small query on the open
// store, so readiness probes may call it often.
func SchemaCurrent(ctx context.Context, s Store) error {
	b, ok := s.(backend)
	if !ok {
		return fmt.Errorf("%w: store %T cannot report its schema version", ErrInvalidArgument, s)
	}
	current, err := b.schemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("store: read schema version: %w", err)
	}
	latest := migrations.Latest()
	switch {
	case current < latest:
		return fmt.Errorf("%w: database at version %d, binary expects %d: run `tms-coordinator migrate`", ErrSchemaBehind, current, latest)
	case current > latest:
		return schemaAheadError(current, latest)
	}
	return nil
}
