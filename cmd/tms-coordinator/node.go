package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/tms-dev/tms/coordinator/config"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/reconcile"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
)

// Node is one serve process, wired from its configuration: the ledger,
// the submitter, the flow and its reconciler, the scheduling engine, the
// HTTP API and the commit ingress. NewNode builds it and touches the
// database; Run runs its actors together; Close releases what NewNode
// opened.
type Node struct {
	log      *zap.Logger
	out      io.Writer // where Run says it serves
	catalogs []flow.CatalogConfig

	sub   closer
	st    store.Store
	fl    *flow.Flow
	rec   *reconcile.Reconciler
	eng   *scheduler.Engine
	api   *httpAPI
	watch *commitWatch
}

// NewNode builds the node of cfg, whose references res holds read: the
// submitter, then the database (migrated and opened), the flow, the
// reconciler, the HTTP listener (bound now, so that a busy port fails
// before anything is claimed), the engine and the HTTP server, and the
// singleton recurring rows every node inserts if missing. On an error it
// closes what it opened.
func NewNode(ctx context.Context, cfg *config.Config, res *config.Resolved, log *zap.Logger, out io.Writer) (n *Node, err error) {
	n = &Node{log: log, out: out, catalogs: res.Catalogs, api: newHTTPAPI(cfg.Listen, res)}
	defer func() {
		if err != nil {
			n.Close()
			n = nil
		}
	}()
	if n.sub, err = newSubmitter(cfg, res, log); err != nil {
		return n, cli.UsageError{Err: err}
	}
	if _, err := store.Migrate(ctx, cfg.DB, log); err != nil {
		return n, classify(err)
	}
	if n.st, err = store.Open(ctx, cfg.DB, log); err != nil {
		return n, classify(err)
	}
	if g, ok := n.sub.(*submit.GravitinoSubmitter); ok {
		g.SetClaimed(claimedBy(n.st))
	}
	n.fl, err = flow.NewFlow(n.st, n.sub, flow.FlowConfig{DBURL: cfg.DB, Catalogs: res.Catalogs, EnqueueBatchSize: cfg.ExpandBatch,
		MinInterval: res.MinInterval, CommitDelay: cfg.CommitDelay, Log: log})
	if err != nil {
		return n, cli.UsageError{Err: err}
	}
	n.rec = reconcile.NewReconciler(n.st, n.sub, reconcile.ReconcilerConfig{Log: log})
	if err := n.api.prepare(ctx, n.st); err != nil {
		return n, err
	}
	engCfg := scheduler.Config{NodeID: cfg.NodeID, PollInterval: cfg.PollInterval, HeartbeatInterval: cfg.HeartbeatInterval, Log: log,
		Pools: map[string]int{flow.KindPolicyExpand: cfg.ExpandThreads, flow.KindCronJob: cfg.CronThreads, flow.KindCommitJob: cfg.CommitThreads}}
	n.api.observe(&engCfg)
	engCfg.OnDrained = func() { drainSubmitter(ctx, n.sub, n.rec, log) }
	if n.eng, err = scheduler.New(n.st, engCfg, n.fl.Kinds(n.rec, cfg.ReconcileInterval)...); err != nil {
		return n, cli.UsageError{Err: err}
	}
	n.rec.WatchNodes(n.eng)
	if err := n.api.build(n.st, n.sub, n.eng, n.fl, log); err != nil {
		return n, err
	}
	if n.watch, err = newCommitWatch(cfg, n.st, n.fl, n.eng, n.api, log); err != nil {
		return n, cli.UsageError{Err: err}
	}
	// The singleton recurring rows; every node inserts them if missing.
	now := time.Now()
	for _, k := range []store.TaskKey{flow.SyncKey, flow.ReconcileKey} {
		if _, err := n.eng.Schedule(ctx, store.NewTask{TaskKey: k, ExecutionTime: now}); err != nil {
			return n, classify(err)
		}
	}
	return n, nil
}

// Run runs the node's actors until ctx ends or one of them fails, then
// stops them all and returns the first error: the engine (on ctx's end
// it drains: the submitter's runners are waited for and their rows
// closed while the node still heartbeats), the HTTP server and the commit
// ingress (both stop with ctx: requests in progress get the server's
// shutdown timeout), and the start-up sweep. The engine's
// scheduler.ErrWatchdog is returned as it is.
func (n *Node) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return n.api.serve(gctx) })
	fmt.Fprintf(n.out, "tms-coordinator: serving as node %s on %s backend, HTTP on %s\n", n.eng.NodeID(), n.st.Backend(), n.api.addr())
	g.Go(func() error { n.watch.run(gctx); return nil })
	g.Go(func() error { n.startup(gctx); return nil })
	g.Go(func() error { return n.eng.Run(gctx) })
	return g.Wait()
}

// startup runs once the engine is ready: it records this node's catalogs
// (attachments to others are refused by the policy commands and the API,
// and listed by status), and closes at once what an earlier process under
// this node's id left in flight (its queue and runners did not survive
// it), rather than at the next reconcile.
func (n *Node) startup(ctx context.Context) {
	select {
	case <-n.eng.Ready():
	case <-ctx.Done():
		return
	}
	var names []string
	for _, c := range n.catalogs {
		names = append(names, c.Name)
	}
	if err := n.st.SetNodeCatalogs(ctx, n.eng.NodeID(), names); err != nil {
		n.log.Warn("could not record this node's catalogs", zap.Error(err))
	}
	if rep, err := n.rec.Sweep(ctx); err != nil {
		n.log.Warn("start-up reconcile failed; the recurring one tries again", zap.Error(err))
	} else if closed := rep.Closed[store.StatusLost] + rep.Closed[store.StatusFailed] + rep.Closed[store.StatusCancelled]; closed > 0 {
		n.log.Info("start-up reconcile closed rows", zap.Int("closed", closed))
	}
}

// Close releases what NewNode opened: the HTTP listener if no server ran
// on it, the flow, the database, then the submitter (given a minute).
func (n *Node) Close() {
	n.api.close()
	if n.fl != nil {
		n.fl.Close()
	}
	if n.st != nil {
		n.st.Close()
	}
	if n.sub != nil {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = n.sub.Close(cctx)
	}
}

// drainSubmitter is serve's graceful stop of its submitter, run while the
// node still heartbeats: the submitter drops its queued jobs (they end
// cancelled) and waits up to a minute for its runners (then stops them);
// the rows that no runner will close are closed now. Until it returns no
// other node takes this one for dead and closes its runners' rows.
func drainSubmitter(ctx context.Context, sub submit.Submitter, rec *reconcile.Reconciler, log *zap.Logger) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if c, ok := sub.(interface{ Close(context.Context) error }); ok {
		if err := c.Close(cctx); err != nil {
			log.Warn("submitter close", zap.Error(err))
		}
	}
	if rep, err := rec.Sweep(cctx); err != nil {
		log.Warn("shutdown reconcile failed; another node's reconciler closes what is left", zap.Error(err))
	} else if n := rep.Closed[store.StatusCancelled] + rep.Closed[store.StatusFailed] + rep.Closed[store.StatusLost]; n > 0 {
		log.Info("shutdown reconcile closed rows", zap.Int("closed", n))
	}
}
