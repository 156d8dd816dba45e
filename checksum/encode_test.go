package checksum

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/stretchr/testify/require"
)

// TestMapEntryOrderDoesNotMatter checks that two maps holding the same
// entries in a different order encode alike, and a different value does not.
func TestMapEntryOrderDoesNotMatter(t *testing.T) {
	t.Parallel()
	typ := &iceberg.MapType{KeyID: 1, KeyType: iceberg.PrimitiveTypes.String, ValueID: 2, ValueType: iceberg.PrimitiveTypes.Int32}
	bld := array.NewMapBuilder(memory.DefaultAllocator, arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32, false)
	defer bld.Release()
	keys, items := bld.KeyBuilder().(*array.StringBuilder), bld.ItemBuilder().(*array.Int32Builder)
	for _, row := range [][]struct {
		k string
		v int32
	}{
		{{"a", 1}, {"b", 2}},
		{{"b", 2}, {"a", 1}},
		{{"b", 1}, {"a", 2}},
	} {
		bld.Append(true)
		for _, e := range row {
			keys.Append(e.k)
			items.Append(e.v)
		}
	}
	arr := bld.NewMapArray()
	defer arr.Release()

	enc, err := valueEncoder(typ, arr)
	require.NoError(t, err)
	require.Equal(t, enc(nil, 0), enc(nil, 1))
	require.NotEqual(t, enc(nil, 0), enc(nil, 2))
}

// TestFloatsByBits pins that -0.0 and +0.0 are different values.
func TestFloatsByBits(t *testing.T) {
	t.Parallel()
	bld := array.NewFloat64Builder(memory.DefaultAllocator)
	defer bld.Release()
	bld.AppendValues([]float64{0, negZero()}, nil)
	arr := bld.NewFloat64Array()
	defer arr.Release()
	enc, err := valueEncoder(iceberg.PrimitiveTypes.Float64, arr)
	require.NoError(t, err)
	require.NotEqual(t, enc(nil, 0), enc(nil, 1))
}

func negZero() float64 {
	z := 0.0
	return -z
}
