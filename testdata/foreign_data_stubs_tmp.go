package testdata

import "context"

func buildCrossPartitionEqDeletes(ctx context.Context, dir string) (ForeignTable, error) {
	return ForeignTable{}, nil
}
