package testdata

import "context"

func buildDefaults(ctx context.Context, dir string) (ForeignTable, error) { return ForeignTable{}, nil }
func buildCrossPartitionEqDeletes(ctx context.Context, dir string) (ForeignTable, error) {
	return ForeignTable{}, nil
}
