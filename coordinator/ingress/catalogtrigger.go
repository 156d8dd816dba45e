package ingress

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
)

// This file is the listening side of the catalog trigger (store's
// InstallCatalogTrigger, `tms-coordinator migrate --catalog-trigger`): a
// JDBC-layout catalog in PostgreSQL NOTIFYs every commit, and the
// coordinator enqueues the table's commit-job at once, without polling.

// Catalog listener defaults.
const (
	DefaultCatalogNotifyMinBackoff = time.Second
	DefaultCatalogNotifyMaxBackoff = 30 * time.Second
	// catalogEnqueueTimeout bounds the lookup and enqueue of one commit.
	catalogEnqueueTimeout = 30 * time.Second
	// encodedNamespacePrefix marks iceberg-go's encoded form of a
	// namespace whose levels contain dots.
	encodedNamespacePrefix = "__iceberg_namespace_v1__:"
)

// CatalogNotifyConfig configures ListenCatalogCommits.
type CatalogNotifyConfig struct {
	// DBURL is the PostgreSQL database that holds the catalog's
	// iceberg_tables and the trigger (often TMS's own database). Required.
	DBURL string
	// Schema is the schema of iceberg_tables. Defaults to DBURL's current
	// schema (the first existing schema of its search_path).
	Schema string
	// Catalogs maps a catalog_name of iceberg_tables to the catalog name
	// TMS knows the catalog by, when they differ. Names not in the map are
	// taken as they are.
	Catalogs map[string]string
	// Enqueue enqueues the commit-job of a registered table, e.g.
	// flow.UpsertCommit on the node's engine. Required.
	Enqueue func(ctx context.Context, tableID int64) (created bool, err error)
	// OnCommit, if set, is called for every notification: known says
	// whether it named a registered table, created whether its enqueue made
	// a new row. It must not block.
	OnCommit func(known, created bool)
	// Ready, if set, is called every time the listener is (re)connected and
	// listening.
	Ready func()
	// MinBackoff and MaxBackoff bound the wait before reconnecting; it
	// doubles per failed attempt and resets once listening. Default 1s and
	// 30s.
	MinBackoff, MaxBackoff time.Duration
	// Log receives the listener's logs. Defaults to a no-op logger.
	Log *zap.Logger
}

// ListenCatalogCommits listens for the catalog trigger's notifications on a
// dedicated connection to cfg.DBURL and enqueues the commit-job of each
// table they name, at once. A notification for a table TMS has not
// registered is ignored (debug log). It reconnects with backoff when the
// connection drops; commits notified while it was disconnected are missed
// (PostgreSQL does not keep notifications for absent listeners), so the
// table's next commit, the catalog watcher or its crontab catches up.
//
// It blocks until ctx ends and returns nil then. It returns at once an
// error wrapping invalid.ErrArgument for a bad config and
// store.ErrNotSupported for a SQLite URL.
func ListenCatalogCommits(ctx context.Context, st store.Store, cfg CatalogNotifyConfig) error {
	switch {
	case st == nil:
		return fmt.Errorf("%w: catalog listener: the store is required", invalid.ErrArgument)
	case cfg.DBURL == "":
		return fmt.Errorf("%w: catalog listener: the catalog database URL is required", invalid.ErrArgument)
	case cfg.Enqueue == nil:
		return fmt.Errorf("%w: catalog listener: an enqueue function is required", invalid.ErrArgument)
	case cfg.MinBackoff < 0 || cfg.MaxBackoff < 0:
		return fmt.Errorf("%w: catalog listener: backoff must not be negative", invalid.ErrArgument)
	}
	cfg.MinBackoff = cmp.Or(cfg.MinBackoff, DefaultCatalogNotifyMinBackoff)
	cfg.MaxBackoff = max(cmp.Or(cfg.MaxBackoff, DefaultCatalogNotifyMaxBackoff), cfg.MinBackoff)
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	l := &catalogListener{st: st, cfg: cfg}
	backoff := cfg.MinBackoff
	for {
		listening := false
		err := store.ListenCatalogCommits(ctx, cfg.DBURL, cfg.Schema, func(info store.CatalogListen) {
			listening = true
			l.ready(info)
		}, func(c store.CatalogCommit) { l.commit(ctx, c) })
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, store.ErrNotSupported) || errors.Is(err, invalid.ErrArgument) {
			return err
		}
		if listening {
			backoff = cfg.MinBackoff
		}
		cfg.Log.Warn("catalog listener disconnected; reconnecting", zap.Duration("after", backoff), zap.Error(err))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, cfg.MaxBackoff)
	}
}

// catalogListener turns notifications into enqueues.
type catalogListener struct {
	st  store.Store
	cfg CatalogNotifyConfig
}

func (l *catalogListener) ready(info store.CatalogListen) {
	if info.TriggerInstalled {
		l.cfg.Log.Info("catalog listener: listening for commits", zap.String("schema", info.Schema),
			zap.String("channel", store.CatalogCommitChannel))
	} else {
		l.cfg.Log.Warn("catalog listener: listening, but iceberg_tables in this schema has no TMS trigger, so no commit will be heard: "+
			"run `tms-coordinator migrate --catalog-trigger`", zap.String("schema", info.Schema))
	}
	if l.cfg.Ready != nil {
		l.cfg.Ready()
	}
}

// commit enqueues the commit-job of the table c names, if registered.
func (l *catalogListener) commit(ctx context.Context, c store.CatalogCommit) {
	ctx, cancel := context.WithTimeout(ctx, catalogEnqueueTimeout)
	defer cancel()
	catName := c.Catalog
	if n, ok := l.cfg.Catalogs[catName]; ok {
		catName = n
	}
	ns := catalogNamespace(c.Namespace)
	name := catName + "." + ns + "." + c.Table
	tbl, err := l.st.FindTable(ctx, catName, ns, c.Table)
	if errors.Is(err, store.ErrNotFound) {
		l.cfg.Log.Debug("catalog listener: commit to a table TMS does not maintain; ignored", zap.String("table", name))
		if l.cfg.OnCommit != nil {
			l.cfg.OnCommit(false, false)
		}
		return
	}
	if err != nil {
		l.cfg.Log.Error("catalog listener: look up table; commit dropped", zap.String("table", name), zap.Error(err))
		return
	}
	created, err := l.cfg.Enqueue(ctx, tbl.ID)
	if err != nil {
		l.cfg.Log.Error("catalog listener: enqueue commit-job; commit dropped", zap.String("table", name), zap.Error(err))
		return
	}
	l.cfg.Log.Debug("catalog listener: commit-job enqueued", zap.String("table", name), zap.Int64("table_id", tbl.ID), zap.Bool("created", created))
	if l.cfg.OnCommit != nil {
		l.cfg.OnCommit(true, created)
	}
}

// catalogNamespace turns iceberg_tables.table_namespace into TMS's form
// (levels joined with "."): iceberg-go stores a namespace whose levels
// contain dots as a prefixed JSON array.
func catalogNamespace(s string) string {
	rest, ok := strings.CutPrefix(s, encodedNamespacePrefix)
	if !ok {
		return s
	}
	var levels []string
	if err := json.Unmarshal([]byte(rest), &levels); err != nil || len(levels) == 0 {
		return s
	}
	return strings.Join(levels, ".")
}
