package main

import (
	"cmp"
	"context"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
)

// watchFlags are serve's commit-ingress flags beyond the webhook: the
// catalog watcher and the catalog trigger's NOTIFY listener.
type watchFlags struct {
	every                  time.Duration
	concurrency            int
	notify                 bool
	notifyDB, notifySchema string
}

func (w *watchFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&w.every, "watch-interval", 0, "poll the catalogs of tables with an onCommit policy this often, e.g. 60s (0: off)")
	fs.IntVar(&w.concurrency, "watch-concurrency", ingress.DefaultWatchConcurrency, "table loads one catalog-watcher poll runs at once")
	fs.BoolVar(&w.notify, "catalog-notify", false, "listen for commits NOTIFYed by the catalog trigger (tms-coordinator migrate --catalog-trigger)")
	fs.StringVar(&w.notifyDB, "catalog-notify-db", "", "PostgreSQL URL of the catalog's database (default: --db)")
	fs.StringVar(&w.notifySchema, "catalog-notify-schema", "", "schema of iceberg_tables (default: that URL's current schema)")
}

// check refuses combinations that cannot work, before serve starts.
func (w *watchFlags) check(db string) error {
	if w.notify && strings.HasPrefix(cmp.Or(w.notifyDB, db), "sqlite") {
		return cli.Usagef("--catalog-notify needs the catalog's PostgreSQL database (--catalog-notify-db postgres://…); with SQLite use --watch-interval")
	}
	if w.every < 0 || w.concurrency < 1 {
		return cli.Usagef("--watch-interval must not be negative and --watch-concurrency must be positive")
	}
	return nil
}

// start runs the watcher and the listener that are enabled until ctx ends;
// the returned wait blocks until they stopped.
func (w *watchFlags) start(ctx context.Context, db string, st store.Store, fl *flow.Flow, eng *scheduler.Engine, api *httpAPI, log *zap.Logger) (wait func(), err error) {
	var watcher *ingress.Watcher
	if w.every > 0 {
		watcher, err = ingress.NewWatcher(fl, eng, ingress.WatcherConfig{Interval: w.every, Concurrency: w.concurrency, Log: log.Named("watcher"),
			OnEnqueue: func(created bool) { api.metrics.CommitEnqueued("watcher", created) }})
		if err != nil {
			return nil, cli.UsageError{Err: err}
		}
	}
	var wg sync.WaitGroup
	if watcher != nil {
		wg.Go(func() { _ = watcher.Run(ctx) })
	}
	if w.notify {
		wg.Go(func() {
			err := ingress.ListenCatalogCommits(ctx, st, ingress.CatalogNotifyConfig{
				DBURL: cmp.Or(w.notifyDB, db), Schema: w.notifySchema, Log: log.Named("catalog-notify"),
				Enqueue: func(ctx context.Context, id int64) (bool, error) { return fl.UpsertCommit(ctx, eng, id) },
				OnCommit: func(known, created bool) {
					if known {
						api.metrics.CommitEnqueued("notify", created)
					} else {
						api.metrics.CommitIgnored("notify", ingress.StatusUnknownTable)
					}
				},
			})
			if err != nil {
				log.Error("catalog commit listener stopped", zap.Error(err))
			}
		})
	}
	return wg.Wait, nil
}
