package faithful

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/tms-dev/tms/catalogs"
)

// Plan is how each task of a read is to be read: the columns its data file
// lacks that take the file's identity-partition value. Build it with
// Prepare; read it with Read.
type Plan struct {
	schema *iceberg.Schema
	tasks  []table.FileScanTask
	fills  [][]fill // per task; nil when the scan's own reading is faithful
	// recast holds, per task, the top-level uuid columns its data file
	// stores as a plain FIXED_LEN_BYTE_ARRAY(16) (no UUID logical type):
	// iceberg-go's scan cannot cast those to its uuid type, so Read scans
	// them as fixed[16] and relabels them (see Read).
	recast [][]iceberg.NestedField
}

// fill is one column a data file lacks that takes a constant: the file's
// identity-partition value (nil: null).
type fill struct {
	field iceberg.NestedField
	value any
}

// Tasks returns the tasks of the plan, in the order given to Prepare.
func (p *Plan) Tasks() []table.FileScanTask { return p.tasks }

// Filled returns the number of tasks whose data file lacks at least one
// identity-partition column that the read fills in.
func (p *Plan) Filled() int {
	n := 0
	for _, f := range p.fills {
		if len(f) > 0 {
			n++
		}
	}
	return n
}

// FilledColumns returns, for task i, the names of the columns its data
// file lacks that are filled from its partition tuple.
func (p *Plan) FilledColumns(i int) []string {
	var out []string
	for _, f := range p.fills[i] {
		out = append(out, f.field.Name)
	}
	return out
}

// footerConcurrency bounds the footers read at once: each is one or two
// small reads, latency-bound on object stores, and holds only the file's
// metadata in memory.
func footerConcurrency() int { return max(32, 4*runtime.GOMAXPROCS(0)) }

// Prepare checks, from each data file's Parquet footer and the table
// metadata, that every task can be read faithfully with schema (the read
// projection: the table's current schema for a rewrite, a snapshot's schema
// for a checksum of it) and plans which columns take partition values. The
// first file that cannot is reported as a *Refusal; other errors (a file
// that cannot be opened) are returned as they are.
func Prepare(ctx context.Context, meta table.Metadata, fs iceio.IO, schema *iceberg.Schema, tasks []table.FileScanTask) (*Plan, error) {
	p := &Plan{schema: schema, tasks: tasks, fills: make([][]fill, len(tasks)), recast: make([][]iceberg.NestedField, len(tasks))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(footerConcurrency())
	for i := range tasks {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			f, r, err := prepareTask(meta, fs, schema, tasks[i])
			if err != nil {
				return err
			}
			p.fills[i], p.recast[i] = f, r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return p, nil
}

// prepareTask checks one task and returns its fills and its recast
// columns.
func prepareTask(meta table.Metadata, fs iceio.IO, schema *iceberg.Schema, t table.FileScanTask) (fills []fill, recast []iceberg.NestedField, err error) {
	df := t.File
	path := df.FilePath()
	if df.FileFormat() != iceberg.ParquetFile {
		return nil, nil, refuse(path, "", "data file format %s: only Parquet data files are read", df.FileFormat())
	}
	for _, d := range slices.Concat(t.DeleteFiles, t.EqualityDeleteFiles) {
		if d.FileFormat() != iceberg.ParquetFile {
			return nil, nil, refuse(d.FilePath(), "", "delete file format %s (applies to %s): only Parquet delete files are read", d.FileFormat(), path)
		}
	}
	for _, d := range t.DeletionVectorFiles {
		if d.FileFormat() != iceberg.PuffinFile {
			return nil, nil, refuse(d.FilePath(), "", "deletion vector format %s (applies to %s): want Puffin", d.FileFormat(), path)
		}
		if meta.Version() < 3 {
			return nil, nil, refuse(d.FilePath(), "", "deletion vector (applies to %s) on a format v%d table: deletion vectors need format v3", path, meta.Version())
		}
	}
	spec := meta.PartitionSpecByID(int(df.SpecID()))
	if spec == nil {
		return nil, nil, refuse(path, "", "partition spec %d is not in the table metadata", df.SpecID())
	}
	fileSchema, err := fileSchema(meta, fs, path, df.FileSizeBytes())
	if err != nil {
		return nil, nil, err
	}

	// identity maps a source field id to the value of the file's identity
	// partition field on it.
	identity := map[int]any{}
	part := df.Partition()
	for _, pf := range spec.Fields() {
		if _, ok := pf.Transform.(iceberg.IdentityTransform); ok {
			identity[pf.SourceIDs[0]] = part[pf.FieldID]
		}
	}

	for _, f := range schema.Fields() {
		if storesPlainUUID(fileSchema, f) {
			recast = append(recast, f)
			continue
		}
		present, err := checkField(path, fileSchema, f, f.Name, identity)
		if err != nil {
			return nil, nil, err
		}
		if present {
			continue
		}
		v, ok := identity[f.ID]
		switch {
		case ok:
			if v == nil && f.Required {
				return nil, nil, refuse(path, colName(f.Name, f.ID), "required, not in the file, and its identity partition value is null")
			}
			if err := checkConstant(f, v); err != nil {
				return nil, nil, refuse(path, colName(f.Name, f.ID), "identity partition value %v: %v", v, err)
			}
			fills = append(fills, fill{field: f, value: v})
		case f.InitialDefault != nil, !f.Required:
			// The scan fills the initial-default or NULL.
		default:
			return nil, nil, refuse(path, colName(f.Name, f.ID), "required, not in the file, with no identity partition value and no initial-default")
		}
	}
	for _, d := range t.EqualityDeleteFiles {
		for _, id := range d.EqualityFieldIDs() {
			if i := slices.IndexFunc(fills, func(f fill) bool { return f.field.ID == id }); i >= 0 {
				return nil, nil, refuse(path, colName(fills[i].field.Name, id),
					"equality delete file %s is keyed on it and the data file does not store it (iceberg-go would compare it as NULL)", d.FilePath())
			}
			if i := slices.IndexFunc(recast, func(f iceberg.NestedField) bool { return f.ID == id }); i >= 0 {
				return nil, nil, refuse(path, colName(recast[i].Name, id),
					"equality delete file %s is keyed on it and the data file stores it as a plain FIXED_LEN_BYTE_ARRAY(16), which iceberg-go cannot compare with a uuid", d.FilePath())
			}
		}
	}
	return fills, recast, nil
}

// colName spells a column for messages: name (field id N).
func colName(name string, id int) string { return fmt.Sprintf("%s (field id %d)", name, id) }

// WholeFileBytes is the size up to which a file on object storage has its
// footer read by reading the whole file: one request, where opening it and
// reading the footer by ranges costs three. Local files are always read by
// ranges.
const WholeFileBytes = 1 << 20

// fileSchema reads the Parquet footer of path and returns the file's
// columns as Iceberg fields, by the file's field ids or, for a file written
// without them, through the table's name mapping: the same conversion
// iceberg-go's scan applies.
func fileSchema(meta table.Metadata, fs iceio.IO, path string, size int64) (*iceberg.Schema, error) {
	var src parquet.ReaderAtSeeker
	if rf, ok := fs.(iceio.ReadFileIO); ok && size > 0 && size <= WholeFileBytes && !catalogs.IsLocal(path) {
		b, err := rf.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read data file %s: %w", path, err)
		}
		src = bytes.NewReader(b)
	} else {
		f, err := fs.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open data file %s: %w", path, err)
		}
		defer f.Close()
		src = f
	}
	rdr, err := file.NewParquetReader(src)
	if err != nil {
		return nil, refuse(path, "", "not a readable Parquet file: %v", err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	sc, err := pqarrow.FromParquet(md.Schema, &pqarrow.ArrowReadProperties{}, md.KeyValueMetadata())
	if err != nil {
		return nil, refuse(path, "", "Parquet schema: %v", err)
	}
	mapping := meta.NameMapping()
	if !hasFieldIDs(sc.Fields()) && mapping == nil {
		return nil, refuse(path, "", "the file has no field ids and the table has no name mapping (%s)", table.DefaultNameMappingKey)
	}
	is, err := table.ArrowSchemaToIcebergWithOptions(sc, table.ArrowToIcebergOptions{
		NameMapping: mapping, TableSchema: meta.CurrentSchema(), TableProperties: meta.Properties(),
	})
	if err != nil {
		return nil, refuse(path, "", "map the file's columns to table fields: %v", err)
	}
	return is, nil
}

// hasFieldIDs reports whether any field carries a Parquet field id
// (pqarrow spells a missing one -1).
func hasFieldIDs(fields []arrow.Field) bool {
	for _, f := range fields {
		if id, ok := f.Metadata.GetValue("PARQUET:field_id"); ok && id != "-1" {
			return true
		}
	}
	return false
}

// checkField reports whether the file stores f (by field id) and, when it
// does, that its type reads as f's type without loss, recursively for
// nested types. A nested field the file lacks is left to the scan (NULL or
// initial-default) unless it is required without a default or is the source
// of an identity partition field: those are refused.
func checkField(path string, fileSchema *iceberg.Schema, f iceberg.NestedField, name string, identity map[int]any) (bool, error) {
	ff, ok := fileSchema.FindFieldByID(f.ID)
	if !ok {
		return false, nil
	}
	if err := readableAs(ff.Type, f.Type); err != nil {
		return true, refuse(path, colName(name, f.ID), "%v", err)
	}
	for _, child := range nestedFields(f.Type) {
		cname := name + "." + child.Name
		present, err := checkField(path, fileSchema, child, cname, identity)
		if err != nil {
			return true, err
		}
		if present {
			continue
		}
		if _, ok := identity[child.ID]; ok {
			return true, refuse(path, colName(cname, child.ID), "nested identity-partition source not in the file: filling nested columns from the partition tuple is not supported")
		}
		if child.Required && child.InitialDefault == nil {
			return true, refuse(path, colName(cname, child.ID), "required, not in the file, with no initial-default")
		}
	}
	return true, nil
}

// storesPlainUUID reports whether the file stores f, a top-level uuid
// column, as fixed[16]: a FIXED_LEN_BYTE_ARRAY(16) without the UUID logical
// type, which the spec's uuid is (PyIceberg before its uuid extension type
// and plain Parquet writers leave it so). Inside a nested type the same
// layout is refused (readableAs).
func storesPlainUUID(fileSchema *iceberg.Schema, f iceberg.NestedField) bool {
	if _, ok := f.Type.(iceberg.UUIDType); !ok {
		return false
	}
	ff, ok := fileSchema.FindFieldByID(f.ID)
	if !ok {
		return false
	}
	fixed, ok := ff.Type.(iceberg.FixedType)
	return ok && fixed.Len() == 16
}

// nestedFields returns the child fields of a struct, list or map type.
func nestedFields(t iceberg.Type) []iceberg.NestedField {
	if n, ok := t.(iceberg.NestedType); ok {
		return n.Fields()
	}
	return nil
}

// readableAs checks that a file column of type file reads as table type
// want exactly: the same type, or a promotion Iceberg allows without
// rewriting data (int → long, float → double, decimal precision widening at
// the same scale). Nested types compare their kind here; their fields are
// checked one by one.
func readableAs(file, want iceberg.Type) error {
	if file.Equals(want) {
		return nil
	}
	switch w := want.(type) {
	case iceberg.Int64Type:
		if _, ok := file.(iceberg.Int32Type); ok {
			return nil
		}
	case iceberg.Float64Type:
		if _, ok := file.(iceberg.Float32Type); ok {
			return nil
		}
	case iceberg.DecimalType:
		if fd, ok := file.(iceberg.DecimalType); ok && fd.Scale() == w.Scale() && fd.Precision() <= w.Precision() {
			return nil
		}
	case iceberg.UUIDType:
		// A top-level one is read (storesPlainUUID); iceberg-go's scan
		// cannot cast fixed[16] to its uuid type, and Read relabels only
		// top-level columns.
		if f, ok := file.(iceberg.FixedType); ok && f.Len() == 16 {
			return fmt.Errorf("the file stores it as a plain FIXED_LEN_BYTE_ARRAY(16) inside a nested type, which is read only as a top-level column")
		}
	case *iceberg.StructType:
		if _, ok := file.(*iceberg.StructType); ok {
			return nil
		}
	case *iceberg.ListType:
		if _, ok := file.(*iceberg.ListType); ok {
			return nil
		}
	case *iceberg.MapType:
		if _, ok := file.(*iceberg.MapType); ok {
			return nil
		}
	}
	return fmt.Errorf("the file stores it as %s, which does not read exactly as the table type %s", file, want)
}

// checkConstant checks that v, a partition value, can be a constant column
// of field f's type.
func checkConstant(f iceberg.NestedField, v any) error {
	if v == nil {
		return nil
	}
	_, err := Literal(f.Type, v)
	return err
}

// Literal converts a partition value, as iceberg-go decodes it from a
// manifest (DataFile.Partition), into a literal of type t.
func Literal(t iceberg.Type, v any) (iceberg.Literal, error) {
	var lit iceberg.Literal
	switch x := v.(type) {
	case bool:
		lit = iceberg.NewLiteral(x)
	case int32:
		lit = iceberg.NewLiteral(x)
	case int64:
		lit = iceberg.NewLiteral(x)
	case int:
		lit = iceberg.NewLiteral(int64(x))
	case float32:
		lit = iceberg.NewLiteral(x)
	case float64:
		lit = iceberg.NewLiteral(x)
	case string:
		lit = iceberg.NewLiteral(x)
	case []byte:
		lit = iceberg.NewLiteral(x)
	case iceberg.Date:
		lit = iceberg.NewLiteral(x)
	case iceberg.Time:
		lit = iceberg.NewLiteral(x)
	case iceberg.Timestamp:
		lit = iceberg.NewLiteral(x)
	case iceberg.TimestampNano:
		lit = iceberg.NewLiteral(x)
	case iceberg.Decimal:
		lit = iceberg.NewLiteral(x)
	case iceberg.Literal:
		lit = x
	case uuid.UUID:
		lit = iceberg.NewLiteral(x)
	case [16]byte:
		lit = iceberg.NewLiteral(uuid.UUID(x))
	default:
		return nil, fmt.Errorf("unsupported partition value type %T", v)
	}
	out, err := lit.To(t)
	if err != nil {
		return nil, fmt.Errorf("partition value %v as %s: %w", v, t, err)
	}
	return out, nil
}
