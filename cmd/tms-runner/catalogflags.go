package main

import (
	"context"
	"errors"
	"maps"

	"github.com/apache/iceberg-go"
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
	propsFile    string
}

func (c *catalogFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.warehouseDir, "warehouse-dir", "", "local testdata-style catalog: DIR/catalog.db and DIR/warehouse")
	fs.StringArrayVar(&c.props, "catalog-prop", nil, "iceberg-go catalog property key=value (repeatable): type, uri, warehouse, …")
	fs.StringVar(&c.name, "catalog-name", "default", "catalog name used with --catalog-prop")
	fs.StringVar(&c.propsFile, "catalog-props-file", "", "file of key=value catalog properties (credentials) overlaid onto --catalog-prop, as TMS_CATALOG_PROP_<KEY> variables are")
}

// overlay returns the secret catalog properties of the environment
// (TMS_CATALOG_PROP_*) and --catalog-props-file, the file winning.
func (c *catalogFlags) overlay() (iceberg.Properties, error) {
	return catalogOverlay(c.propsFile, "")
}

// open opens the catalog the flags name, --catalog-prop properties with the
// overlay on top. Bad flags are usage errors.
func (c *catalogFlags) open(ctx context.Context) (catalog.Catalog, error) {
	props, err := catalogs.ParseProps(c.props)
	if err != nil {
		return nil, cli.UsageError{Err: err}
	}
	if len(props) > 0 {
		overlay, err := c.overlay()
		if err != nil {
			return nil, err
		}
		maps.Copy(props, overlay)
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

// allTables lists every table of cat, in every namespace at any depth, in
// catalog order.
func allTables(ctx context.Context, cat catalog.Catalog) ([]string, error) {
	idents, _, err := catalogs.ListTables(ctx, cat, nil)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(idents))
	for i, ident := range idents {
		names[i] = catalogs.IdentString(ident)
	}
	return names, nil
}
