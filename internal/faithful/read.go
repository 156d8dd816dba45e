package faithful

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/tms-dev/tms/internal/partval"
)

// Read reads the tasks of plan through tbl.Scan(opts...), which must
// project the schema plan was prepared with, and returns the Arrow schema
// of the rows and the batches, as Scan.ReadTasks does. Tasks that need no
// fill are read by one scan; the tasks whose files lack the same identity
// columns with the same values (the files of one partition, usually) are
// read by one scan each that leaves those columns out, and the columns are
// put back as constants in their schema position. Batches come plain tasks
// first; the order of rows is not otherwise defined.
func Read(ctx context.Context, tbl *table.Table, plan *Plan, opts ...table.ScanOption) (*arrow.Schema, iter.Seq2[arrow.RecordBatch, error], error) {
	var plain []table.FileScanTask
	type group struct {
		fills  []fill
		recast []iceberg.NestedField
		tasks  []table.FileScanTask
	}
	var groups []*group
	byKey := map[string]*group{}
	for i, t := range plan.tasks {
		if len(plan.fills[i]) == 0 && len(plan.recast[i]) == 0 {
			plain = append(plain, t)
			continue
		}
		k := fillKey(plan.fills[i]) + "|" + recastKey(plan.recast[i])
		g := byKey[k]
		if g == nil {
			g = &group{fills: plan.fills[i], recast: plan.recast[i]}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.tasks = append(g.tasks, t)
	}
	sc, records, err := tbl.Scan(opts...).ReadTasks(ctx, plain)
	if err != nil || len(groups) == 0 {
		return sc, records, err
	}
	seq := func(yield func(arrow.RecordBatch, error) bool) {
		for b, err := range records {
			if !yield(b, err) || err != nil {
				return
			}
		}
		// Groups that differ only in their fills share one recast table:
		// readingFixed copies the whole metadata through JSON.
		fixed := map[string]*table.Table{}
		for _, g := range groups {
			rt := tbl
			if len(g.recast) > 0 {
				k := recastKey(g.recast)
				if rt = fixed[k]; rt == nil {
					var err error
					if rt, err = readingFixed(tbl, plan.schema, g.recast); err != nil {
						yield(nil, err)
						return
					}
					fixed[k] = rt
				}
			}
			keep := keptColumns(plan.schema, g.fills)
			what := fillNames(g.fills)
			if len(g.recast) > 0 {
				what = strings.TrimPrefix(what+", plain FIXED_LEN_BYTE_ARRAY(16) uuids", ", ")
			}
			_, recs, err := rt.Scan(append(opts[:len(opts):len(opts)], table.WithSelectedFields(keep...))...).ReadTasks(ctx, g.tasks)
			if err != nil {
				yield(nil, fmt.Errorf("read %d files (%s): %w", len(g.tasks), what, err))
				return
			}
			for b, err := range recs {
				if err != nil {
					yield(nil, err)
					return
				}
				out, err := widen(sc, b, g.fills, g.recast)
				b.Release()
				if !yield(out, err) || err != nil {
					return
				}
			}
		}
	}
	return sc, seq, nil
}

// recastKey identifies the recast columns of a task.
func recastKey(fields []iceberg.NestedField) string {
	var b strings.Builder
	for _, f := range fields {
		fmt.Fprintf(&b, "%d;", f.ID)
	}
	return b.String()
}

// readingFixed returns tbl with the uuid columns fields of schema (the
// read projection, by its schema id) typed fixed[16], so that a scan reads
// a file that stores them as plain FIXED_LEN_BYTE_ARRAY(16) without a cast
// (arrow-go has no cast from fixed_size_binary to its uuid extension type).
// The metadata is edited in its JSON form, the spec's own, so every other
// part of it stays as it was; nothing is written.
func readingFixed(tbl *table.Table, schema *iceberg.Schema, fields []iceberg.NestedField) (*table.Table, error) {
	raw, err := json.Marshal(tbl.Metadata())
	if err != nil {
		return nil, fmt.Errorf("metadata as JSON: %w", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("metadata as JSON: %w", err)
	}
	ids := map[int]bool{}
	for _, f := range fields {
		ids[f.ID] = true
	}
	retype := func(sc json.RawMessage) (json.RawMessage, bool, error) {
		var s map[string]json.RawMessage
		if err := json.Unmarshal(sc, &s); err != nil {
			return nil, false, err
		}
		var id int
		if err := json.Unmarshal(s["schema-id"], &id); err != nil || id != schema.ID {
			return sc, false, nil
		}
		var fs []map[string]json.RawMessage
		if err := json.Unmarshal(s["fields"], &fs); err != nil {
			return nil, false, err
		}
		for _, f := range fs {
			var fid int
			if err := json.Unmarshal(f["id"], &fid); err != nil {
				return nil, false, err
			}
			if ids[fid] {
				f["type"] = json.RawMessage(`"fixed[16]"`)
			}
		}
		var err error
		if s["fields"], err = json.Marshal(fs); err != nil {
			return nil, false, err
		}
		out, err := json.Marshal(s)
		return out, true, err
	}
	found := false
	var schemas []json.RawMessage
	if err := json.Unmarshal(doc["schemas"], &schemas); err != nil {
		return nil, fmt.Errorf("metadata schemas: %w", err)
	}
	for i, sc := range schemas {
		out, ok, err := retype(sc)
		if err != nil {
			return nil, fmt.Errorf("metadata schema: %w", err)
		}
		schemas[i], found = out, found || ok
	}
	if doc["schemas"], err = json.Marshal(schemas); err != nil {
		return nil, err
	}
	if sc, ok := doc["schema"]; ok {
		if doc["schema"], _, err = retype(sc); err != nil {
			return nil, fmt.Errorf("metadata schema: %w", err)
		}
	}
	if !found {
		return nil, fmt.Errorf("schema %d is not in the table metadata", schema.ID)
	}
	if raw, err = json.Marshal(doc); err != nil {
		return nil, err
	}
	meta, err := table.ParseMetadataBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("metadata reading uuids as fixed[16]: %w", err)
	}
	return table.New(tbl.Identifier(), meta, tbl.MetadataLocation(), tbl.FS, nil), nil
}

// fillKey identifies the columns and values of a task's fills.
func fillKey(fills []fill) string {
	var b strings.Builder
	for _, f := range fills {
		fmt.Fprintf(&b, "%d=%s;", f.field.ID, partval.Key(f.value))
	}
	return b.String()
}

func fillNames(fills []fill) string {
	names := make([]string, len(fills))
	for i, f := range fills {
		names[i] = f.field.Name
	}
	return strings.Join(names, ", ")
}

// keptColumns are the top-level columns of schema that no fill replaces.
func keptColumns(schema *iceberg.Schema, fills []fill) []string {
	var keep []string
	for _, f := range schema.Fields() {
		filled := false
		for _, fl := range fills {
			filled = filled || fl.field.ID == f.ID
		}
		if !filled {
			keep = append(keep, f.Name)
		}
	}
	return keep
}

// widen returns b with the filled columns inserted as constants and the
// recast ones (read as fixed_size_binary(16)) relabelled as uuids, so that
// it has schema sc.
func widen(sc *arrow.Schema, b arrow.RecordBatch, fills []fill, recast []iceberg.NestedField) (arrow.RecordBatch, error) {
	n := b.NumRows()
	cols := make([]arrow.Array, sc.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range sc.Fields() {
		if fl, ok := fillFor(fills, f.Name); ok {
			arr, err := constant(f.Type, fl, int(n))
			if err != nil {
				return nil, err
			}
			cols[i] = arr
			continue
		}
		idx := b.Schema().FieldIndices(f.Name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("column %q is not exactly once in a batch read without the filled columns", f.Name)
		}
		col := b.Column(idx[0])
		if ext, ok := f.Type.(*extensions.UUIDType); ok && slices.ContainsFunc(recast, func(r iceberg.NestedField) bool { return r.Name == f.Name }) {
			if !arrow.TypeEqual(col.DataType(), ext.StorageType()) {
				return nil, fmt.Errorf("column %q read as %s, want %s", f.Name, col.DataType(), ext.StorageType())
			}
			cols[i] = array.NewExtensionArrayWithStorage(ext, col)
			continue
		}
		if !arrow.TypeEqual(col.DataType(), f.Type) {
			return nil, fmt.Errorf("column %q read as %s, want %s", f.Name, col.DataType(), f.Type)
		}
		col.Retain()
		cols[i] = col
	}
	return array.NewRecordBatch(sc, cols, n), nil
}

func fillFor(fills []fill, name string) (fill, bool) {
	for _, f := range fills {
		if f.field.Name == name {
			return f, true
		}
	}
	return fill{}, false
}

// constant returns an array of n copies of the fill's value as type dt.
func constant(dt arrow.DataType, fl fill, n int) (arrow.Array, error) {
	mem := memory.DefaultAllocator
	if fl.value == nil {
		return array.MakeArrayOfNull(mem, dt, n), nil
	}
	lit, err := Literal(fl.field.Type, fl.value)
	if err != nil {
		return nil, err
	}
	bld := array.NewBuilder(mem, dt)
	defer bld.Release()
	bld.Reserve(n)
	appendOne, err := appender(bld, dt, lit)
	if err != nil {
		return nil, fmt.Errorf("column %s: %w", colName(fl.field.Name, fl.field.ID), err)
	}
	for range n {
		appendOne()
	}
	return bld.NewArray(), nil
}

// appender returns a function that appends lit to bld, whose type is dt.
func appender(bld array.Builder, dt arrow.DataType, lit iceberg.Literal) (func(), error) {
	v := lit.Any()
	switch b := bld.(type) {
	case *array.BooleanBuilder:
		if x, ok := v.(bool); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.Int32Builder:
		if x, ok := v.(int32); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.Int64Builder:
		if x, ok := v.(int64); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.Float32Builder:
		if x, ok := v.(float32); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.Float64Builder:
		if x, ok := v.(float64); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.StringBuilder:
		if x, ok := v.(string); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.LargeStringBuilder:
		if x, ok := v.(string); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.StringViewBuilder:
		if x, ok := v.(string); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.BinaryBuilder:
		if x, ok := v.([]byte); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.BinaryViewBuilder:
		if x, ok := v.([]byte); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.FixedSizeBinaryBuilder:
		if x, ok := v.([]byte); ok {
			return func() { b.Append(x) }, nil
		}
	case *array.Date32Builder:
		if x, ok := v.(iceberg.Date); ok {
			return func() { b.Append(arrow.Date32(x)) }, nil
		}
	case *array.Time64Builder:
		if x, ok := v.(iceberg.Time); ok {
			t := int64(x)
			if dt.(*arrow.Time64Type).Unit == arrow.Nanosecond {
				t *= 1000
			}
			return func() { b.Append(arrow.Time64(t)) }, nil
		}
	case *array.TimestampBuilder:
		unit := dt.(*arrow.TimestampType).Unit
		switch x := v.(type) {
		case iceberg.Timestamp:
			t := int64(x)
			if unit == arrow.Nanosecond {
				t *= 1000
			} else if unit != arrow.Microsecond {
				break
			}
			return func() { b.Append(arrow.Timestamp(t)) }, nil
		case iceberg.TimestampNano:
			if unit == arrow.Nanosecond {
				return func() { b.Append(arrow.Timestamp(x)) }, nil
			}
		}
	case *array.Decimal128Builder:
		if x, ok := v.(iceberg.Decimal); ok {
			return func() { b.Append(x.Val) }, nil
		}
	case *extensions.UUIDBuilder:
		if x, ok := v.(uuid.UUID); ok {
			return func() { b.Append(x) }, nil
		}
	}
	return nil, fmt.Errorf("cannot write partition value %v (%T) as Arrow %s", v, v, dt)
}
