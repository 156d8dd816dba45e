package checksum

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
)

// Type tags of the row encoding. They are part of the checksum format: never
// renumber them (add new ones at the end, and change seed if the meaning of
// an existing one changes).
//
// Types that Iceberg lets a schema promote without rewriting data share a
// tag and an encoding: int and long (tagInteger, 8 bytes), float and double
// (tagFloat, the float64 bits), decimals of any precision at the same scale.
const (
	tagNull byte = iota
	tagBool
	tagInteger
	tagFloat
	tagDecimal
	tagDate
	tagTime
	tagTimestamp
	tagTimestampTz
	tagTimestampNs
	tagTimestampTzNs
	tagString
	tagUUID
	tagFixed
	tagBinary
	tagStruct
	tagList
	tagMap
	tagOther // any other type, encoded by its type name and Arrow's text form
)

// encoder appends the canonical encoding of row i of one column to buf.
type encoder func(buf []byte, i int) []byte

// field is one column or struct field: its id, its values and the encoder of
// its non-null values.
type field struct {
	id  uint64
	arr arrow.Array
	enc encoder
}

// appendFields appends the fields of row i that are not null, each as its
// field id then its value. A null field is left out entirely, so a row read
// with an optional column added later (null for old rows) encodes as it did
// before the column existed.
func appendFields(buf []byte, fields []field, i int) []byte {
	for _, f := range fields {
		if f.arr.IsNull(i) {
			continue
		}
		buf = f.enc(binary.AppendUvarint(buf, f.id), i)
	}
	return buf
}

// addBatch hashes every row of rec, whose columns are the top-level fields of
// schema (matched by name).
func (d *digest) addBatch(schema *iceberg.Schema, rec arrow.RecordBatch) error {
	nested := schema.Fields()
	if int(rec.NumCols()) != len(nested) {
		return fmt.Errorf("scanned batch has %d columns, schema has %d", rec.NumCols(), len(nested))
	}
	fields := make([]field, len(nested))
	for j, f := range nested {
		idx := rec.Schema().FieldIndices(f.Name)
		if len(idx) != 1 {
			return fmt.Errorf("column %q (field id %d) is not exactly once in the scanned batch", f.Name, f.ID)
		}
		arr := storage(rec.Column(idx[0]))
		enc, err := nonNullEncoder(f.Type, arr)
		if err != nil {
			return fmt.Errorf("column %q: %w", f.Name, err)
		}
		fields[j] = field{id: uint64(f.ID), arr: arr, enc: enc}
	}
	for i := range int(rec.NumRows()) {
		d.buf = appendFields(d.buf[:0], fields, i)
		d.addRow(d.buf)
	}
	return nil
}

// storage unwraps an extension array (such as Arrow's UUID) to its storage.
func storage(arr arrow.Array) arrow.Array {
	if ext, ok := arr.(array.ExtensionArray); ok {
		return ext.Storage()
	}
	return arr
}

// valueEncoder returns the encoder of a list element, map key or map value of
// Iceberg type t stored in arr. Positions matter there, so a null is encoded
// (as tagNull alone) rather than left out.
func valueEncoder(t iceberg.Type, arr arrow.Array) (encoder, error) {
	arr = storage(arr)
	enc, err := nonNullEncoder(t, arr)
	if err != nil {
		return nil, err
	}
	if arr.NullN() == 0 {
		return enc, nil
	}
	return func(buf []byte, i int) []byte {
		if arr.IsNull(i) {
			return append(buf, tagNull)
		}
		return enc(buf, i)
	}, nil
}

func nonNullEncoder(t iceberg.Type, arr arrow.Array) (encoder, error) {
	switch t := t.(type) {
	case iceberg.BooleanType:
		if a, ok := arr.(*array.Boolean); ok {
			return func(buf []byte, i int) []byte {
				if a.Value(i) {
					return append(buf, tagBool, 1)
				}
				return append(buf, tagBool, 0)
			}, nil
		}
	case iceberg.Int32Type, iceberg.Int64Type:
		return intEncoder(tagInteger, arr)
	case iceberg.DateType:
		return intEncoder(tagDate, arr)
	case iceberg.TimeType:
		return intEncoder(tagTime, arr)
	case iceberg.TimestampType:
		return intEncoder(tagTimestamp, arr)
	case iceberg.TimestampTzType:
		return intEncoder(tagTimestampTz, arr)
	case iceberg.TimestampNsType:
		return intEncoder(tagTimestampNs, arr)
	case iceberg.TimestampTzNsType:
		return intEncoder(tagTimestampTzNs, arr)
	case iceberg.Float32Type, iceberg.Float64Type:
		// float → double conversion is exact, so a promoted column keeps its
		// values' encoding; bits are kept as they are (no NaN or -0.0
		// canonicalisation).
		switch a := arr.(type) {
		case *array.Float32:
			return func(buf []byte, i int) []byte {
				return binary.LittleEndian.AppendUint64(append(buf, tagFloat), math.Float64bits(float64(a.Value(i))))
			}, nil
		case *array.Float64:
			return func(buf []byte, i int) []byte {
				return binary.LittleEndian.AppendUint64(append(buf, tagFloat), math.Float64bits(a.Value(i)))
			}, nil
		}
	case iceberg.DecimalType:
		if a, ok := arr.(*array.Decimal128); ok {
			// Precision is left out: widening it is an allowed promotion.
			scale := byte(t.Scale())
			return func(buf []byte, i int) []byte {
				v := a.Value(i)
				buf = append(buf, tagDecimal, scale)
				buf = binary.LittleEndian.AppendUint64(buf, v.LowBits())
				return binary.LittleEndian.AppendUint64(buf, uint64(v.HighBits()))
			}, nil
		}
	case iceberg.StringType:
		return bytesEncoder(tagString, arr)
	case iceberg.UUIDType:
		return bytesEncoder(tagUUID, arr)
	case iceberg.FixedType:
		return bytesEncoder(tagFixed, arr)
	case iceberg.BinaryType:
		return bytesEncoder(tagBinary, arr)
	case *iceberg.StructType:
		return structEncoder(t, arr)
	case *iceberg.ListType:
		return listEncoder(t, arr)
	case *iceberg.MapType:
		return mapEncoder(t, arr)
	default:
		return otherEncoder(t, arr), nil
	}
	return otherEncoder(t, arr), nil
}

// otherEncoder covers types without a dedicated encoding (variant,
// geometry, …) and unexpected Arrow layouts: the type name, then Arrow's text
// form of the value. It is deterministic, only less compact.
func otherEncoder(t iceberg.Type, arr arrow.Array) encoder {
	name := t.String() + "/" + arr.DataType().String()
	return func(buf []byte, i int) []byte {
		buf = append(buf, tagOther)
		buf = appendBytes(buf, name)
		return appendBytes(buf, arr.ValueStr(i))
	}
}

func appendBytes[B []byte | string](buf []byte, b B) []byte {
	return append(binary.AppendUvarint(buf, uint64(len(b))), b...)
}

func intEncoder(tag byte, arr arrow.Array) (encoder, error) {
	var at func(i int) int64
	switch a := arr.(type) {
	case *array.Int8:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int16:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int32:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int64:
		at = a.Value
	case *array.Uint8:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Uint16:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Uint32:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Date32:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Time64:
		at = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Timestamp:
		at = func(i int) int64 { return int64(a.Value(i)) }
	default:
		return nil, fmt.Errorf("unexpected Arrow type %s for an integer-like column", arr.DataType())
	}
	return func(buf []byte, i int) []byte {
		return binary.LittleEndian.AppendUint64(append(buf, tag), uint64(at(i)))
	}, nil
}

func bytesEncoder(tag byte, arr arrow.Array) (encoder, error) {
	switch a := arr.(type) {
	case interface{ Value(int) string }:
		return func(buf []byte, i int) []byte { return appendBytes(append(buf, tag), a.Value(i)) }, nil
	case interface{ Value(int) []byte }:
		return func(buf []byte, i int) []byte { return appendBytes(append(buf, tag), a.Value(i)) }, nil
	}
	return nil, fmt.Errorf("unexpected Arrow type %s for a string or binary column", arr.DataType())
}

// structEncoder encodes a struct like a row: its non-null fields, each with
// its field id, preceded by how many there are (so where the struct ends is
// never ambiguous).
func structEncoder(t *iceberg.StructType, arr arrow.Array) (encoder, error) {
	a, ok := arr.(*array.Struct)
	if !ok || a.NumField() != len(t.FieldList) {
		return nil, fmt.Errorf("unexpected Arrow type %s for %s", arr.DataType(), t)
	}
	fields := make([]field, len(t.FieldList))
	for k, f := range t.FieldList {
		child := storage(a.Field(k))
		enc, err := nonNullEncoder(f.Type, child)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		fields[k] = field{id: uint64(f.ID), arr: child, enc: enc}
	}
	return func(buf []byte, i int) []byte {
		n := 0
		for _, f := range fields {
			if !f.arr.IsNull(i) {
				n++
			}
		}
		buf = binary.AppendUvarint(append(buf, tagStruct), uint64(n))
		return appendFields(buf, fields, i)
	}, nil
}

func listEncoder(t *iceberg.ListType, arr arrow.Array) (encoder, error) {
	a, ok := arr.(array.ListLike)
	if !ok {
		return nil, fmt.Errorf("unexpected Arrow type %s for %s", arr.DataType(), t)
	}
	elem, err := valueEncoder(t.Element, a.ListValues())
	if err != nil {
		return nil, fmt.Errorf("list element: %w", err)
	}
	return func(buf []byte, i int) []byte {
		start, end := a.ValueOffsets(i)
		buf = binary.AppendUvarint(append(buf, tagList), uint64(end-start))
		for k := start; k < end; k++ {
			buf = elem(buf, int(k))
		}
		return buf
	}, nil
}

// mapEncoder encodes a map's entries sorted by encoded key, so two maps with
// the same entries in a different order encode alike.
func mapEncoder(t *iceberg.MapType, arr arrow.Array) (encoder, error) {
	a, ok := arr.(*array.Map)
	if !ok {
		return nil, fmt.Errorf("unexpected Arrow type %s for %s", arr.DataType(), t)
	}
	entries, ok := a.ListValues().(*array.Struct)
	if !ok || entries.NumField() != 2 {
		return nil, fmt.Errorf("unexpected Arrow map entries %s for %s", a.ListValues().DataType(), t)
	}
	keyEnc, err := valueEncoder(t.KeyType, entries.Field(0))
	if err != nil {
		return nil, fmt.Errorf("map key: %w", err)
	}
	valEnc, err := valueEncoder(t.ValueType, entries.Field(1))
	if err != nil {
		return nil, fmt.Errorf("map value: %w", err)
	}
	type entry struct{ key, both []byte }
	return func(buf []byte, i int) []byte {
		start, end := a.ValueOffsets(i)
		es := make([]entry, 0, end-start)
		for k := start; k < end; k++ {
			key := keyEnc(nil, int(k))
			es = append(es, entry{key: key, both: valEnc(slices.Clip(key), int(k))})
		}
		slices.SortFunc(es, func(x, y entry) int { return bytes.Compare(x.key, y.key) })
		buf = binary.AppendUvarint(append(buf, tagMap), uint64(len(es)))
		for _, e := range es {
			buf = append(buf, e.both...)
		}
		return buf
	}, nil
}
