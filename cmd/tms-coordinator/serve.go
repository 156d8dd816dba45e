package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/reconcile"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/secretref"
	"github.com/tms-dev/tms/store"
)

// ExitWatchdog is serve's exit code when the node lost the database for
// longer than the watchdog timeout: its supervisor restarts it.
const exitWatchdog = 5

// flowFlags are the flags of the commands that run or feed the flow.
type flowFlags struct {
	db           string
	warehouseDir string
	catalogName  string
	props        []string
	secrets      []string
	commitDelay  time.Duration
}

func (f *flowFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.db, "db", dbFromEnv(), "database URL: postgres://… or sqlite://PATH (env TMS_DB)")
	fs.StringVar(&f.warehouseDir, "warehouse-dir", "", "local testdata-style catalog folder, known as catalog \"local\"")
	fs.StringVar(&f.catalogName, "catalog", "", "name of the catalog given by --catalog-prop")
	fs.StringArrayVar(&f.props, "catalog-prop", nil, "non-secret iceberg-go catalog property key=value (repeatable)")
	fs.StringArrayVar(&f.secrets, "catalog-secret", nil, "credential catalog property key=env:NAME or key=file:PATH (repeatable); passed to runners through their environment only")
	fs.DurationVar(&f.commitDelay, "commit-delay", flow.DefaultCommitDelay, "how long a commit-job waits for more commits to the table")
}

// catalogs returns the configured catalogs.
func (f *flowFlags) catalogs() ([]flow.CatalogConfig, error) {
	var out []flow.CatalogConfig
	if f.warehouseDir != "" {
		out = append(out, flow.CatalogConfig{Name: catalogs.LocalName, WarehouseDir: f.warehouseDir})
	}
	if len(f.props) == 0 && len(f.secrets) == 0 {
		if f.catalogName != "" {
			return nil, cli.Usagef("--catalog %q needs --catalog-prop", f.catalogName)
		}
		return out, nil
	}
	if f.catalogName == "" {
		return nil, cli.Usagef("--catalog NAME is required with --catalog-prop and --catalog-secret")
	}
	props, err := catalogs.ParseProps(f.props)
	if err != nil {
		return nil, cli.UsageError{Err: err}
	}
	secrets := map[string]string{}
	for _, kv := range f.secrets {
		k, ref, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, cli.Usagef("--catalog-secret %q: want key=env:NAME or key=file:PATH", k)
		}
		v, err := secretref.Resolve(ref)
		if err != nil {
			return nil, cli.Usagef("--catalog-secret %s: %v", k, err)
		}
		secrets[k] = v
	}
	return append(out, flow.CatalogConfig{Name: f.catalogName, Properties: props, Secrets: secrets}), nil
}

func runServe(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "serve", env.Stderr)
	var (
		ff                                       flowFlags
		configPath, runnerPath, logDir, nodeID   string
		maxRunning, expandBatch                  int
		expandThreads, cronThreads, commitThread int
		poll, heartbeat, reconcileEv             time.Duration
		minIntervals                             []string
		sf                                       submitterFlags
	)
	ff.register(fs)
	var (
		hf httpFlags
		wf watchFlags
	)
	hf.register(fs)
	wf.register(fs)
	fs.StringVar(&configPath, "config", os.Getenv("TMS_CONFIG"), "configuration file of "+configPrefix+"* keys (env TMS_CONFIG); flags and TMS_* variables win over it")
	fs.StringArrayVar(&minIntervals, "min-interval", nil, "TYPE=DURATION: a type's cooldown when its policy sets no minIntervalMs (task.<type>.minIntervalMs; repeatable)")
	fs.IntVar(&expandThreads, "expand-threads", 4, "threads of the policy-expand pool")
	fs.IntVar(&cronThreads, "cron-threads", 8, "threads of the cron-job pool")
	fs.IntVar(&commitThread, "commit-threads", 4, "threads of the commit-job pool")
	fs.StringVar(&runnerPath, "runner", "", "tms-runner binary (default: next to this binary, else on PATH)")
	fs.IntVar(&maxRunning, "max-running", 4, "runners running at once on this node")
	fs.StringVar(&logDir, "log-dir", "./tms-logs", "folder of the per-job runner logs")
	fs.StringVar(&nodeID, "node-id", "", "this node's id (default: host-pid-random)")
	sf.register(fs)
	fs.IntVar(&expandBatch, "expand-batch", flow.DefaultEnqueueBatchSize, "cron-job rows one policy-expand pick enqueues (expand.enqueueBatchSize)")
	fs.DurationVar(&poll, "poll-interval", scheduler.DefaultPollInterval, "how often idle pools look for due tasks")
	fs.DurationVar(&heartbeat, "heartbeat-interval", scheduler.DefaultHeartbeatInterval, "node and claim heartbeat interval")
	fs.DurationVar(&reconcileEv, "reconcile-interval", flow.DefaultReconcileInterval, "how often the reconciler sweeps in-flight jobs")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	file, err := applyConfig(fs, configPath)
	if err != nil {
		return err
	}
	if err := wf.check(ff.db); err != nil {
		return err
	}
	api, err := hf.resolve()
	if err != nil {
		return err
	}
	cats, err := ff.catalogs()
	if err != nil {
		return err
	}
	fileCats, err := file.catalogConfigs()
	if err != nil {
		return err
	}
	if cats, err = mergeCatalogs(cats, fileCats); err != nil {
		return err
	}
	cooldowns, err := minIntervalsByType(file, minIntervals)
	if err != nil {
		return err
	}
	sub, err := sf.submitter(submit.LocalConfig{RunnerPath: runnerPath, MaxRunning: maxRunning, LogDir: logDir, Log: env.Log}, file)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = sub.Close(cctx)
	}()
	if _, err := store.Migrate(ctx, ff.db, env.Log); err != nil {
		return classify(err)
	}
	st, err := store.Open(ctx, ff.db, env.Log)
	if err != nil {
		return classify(err)
	}
	defer st.Close()
	if g, ok := sub.(*submit.GravitinoSubmitter); ok {
		g.SetClaimed(claimedBy(st))
	}
	sch, err := store.TasksOf(st)
	if err != nil {
		return err
	}
	fl, err := flow.NewFlow(st, sub, flow.FlowConfig{DBURL: ff.db, Catalogs: cats, EnqueueBatchSize: expandBatch,
		MinInterval: cooldowns, CommitDelay: ff.commitDelay, Log: env.Log})
	if err != nil {
		return cli.UsageError{Err: err}
	}
	defer fl.Close()
	rec := reconcile.NewReconciler(st, sub, reconcile.ReconcilerConfig{Log: env.Log})
	if err := api.prepare(ctx, st); err != nil {
		return err
	}
	engCfg := scheduler.Config{NodeID: nodeID, PollInterval: poll, HeartbeatInterval: heartbeat, Log: env.Log,
		Pools: map[string]int{flow.KindPolicyExpand: expandThreads, flow.KindCronJob: cronThreads, flow.KindCommitJob: commitThread}}
	api.observe(&engCfg)
	engCfg.OnDrained = func() { drainSubmitter(ctx, sub, rec, env.Log) }
	eng, err := scheduler.New(sch, engCfg, fl.Kinds(rec, reconcileEv)...)
	if err != nil {
		_ = api.serve(ctx) // closes the listener
		return cli.UsageError{Err: err}
	}
	rec.WatchNodes(eng)
	if err := api.build(st, sub, eng, fl, env.Log); err != nil {
		_ = api.serve(ctx)
		return err
	}
	// The singleton recurring rows; every node inserts them if missing.
	now := time.Now()
	for _, k := range []store.TaskKey{flow.SyncKey, flow.ReconcileKey} {
		if _, err := eng.Schedule(ctx, store.NewTask{TaskKey: k, ExecutionTime: now}); err != nil {
			return classify(err)
		}
	}
	httpCtx, stopHTTP := context.WithCancel(ctx)
	httpDone := make(chan error, 1)
	go func() { httpDone <- api.serve(httpCtx) }()
	fmt.Fprintf(env.Stderr, "tms-coordinator: serving as node %s on %s backend, HTTP on %s\n", eng.NodeID(), st.Backend(), api.addr())
	waitWatch, err := wf.start(httpCtx, ff.db, st, fl, eng, api, env.Log)
	if err != nil {
		stopHTTP()
		<-httpDone
		return err
	}
	// A node that restarts under its id closes what its earlier process
	// left in flight (its queue and runners did not survive it) at once,
	// rather than at the next reconcile.
	go func() {
		select {
		case <-eng.Ready():
		case <-ctx.Done():
			return
		}
		// Say which catalogs this node has: attachments to others are
		// refused by the policy commands and the API, and listed by status.
		var names []string
		for _, c := range cats {
			names = append(names, c.Name)
		}
		if err := sch.SetNodeCatalogs(ctx, eng.NodeID(), names); err != nil {
			env.Log.Warn("could not record this node's catalogs", zap.Error(err))
		}
		if rep, err := rec.Sweep(ctx); err != nil {
			env.Log.Warn("start-up reconcile failed; the recurring one tries again", zap.Error(err))
		} else if n := rep.Closed[store.StatusLost] + rep.Closed[store.StatusFailed] + rep.Closed[store.StatusCancelled]; n > 0 {
			env.Log.Info("start-up reconcile closed rows", zap.Int("closed", n))
		}
	}()
	err = eng.Run(ctx)
	stopHTTP()
	waitWatch()
	if herr := <-httpDone; herr != nil && err == nil {
		err = herr
	}
	if errors.Is(err, scheduler.ErrWatchdog) {
		return cli.ExitError{Code: exitWatchdog, Err: err}
	}
	return err
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

func runEnqueueCommit(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "enqueue-commit", env.Stderr)
	var (
		ff   flowFlags
		name string
	)
	ff.register(fs)
	fs.StringVar(&name, "table", "", "CATALOG.NAMESPACE.TABLE that got a commit (required)")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	parts := strings.Split(name, ".")
	if len(parts) < 3 || slices.Contains(parts, "") {
		return cli.Usagef("--table %q: want CATALOG.NAMESPACE.TABLE", name)
	}
	st, err := store.Open(ctx, ff.db, env.Log)
	if err != nil {
		return classify(err)
	}
	defer st.Close()
	catName, ns, tbl := parts[0], strings.Join(parts[1:len(parts)-1], "."), parts[len(parts)-1]
	row, err := st.FindTable(ctx, catName, ns, tbl)
	if errors.Is(err, store.ErrNotFound) {
		return cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("table %s is not registered: attach a policy to it (serve registers tables under attachments)", name)}
	}
	if err != nil {
		return classify(err)
	}
	sch, err := store.TasksOf(st)
	if err != nil {
		return err
	}
	if _, _, err := flow.UpsertCommitJob(ctx, sch, row.ID, time.Now(), flow.ResolveCommitDelay(ff.commitDelay)); err != nil {
		return classify(err)
	}
	_, err = fmt.Fprintf(env.Stdout, "commit-job for %s (table %d) enqueued\n", name, row.ID)
	return err
}
