// Package catalogs opens iceberg-go catalogs for TMS: any catalog type that
// iceberg-go registers (sql, rest, glue, hive, hadoop), chosen by the `type`
// property, plus the local "testdata-style" layout used by tests, replay and the
// demo (a SQLite SQL catalog at DIR/catalog.db and the warehouse at
// DIR/warehouse). It owns no table logic: callers load tables themselves.
//
// Credentials are never read from here: callers pass properties that they got
// from flags, the environment or files.
package catalogs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/hadoop" // registers type=hadoop
	_ "github.com/apache/iceberg-go/catalog/rest"   // registers type=rest
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud/azure" // registers the abfs://, abfss://, wasb:// and wasbs:// FileIO (adls.* properties)
	_ "github.com/apache/iceberg-go/io/gocloud/gcs"   // registers the gs:// FileIO (gcs.* properties)
	_ "github.com/apache/iceberg-go/io/gocloud/s3"    // registers the s3://, s3a://, s3n:// FileIO (s3.* properties)
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver (sql.driver=pgx: a PostgreSQL-backed SQL catalog)
	_ "modernc.org/sqlite"             // registers the pure-Go "sqlite" database/sql driver

	"github.com/tms-dev/tms/internal/invalid"
)

// LocalName is the catalog name of a local testdata-style catalog.
const LocalName = "local"

// ErrInvalidArgument marks bad input: a malformed property, identifier or path.
var ErrInvalidArgument = invalid.New("invalid argument")

// LocalProps returns the iceberg-go properties of the testdata-style catalog
// in dir: a SQLite SQL catalog at dir/catalog.db whose warehouse is
// dir/warehouse. dir is made absolute so table locations do not depend on the
// working directory of whoever reads them later.
func LocalProps(dir string) (iceberg.Properties, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: warehouse dir %q: %v", ErrInvalidArgument, dir, err)
	}
	return iceberg.Properties{
		"type":                "sql",
		sqlcat.DriverKey:      "sqlite",
		sqlcat.DialectKey:     string(sqlcat.SQLite),
		"uri":                 "file:" + filepath.Join(abs, "catalog.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)",
		"warehouse":           "file://" + filepath.Join(abs, "warehouse"),
		"init_catalog_tables": "true",
	}, nil
}

// OpenLocal opens the testdata-style catalog in dir. With create false the
// directory and its catalog.db must already exist, so that a typo in a path is
// reported instead of silently creating an empty catalog.
func OpenLocal(ctx context.Context, dir string, create bool) (catalog.Catalog, error) {
	if !create {
		if _, err := os.Stat(filepath.Join(dir, "catalog.db")); err != nil {
			return nil, fmt.Errorf("%w: warehouse dir %q has no catalog.db (build one with `tms-runner testdata --out %s`)", ErrInvalidArgument, dir, dir)
		}
	} else if err := os.MkdirAll(filepath.Join(dir, "warehouse"), 0o755); err != nil {
		return nil, fmt.Errorf("create warehouse dir %q: %w", dir, err)
	}
	props, err := LocalProps(dir)
	if err != nil {
		return nil, err
	}
	return Open(ctx, LocalName, props)
}

// Open loads the catalog name from props through iceberg-go's registry; the
// `type` property picks the implementation. A REST catalog that signs with
// SigV4 and has its keys in props is built with those keys (see
// RestAccessKeyID).
func Open(ctx context.Context, name string, props iceberg.Properties) (catalog.Catalog, error) {
	if err := CheckProps(name, props); err != nil {
		return nil, err
	}
	cat, ok, err := openREST(ctx, name, props)
	if !ok {
		cat, err = catalog.Load(ctx, name, props)
	}
	if err != nil {
		return nil, fmt.Errorf("open catalog %q: %w", name, err)
	}
	return cat, nil
}

// CheckProps refuses the properties Open refuses before it connects: a
// catalog needs its "type" (or a "uri", which makes it a REST catalog).
func CheckProps(name string, props iceberg.Properties) error {
	if props["type"] == "" && props["uri"] == "" {
		return fmt.Errorf("%w: catalog %q: property \"type\" is required (e.g. --catalog-prop type=rest)", ErrInvalidArgument, name)
	}
	return nil
}

// ParseProps turns repeated `key=value` flags into properties. An entry
// without '=' or with an empty key is an error naming the entry.
func ParseProps(kvs []string) (iceberg.Properties, error) {
	props := iceberg.Properties{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: catalog property %q: want key=value", ErrInvalidArgument, kv)
		}
		props[k] = v
	}
	return props, nil
}

// ParseIdent splits "namespace.table" (or "a.b.table" for nested namespaces)
// into an iceberg identifier.
func ParseIdent(s string) (table.Identifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("%w: table %q: want NAMESPACE.TABLE", ErrInvalidArgument, s)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%w: table %q: empty name part", ErrInvalidArgument, s)
		}
	}
	return table.Identifier(parts), nil
}

// Spec says how to reach a catalog from the command line: either a local
// warehouse directory or explicit iceberg-go properties.
type Spec struct {
	// WarehouseDir is a testdata-style folder (catalog.db + warehouse/).
	WarehouseDir string
	// Name is the catalog name for Props. Defaults to "default".
	Name string
	// Props are iceberg-go catalog properties (type, uri, warehouse, …).
	Props iceberg.Properties
}

// Open opens the catalog the spec names; exactly one of WarehouseDir and
// Props must be set.
func (s Spec) Open(ctx context.Context) (catalog.Catalog, error) {
	switch {
	case s.WarehouseDir != "" && len(s.Props) > 0:
		return nil, fmt.Errorf("%w: give either --warehouse-dir or --catalog-prop, not both", ErrInvalidArgument)
	case s.WarehouseDir != "":
		return OpenLocal(ctx, s.WarehouseDir, false)
	case len(s.Props) > 0:
		name := s.Name
		if name == "" {
			name = "default"
		}
		return Open(ctx, name, s.Props)
	default:
		return nil, fmt.Errorf("%w: no catalog: give --warehouse-dir DIR or --catalog-prop type=…", ErrInvalidArgument)
	}
}

// LoadTable loads ident from cat, wrapping a missing table in a message that
// names it, and any error in one that names the table and the catalog.
func LoadTable(ctx context.Context, cat catalog.Catalog, ident table.Identifier) (*table.Table, error) {
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		in := ""
		if n, ok := cat.(interface{ Name() string }); ok && n.Name() != "" {
			in = fmt.Sprintf(" in catalog %q", n.Name())
		}
		if errors.Is(err, catalog.ErrNoSuchTable) {
			return nil, noSuchTable{name: strings.Join(ident, "."), in: in}
		}
		return nil, fmt.Errorf("load table %s%s: %w", strings.Join(ident, "."), in, err)
	}
	return tbl, nil
}

// IsLocal reports whether a table location or file path is on the local
// file system (a bare path or a file: URI) rather than on object storage,
// where reads are bound by request latency instead of CPU.
func IsLocal(location string) bool {
	return strings.HasPrefix(location, "/") || strings.HasPrefix(location, "file:") || !strings.Contains(location, "://")
}

// IdentString joins an identifier with dots, the form the CLI accepts.
func IdentString(ident table.Identifier) string { return strings.Join(ident, ".") }

// noSuchTable names a missing table and matches catalog.ErrNoSuchTable.
type noSuchTable struct{ name, in string }

func (e noSuchTable) Error() string { return "table " + e.name + " does not exist" + e.in }
func (e noSuchTable) Unwrap() error { return catalog.ErrNoSuchTable }

// ListTables returns the tables in root and every namespace below it (all
// namespaces when root is empty), and how many namespaces it listed. It
// walks namespaces whether the catalog lists only direct children (REST) or
// all descendants (SQL).
func ListTables(ctx context.Context, cat catalog.Catalog, root []string) ([]table.Identifier, int, error) {
	seen := map[string]bool{strings.Join(root, "\x00"): true}
	queue := []table.Identifier{root} // an empty root is the catalog itself
	var out []table.Identifier
	listed := 0
	for len(queue) > 0 {
		ns := queue[0]
		queue = queue[1:]
		if len(ns) > 0 {
			listed++
			for ident, err := range cat.ListTables(ctx, ns) {
				if err != nil {
					return nil, listed, fmt.Errorf("list tables in %s: %w", strings.Join(ns, "."), err)
				}
				out = append(out, ident)
			}
		}
		children, err := cat.ListNamespaces(ctx, ns)
		if err != nil {
			return nil, listed, fmt.Errorf("list namespaces in %q: %w", strings.Join(ns, "."), err)
		}
		for _, c := range children {
			key := strings.Join(c, "\x00")
			if len(c) <= len(ns) || seen[key] {
				continue
			}
			seen[key] = true
			queue = append(queue, c)
		}
	}
	return out, listed, nil
}
