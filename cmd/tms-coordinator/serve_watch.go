package main

import (
	"cmp"
	"context"
	"sync"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/config"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/store"
)

// commitWatch is serve's commit ingress beside the webhook: the catalog
// watcher and the catalog trigger's NOTIFY listener, each when enabled.
type commitWatch struct {
	watcher *ingress.Watcher             // nil: off
	notify  *ingress.CatalogNotifyConfig // nil: off
	st      store.Store
	log     *zap.Logger
}

// newCommitWatch builds what cfg enables (cfg.Validate checked it).
func newCommitWatch(cfg *config.Config, st store.Store, fl *flow.Flow, eng *scheduler.Engine, api *httpAPI, log *zap.Logger) (*commitWatch, error) {
	w := &commitWatch{st: st, log: log}
	if cfg.WatchInterval > 0 {
		var err error
		w.watcher, err = ingress.NewWatcher(fl, eng, ingress.WatcherConfig{Interval: cfg.WatchInterval, Concurrency: cfg.WatchConcurrency, Log: log.Named("watcher"),
			OnEnqueue: func(created bool) { api.metrics.CommitEnqueued("watcher", created) }})
		if err != nil {
			return nil, err
		}
	}
	if cfg.CatalogNotify {
		w.notify = &ingress.CatalogNotifyConfig{
			DBURL: cmp.Or(cfg.CatalogNotifyDB, cfg.DB), Schema: cfg.CatalogNotifySchema, Log: log.Named("catalog-notify"),
			Enqueue: func(ctx context.Context, id int64) (bool, error) { return fl.UpsertCommit(ctx, eng, id) },
			OnCommit: func(known, created bool) {
				if known {
					api.metrics.CommitEnqueued("notify", created)
				} else {
					api.metrics.CommitIgnored("notify", ingress.StatusUnknownTable)
				}
			},
		}
	}
	return w, nil
}

// run runs the watcher and the listener that are enabled until ctx ends.
// Neither stops the node: a listener that gives up is logged.
func (w *commitWatch) run(ctx context.Context) {
	var wg sync.WaitGroup
	if w.watcher != nil {
		wg.Go(func() { _ = w.watcher.Run(ctx) })
	}
	if w.notify != nil {
		wg.Go(func() {
			if err := ingress.ListenCatalogCommits(ctx, w.st, *w.notify); err != nil {
				w.log.Error("catalog commit listener stopped", zap.Error(err))
			}
		})
	}
	wg.Wait()
}
