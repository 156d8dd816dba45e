package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/cli"
)

// catalogFlags are the flags every command that reads a table shares.
type catalogFlags struct {
	warehouseDir string
	name         string
	props        []string
}

func (c *catalogFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.warehouseDir, "warehouse-dir", "", "local testdata-style catalog: DIR/catalog.db and DIR/warehouse")
	fs.StringArrayVar(&c.props, "catalog-prop", nil, "iceberg-go catalog property key=value (repeatable): type, uri, warehouse, …")
	fs.StringVar(&c.name, "catalog-name", "default", "catalog name used with --catalog-prop")
}

// open opens the catalog the flags name. Bad flags are usage errors.
func (c *catalogFlags) open(ctx context.Context) (catalog.Catalog, error) {
	props, err := catalogs.ParseProps(c.props)
	if err != nil {
		return nil, cli.UsageError{Err: err}
	}
	cat, err := catalogs.Spec{WarehouseDir: c.warehouseDir, Name: c.name, Props: props}.Open(ctx)
	if err != nil {
		if errors.Is(err, catalogs.ErrInvalidArgument) {
			return nil, cli.UsageError{Err: err}
		}
		return nil, err
	}
	return cat, nil
}

// loadTable parses name and loads it from cat.
func loadTable(ctx context.Context, cat catalog.Catalog, name string) (*table.Table, error) {
	ident, err := catalogs.ParseIdent(name)
	if err != nil {
		return nil, cli.UsageError{Err: err}
	}
	return catalogs.LoadTable(ctx, cat, ident)
}

// allTables lists every table of every top-level namespace of cat, in
// catalog order.
func allTables(ctx context.Context, cat catalog.Catalog) ([]string, error) {
	namespaces, err := cat.ListNamespaces(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var names []string
	for _, ns := range namespaces {
		for ident, err := range cat.ListTables(ctx, ns) {
			if err != nil {
				return nil, fmt.Errorf("list tables: %w", err)
			}
			names = append(names, catalogs.IdentString(ident))
		}
	}
	return names, nil
}
