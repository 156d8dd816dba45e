// Package partval spells partition values one way, whichever iceberg-go
// code path produced them, so that two spellings of one value compare
// equal and two values never do.
//
// iceberg-go v0.7.0 reads a decimal partition value from a manifest as an
// iceberg.DecimalLiteral but its writers put an iceberg.Decimal into the
// DataFiles they build; a uuid arrives as uuid.UUID or as [16]byte; other
// code hands over an iceberg.Literal where a Go value is meant. Keyed on
// their Go type, a compaction's new files of partition price=1.23 were in
// no partition of the files they replaced, and the pre-commit verifier
// refused every compaction of a decimal-partitioned table.
package partval

import (
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// Value returns v in its one spelling: a Literal as its Go value, a
// decimal as iceberg.Decimal, a uuid as uuid.UUID; nil stays nil.
func Value(v any) any {
	switch x := v.(type) {
	case iceberg.DecimalLiteral:
		return iceberg.Decimal(x)
	case [16]byte:
		return uuid.UUID(x)
	case iceberg.Literal:
		return Value(x.Any())
	}
	return v
}

// Key spells v with its Go type, after Value, so that the int 1 and the
// string "1" differ and null differs from both.
func Key(v any) string {
	v = Value(v)
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%T:%v", v, v)
}
