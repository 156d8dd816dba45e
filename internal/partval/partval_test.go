package partval

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestOneSpellingPerValue(t *testing.T) {
	dec := iceberg.Decimal{Val: decimal128.FromI64(123), Scale: 2}
	u := uuid.MustParse("f81d4fae-7dec-11d0-a765-00a0c91e6bf6")
	same := [][]any{
		{dec, iceberg.DecimalLiteral(dec), iceberg.NewLiteral(dec)},
		{u, [16]byte(u), iceberg.NewLiteral(u)},
		{int32(7), iceberg.NewLiteral(int32(7))},
		{"eu", iceberg.NewLiteral("eu")},
		{nil},
	}
	var keys []string
	for _, group := range same {
		k := Key(group[0])
		for _, v := range group[1:] {
			require.Equal(t, k, Key(v), "%#v", v)
		}
		keys = append(keys, k)
	}
	// Different values, and one value of different types, stay apart.
	keys = append(keys, Key(iceberg.Decimal{Val: decimal128.FromI64(1230), Scale: 3}), Key("7"), Key(int64(7)), Key("null"))
	seen := map[string]bool{}
	for _, k := range keys {
		require.False(t, seen[k], "key %q twice", k)
		seen[k] = true
	}
}
