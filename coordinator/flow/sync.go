package flow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/iceberg-go/catalog"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/store"
)

// ---- sync: policies → policy-expand rows, attachments → tables ----

// Sync makes every live policy's policy-expand row match it and registers
// the tables under every enabled policy's attachments that the ledger does
// not know yet. A table attachment's table is loaded every time, so a
// dropped and recreated one is registered as its new row within one sync;
// under a namespace or catalog attachment a table known by name is not
// loaded again: its recreation is registered by the runner that finds the
// table-uuid changed (the job fails, the next trigger runs on the new row),
// by the catalog watcher, or by `discover`. An attachment to a catalog the
// coordinator is not configured with is logged and skipped.
func (f *Flow) Sync(ctx context.Context, sch store.Scheduler, now time.Time) error {
	policies, err := f.st.ListPolicies(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range policies {
		if err := SyncPolicyTask(ctx, sch, p, now); err != nil {
			errs = append(errs, fmt.Errorf("policy %q: %w", p.Name, err))
		}
		if !p.Enabled {
			continue
		}
		atts, err := f.st.ListAttachments(ctx, p.ID)
		if err != nil {
			return err
		}
		for _, a := range atts {
			if err := f.register(ctx, a.Object); err != nil {
				errs = append(errs, fmt.Errorf("policy %q attachment %s: %w", p.Name, a.Object, err))
			}
		}
	}
	return errors.Join(errs...)
}

// register registers the unknown tables under obj.
func (f *Flow) register(ctx context.Context, obj store.PolicyObject) error {
	cat, err := f.Catalog(ctx, obj.Catalog)
	if err != nil {
		return err
	}
	var ns []string
	if obj.Namespace != "" {
		ns = strings.Split(obj.Namespace, ".")
	}
	target := Object{Catalog: obj.Catalog, Namespace: ns, Table: obj.Table}
	if obj.Table != "" {
		// One load per table attachment and interval: registering by
		// table-uuid picks up a dropped and recreated table as a new row.
		_, err := Discover(ctx, f.st, cat, target, f.cfg.Log)
		if errors.Is(err, catalog.ErrNoSuchTable) {
			if _, ferr := f.st.FindTable(ctx, obj.Catalog, obj.Namespace, obj.Table); ferr == nil {
				return nil // dropped since it was registered: its jobs say so
			}
		}
		return err
	}
	idents, _, err := catalogs.ListTables(ctx, cat, ns)
	if err != nil {
		return err
	}
	for _, ident := range idents {
		tns, name := strings.Join(ident[:len(ident)-1], "."), ident[len(ident)-1]
		if _, err := f.st.FindTable(ctx, obj.Catalog, tns, name); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		_, err := Discover(ctx, f.st, cat, Object{Catalog: obj.Catalog, Namespace: ident[:len(ident)-1], Table: name}, f.cfg.Log)
		if err != nil && !errors.Is(err, catalog.ErrNoSuchTable) {
			return err
		}
	}
	return nil
}
