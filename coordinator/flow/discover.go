package flow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/store"
)

// discoverLoadConcurrency bounds the table metadata loads Discover runs at
// once: each load reads one metadata file from the catalog's storage.
const discoverLoadConcurrency = 8

// Object is what a policy attaches to: a whole catalog, a namespace (and the
// namespaces below it) or one table.
type Object struct {
	// Catalog is the catalog name as configured in TMS.
	Catalog string
	// Namespace is the namespace levels; empty for the whole catalog.
	Namespace []string
	// Table is the table name; empty for a catalog or a namespace.
	Table string
}

// String returns CATALOG[.NAMESPACE[.TABLE]].
func (o Object) String() string {
	parts := slices.Concat([]string{o.Catalog}, o.Namespace)
	if o.Table != "" {
		parts = append(parts, o.Table)
	}
	return strings.Join(parts, ".")
}

// DiscoverReport says what Discover found.
type DiscoverReport struct {
	// Tables are the registered rows of every table found, in listing order.
	Tables []store.Table
	// Namespaces is the number of namespaces listed.
	Namespaces int
	// Vanished counts tables that were listed but dropped before their
	// metadata could be read; they are not registered.
	Vanished int
}

// Discover lists the Iceberg tables under obj through cat and registers
// each in st with its table-uuid, so that a dropped and recreated table
// becomes a new row. A namespace includes the namespaces below it, whether
// the catalog lists only direct children (REST) or all descendants (SQL).
// Registering is idempotent: discovering again returns the same rows.
//
// An object that does not exist is an error naming it; a table dropped
// between listing and loading is counted in Vanished and skipped.
func Discover(ctx context.Context, st store.Store, cat catalog.Catalog, obj Object, log *zap.Logger) (DiscoverReport, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if obj.Catalog == "" {
		return DiscoverReport{}, errors.New("discover: object has no catalog name")
	}
	var (
		rep    DiscoverReport
		idents []table.Identifier
	)
	if obj.Table != "" {
		if len(obj.Namespace) == 0 {
			return rep, fmt.Errorf("discover %s: a table needs a namespace", obj)
		}
		idents = []table.Identifier{slices.Concat(obj.Namespace, []string{obj.Table})}
	} else {
		var err error
		if idents, rep.Namespaces, err = catalogs.ListTables(ctx, cat, obj.Namespace); err != nil {
			return rep, fmt.Errorf("discover %s: %w", obj, err)
		}
	}

	found := make([]*store.Table, len(idents))
	var vanished sync.Map
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(discoverLoadConcurrency)
	for i, ident := range idents {
		eg.Go(func() error {
			tbl, err := cat.LoadTable(gctx, ident)
			if errors.Is(err, catalog.ErrNoSuchTable) && obj.Table == "" {
				vanished.Store(i, true)
				return nil
			}
			if err != nil {
				return fmt.Errorf("load table %s.%s: %w", obj.Catalog, strings.Join(ident, "."), err)
			}
			row, err := st.RegisterTable(gctx, store.TableRef{
				Catalog:   obj.Catalog,
				Namespace: strings.Join(ident[:len(ident)-1], "."),
				Name:      ident[len(ident)-1],
				UUID:      tbl.Metadata().TableUUID().String(),
			})
			if err != nil {
				return fmt.Errorf("register table %s.%s: %w", obj.Catalog, strings.Join(ident, "."), err)
			}
			found[i] = &row
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return DiscoverReport{}, fmt.Errorf("discover %s: %w", obj, err)
	}
	for i, t := range found {
		if t == nil {
			rep.Vanished++
			log.Info("table vanished during discovery", zap.String("table", obj.Catalog+"."+strings.Join(idents[i], ".")))
			continue
		}
		rep.Tables = append(rep.Tables, *t)
	}
	log.Info("discovered tables", zap.Stringer("object", obj), zap.Int("tables", len(rep.Tables)),
		zap.Int("namespaces", rep.Namespaces), zap.Int("vanished", rep.Vanished))
	return rep, nil
}
